"""The compaction benchmark's latency part: the first token after the threshold, inline or background.

A 60-turn session (a scripted model whose first token takes a second, a user who reads and types
for half a minute between turns) crosses the compaction threshold several times; its summariser
takes 20 seconds. The time from the user's message to the model's first token is measured on
every turn: on the turns after the threshold (the turn a compaction is due or applied at, and the
one after a background compaction started) against the others. Inline, those turns wait for the
summariser; in the background, they should not (goal: within 10% of a normal turn).

The scenario's seconds run scaled (`LAMINA_BENCH_TIME_SCALE`, default 0.02, 0.005 with `--quick`:
the 20-second summary takes 0.4 s), so the figures are milliseconds as measured at that scale; the
summariser's delay is `LAMINA_BENCH_SUMMARY_SECONDS` (scenario seconds, default 20).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

from benchmarks import Figure
from lamina.agent import AgentEvent, AgentOptions, BackgroundCompaction, open_agent
from lamina.compaction import DeterministicSummariser, StructuredSummary, SummaryResult
from lamina.placement import RenderedRequest
from lamina.providers import ProviderEvent, ScriptedProvider, ScriptedResponse, TextDelta
from lamina.session import CompactionBoundary, InMemorySessionStore, Ledger, LogEntry

TURNS = 60
THRESHOLD = 12_000
"""The context's tokens at which the session compacts (it crosses it every dozen turns or so)."""
MODEL_FIRST_TOKEN = 1.0
THINK_TIME = 30.0
"""Scenario seconds between an answer and the user's next message."""


def _scale(quick: bool) -> float:
    return float(os.environ.get("LAMINA_BENCH_TIME_SCALE", "0.005" if quick else "0.02"))


def _summary_seconds() -> float:
    return float(os.environ.get("LAMINA_BENCH_SUMMARY_SECONDS", "20"))


class _SlowSummariser:
    """The deterministic summary, after `delay` seconds (a model's summarising call)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.calls = 0

    async def summarise(
        self, previous: StructuredSummary | None, entries: Sequence[LogEntry], ledger: Ledger, *, focus: str | None
    ) -> SummaryResult:
        self.calls += 1
        await asyncio.sleep(self.delay)
        return await DeterministicSummariser().summarise(previous, entries, ledger, focus=focus)


class _SlowModel(ScriptedProvider):
    """The scripted model, its first token `delay` seconds after the request."""

    def __init__(self, steps: Sequence[ScriptedResponse], delay: float) -> None:
        super().__init__(steps)
        self.delay = delay

    async def stream(self, request: RenderedRequest) -> AsyncIterator[ProviderEvent]:
        await asyncio.sleep(self.delay)
        async for event in super().stream(request):
            yield event


async def _session(root: Path, *, background: bool, scale: float) -> tuple[list[float], list[float], int]:
    """First-token delays (seconds) of the turns after the threshold and of the others; the summariser's calls."""
    summariser = _SlowSummariser(_summary_seconds() * scale)
    answers = [ScriptedResponse(text=f"Answer {n}: " + "detail " * 600) for n in range(TURNS)]
    first: list[float] = []
    started: list[int] = []

    def on_event(event: AgentEvent) -> None:
        if isinstance(event, TextDelta) and len(first) == turn_no:  # the turn's first token
            first.append(time.perf_counter())
        elif isinstance(event, BackgroundCompaction) and event.kind == "started":
            started.append(turn_no)

    options = AgentOptions(
        mode="execute",
        summariser=summariser,
        keep_tokens=2_000,
        user_lane_tokens=1_500,
        prune=None,
        compaction_band=None,
        background_compaction=background,
        on_event=on_event,
    )
    after: list[float] = []
    normal: list[float] = []
    async with open_agent(
        InMemorySessionStore(root), _SlowModel(answers, MODEL_FIRST_TOKEN * scale), workspace=root, options=options
    ) as agent:
        agent.compaction_reserve = agent.provider.capabilities.context_window - THRESHOLD
        for turn_no in range(TURNS):
            boundaries = _boundaries(agent.session.entries())
            sent = time.perf_counter()
            await agent.run_turn(f"Question {turn_no}: keep total() correct. " + "context " * 60)
            delay = first[turn_no] - sent
            compacted = _boundaries(agent.session.entries()) > boundaries
            (after if compacted or turn_no - 1 in started else normal).append(delay)
            await asyncio.sleep(THINK_TIME * scale)
    return after, normal, summariser.calls


def _boundaries(entries: Sequence[LogEntry]) -> int:
    return sum(isinstance(e, CompactionBoundary) for e in entries)


def figures(*, quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    """The latency figures: the first token after the threshold, inline and in the background, and their ratios."""
    scale = _scale(quick)
    results: dict[str, tuple[list[float], list[float], int]] = {}
    with tempfile.TemporaryDirectory(prefix="lamina-bench-compaction-latency-") as tmp:
        for name, background in (("inline", False), ("background", True)):
            progress(f"latency: a {TURNS}-turn session, a {_summary_seconds():.0f} s summariser, compacting {name}")
            results[name] = asyncio.run(_session(Path(tmp) / name, background=background, scale=scale))
    note = f"scenario seconds x{scale}: summary {_summary_seconds():.0f} s, first token {MODEL_FIRST_TOKEN:.0f} s"
    out: list[Figure] = []
    normal_all = [d for _, normal, _ in results.values() for d in normal]
    normal_p50 = statistics.median(normal_all)
    out.append(Figure("first_token_normal_p50_ms", round(normal_p50 * 1e3, 2), "ms", note=note))
    for name, (after, _, calls) in results.items():
        out.append(Figure(f"first_token_after_threshold_p50_{name}_ms", round(statistics.median(after) * 1e3, 2), "ms"))
        out.append(Figure(f"first_token_after_threshold_max_{name}_ms", round(max(after) * 1e3, 2), "ms"))
        out.append(
            Figure(
                f"first_token_after_threshold_vs_normal_{name}",
                round(statistics.median(after) / normal_p50, 3),
                "ratio",
                note=f"p50; {len(after)} turns after the threshold, {calls} summaries; goal <= 1.10",
            )
        )
    return out
