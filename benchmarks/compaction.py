"""`python -m benchmarks compaction`: compacting a 10k-entry session with the deterministic summariser.

Reports the compaction's own time, the provider view's estimated tokens before and after, and the
estimated input tokens of the first request after the compaction relative to the last one before it.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import Figure
from benchmarks._scenario import engine_with_history
from lamina.compaction.summarize import DeterministicSummariser
from lamina.placement import AnthropicTarget
from lamina.tokens import DEFAULT_ESTIMATOR

TARGET = AnthropicTarget(model="claude-sonnet-5")


def _request_tokens(body: object) -> int:
    return DEFAULT_ESTIMATOR.count(json.dumps(body))


def run(*, quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    runs = 3 if quick else 7
    times: list[float] = []
    before_view = after_view = 0
    ratio = 0.0
    with tempfile.TemporaryDirectory(prefix="lamina-bench-compaction-") as tmp:
        for n in range(runs):
            progress(f"run {n + 1} of {runs}: building a 10,000-entry session")
            engine = engine_with_history(Path(tmp) / f"run{n}", 10_000)
            last_before = _request_tokens(engine.request(engine.prepare_turn("the last request before"), TARGET))
            before_view = engine.context_tokens()
            started = time.perf_counter()
            outcome = asyncio.run(engine.compact(DeterministicSummariser(), trigger="threshold"))
            times.append(time.perf_counter() - started)
            assert outcome.status == "compacted", outcome.message
            after_view = engine.context_tokens()
            first_after = _request_tokens(engine.request(engine.prepare_turn("the first request after"), TARGET))
            ratio = first_after / last_before
            engine.session.close()
    return [
        Figure("compaction_ms_10k", round(statistics.median(times) * 1e3, 1), "ms", note="deterministic summariser"),
        Figure("view_tokens_before", before_view, "tokens"),
        Figure("view_tokens_after", after_view, "tokens", note="20,000 recent tokens kept verbatim"),
        Figure("first_request_tokens_after_vs_before", round(ratio, 4), "ratio"),
    ]
