"""`python -m benchmarks turn`: the cost of preparing and rendering a turn as history grows.

`prepare_turn` must not depend on the history length (the engine keeps the provider view and the
outbox in memory). Rendering reuses the conversion of completed turns (the engine's render
cache), so it grows only by a list concatenation per turn; serialising the body grows with it.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from benchmarks import Figure
from benchmarks._scenario import engine_with_history
from lamina.placement import AnthropicTarget

ANTHROPIC = AnthropicTarget(model="claude-sonnet-5")


def _median_us(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1e6, 1)


def run(*, quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    repeats = 50 if quick else 300
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="lamina-bench-turn-") as tmp:
        for size, label in ((100, "100"), (1_000, "1k"), (10_000, "10k")):
            progress(f"history of {size} entries")
            engine = engine_with_history(Path(tmp) / label, size)
            prepare: list[float] = []
            renders: list[float] = []
            serialised: list[float] = []
            for i in range(repeats):
                started = time.perf_counter()
                engine.prepare_turn(f"next request {i}")
                prepare.append(time.perf_counter() - started)
            for i in range(30 if size == 10_000 else 0):
                # the engine's render cache converts completed turns once; the first call fills it
                turn = engine.prepare_turn(f"request to render {i}")
                started = time.perf_counter()
                body = engine.request(turn, ANTHROPIC)
                renders.append(time.perf_counter() - started)
                started = time.perf_counter()
                msgspec.json.encode(engine.request(turn, ANTHROPIC))
                serialised.append(time.perf_counter() - started)
                assert body["messages"]
            figures.append(Figure(f"prepare_turn_us_{label}", _median_us(prepare), "us"))
            if renders:
                figures.append(Figure("render_us_10k", _median_us(renders), "us"))
                figures.append(Figure("render_and_serialise_us_10k", _median_us(serialised), "us"))
            engine.session.close()
    small = next(f.value for f in figures if f.name == "prepare_turn_us_100")
    large = next(f.value for f in figures if f.name == "prepare_turn_us_10k")
    figures.append(Figure("prepare_turn_growth_100_to_10k", round(large / small, 2), "x", note="must stay under 2"))
    return figures
