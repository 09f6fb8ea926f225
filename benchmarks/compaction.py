"""`python -m benchmarks compaction`: compacting a 10k-entry session, and what survives five compactions.

Reports the compaction's own time, the provider view's estimated tokens before and after, and the
estimated input tokens of the first request after the compaction relative to the last one before it
(the user's words lane included: 2,500 user messages, so the lane is at its 20,000-token budget).

The fidelity scenario (`benchmarks/_fidelity.py`, the same session the test suite asserts on) plants
31 instructions in a user's own phrasing, three retractions and rule-like tool and assistant text,
then compacts five times: `fidelity_verbatim_after_5` is the fraction of the planted instructions
found verbatim in the first request after the fifth compaction (with the deterministic summariser
and with a scripted model summariser that drops almost everything; the lower of the two), and
`user_lane_tokens_after_5` the size of the user's words lane then. The same five compactions run
on each backend: `fidelity_verbatim_after_5_lamina` (Lamina's summariser, the figure above) and
`fidelity_verbatim_after_5_server` (the provider's own compaction through the wire server, whose
summary keeps nothing of the conversation: what survives is what Lamina places after the block).
The `summary_call_*` and `prewarm_*` figures: `benchmarks/_cache_summary.py`.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import Figure, _fidelity
from benchmarks._cache_summary import cache_bills
from benchmarks._scenario import engine_with_history
from benchmarks._server_backend import server_fidelity
from lamina.compaction import DeterministicSummariser
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
    lane_10k = 0
    with tempfile.TemporaryDirectory(prefix="lamina-bench-compaction-") as tmp:
        for n in range(runs):
            progress(f"run {n + 1} of {runs}: building a 10,000-entry session")
            engine = engine_with_history(Path(tmp) / f"run{n}", 10_000)
            last_before = _request_tokens(engine.request(engine.prepare_turn("the last request before"), TARGET))
            before_view = engine.compactor.context_tokens()
            started = time.perf_counter()
            outcome = asyncio.run(engine.compactor.compact(DeterministicSummariser(), trigger="threshold"))
            times.append(time.perf_counter() - started)
            assert outcome.status == "compacted", outcome.message
            after_view = engine.compactor.context_tokens()
            turn = engine.prepare_turn("the first request after")
            first_after = _request_tokens(engine.request(turn, TARGET))
            lane_10k = DEFAULT_ESTIMATOR.count(turn.pinned or "")
            ratio = first_after / last_before
            engine.session.close()
        progress("fidelity: 31 planted instructions over five compactions, two summarisers")
        fidelity: list[float] = []
        lane_tokens = 0
        for name, summariser in (
            ("deterministic", _fidelity.deterministic()),
            ("model", _fidelity.scripted_model_summariser()),
        ):
            last = _fidelity.run(Path(tmp) / f"fidelity-{name}", summariser)[-1]
            fidelity.append(len(last.verbatim) / len(last.expected))
            lane_tokens = max(lane_tokens, last.lane_tokens)
        progress("fidelity: the same five compactions by the provider's own (server compaction, the wire server)")
        server = server_fidelity(Path(tmp) / "fidelity-server")
    return [
        Figure("compaction_ms_10k", round(statistics.median(times) * 1e3, 1), "ms", note="deterministic summariser"),
        Figure("view_tokens_before", before_view, "tokens"),
        Figure("view_tokens_after", after_view, "tokens", note="20,000 recent tokens, summary and lane"),
        Figure(
            "first_request_tokens_after_vs_before",
            round(ratio, 4),
            "ratio",
            note=f"user's words lane included ({lane_10k:,} tokens)",
        ),
        Figure("fidelity_verbatim_after_5", round(min(fidelity), 4), "ratio", note="31 planted instructions"),
        Figure(
            "fidelity_verbatim_after_5_lamina",
            round(min(fidelity), 4),
            "ratio",
            note="Lamina's summariser (deterministic and a scripted model's, the lower)",
        ),
        Figure(
            "fidelity_verbatim_after_5_server",
            round(server, 4),
            "ratio",
            note="the provider's compaction (Anthropic's summarize, its block first)",
        ),
        Figure("user_lane_tokens_after_5", lane_tokens, "tokens"),
        *cache_bills(quick=quick, progress=progress),  # the summarising call on the cache, pre-warm on and off
    ]
