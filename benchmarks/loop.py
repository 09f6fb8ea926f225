"""`python -m benchmarks loop`: the harness's own cost per model round trip and per tool call.

A scripted provider answers instantly with a fixed usage (so no model time and no token
estimate is counted), over sessions with 10, 100 and 1,000 prior turns. A round trip is a whole
one-call turn: prepare the turn, render it (completed turns come from the render cache), stream
the answer, log it and end the turn with its fsync. The tool-call figure is the extra time a
turn with ten calls of Read on a one-line file takes, per call: pipeline, tool and logging.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import Figure
from lamina.agent import AgentOptions, open_agent
from lamina.engine import ContextEngine
from lamina.placement import AnthropicTarget
from lamina.providers import ScriptedProvider, ScriptedResponse, ScriptedToolCall
from lamina.session import AssistantMessage, LocalSessionStore, ToolCall, ToolResult, Usage, UserMessage

USAGE = Usage(input=10, output=5)


def _fill(engine: ContextEngine, turns: int) -> None:
    for n in range(turns):
        engine.record(UserMessage(text=f"request {n}: please check module_{n}.py"))
        engine.record(ToolCall(call_id=f"c{n}", name="Read", input={"path": f"module_{n}.py"}))
        engine.record(ToolResult(call_id=f"c{n}", name="Read", content="def check():\n    return True\n" * 6))
        engine.record(AssistantMessage(text=f"module_{n}.py is fine.", usage=USAGE))
    engine.session.flush()


async def _measure(root: Path, prior: int, repeats: int) -> tuple[float, float]:
    workspace = root / f"ws{prior}"
    workspace.mkdir(parents=True)
    (workspace / "a.py").write_text("x = 1\n")
    plain = ScriptedResponse(text="ok", usage=USAGE)
    reads = ScriptedResponse(
        text="reading", tool_calls=tuple(ScriptedToolCall("Read", {"path": "a.py"}) for _ in range(10)), usage=USAGE
    )
    steps = [plain] * (repeats + 1) + [reads, plain] * repeats
    provider = ScriptedProvider(steps, target=AnthropicTarget(model="claude-sonnet-5"))
    agent = open_agent(
        LocalSessionStore(root / f"store{prior}"), provider, workspace=workspace, options=AgentOptions(mode="execute")
    )
    _fill(agent.engine, prior)
    await agent.run_turn("warm the render cache")
    round_trips: list[float] = []
    for i in range(repeats):
        started = time.perf_counter()
        await agent.run_turn(f"plain {i}")
        round_trips.append(time.perf_counter() - started)
    with_tools: list[float] = []
    for i in range(repeats):
        started = time.perf_counter()
        await agent.run_turn(f"tools {i}")
        with_tools.append(time.perf_counter() - started)
    agent.engine.session.close()
    one_trip = statistics.median(round_trips)
    # a tool turn has two round trips and ten tool calls
    per_tool = max(0.0, (statistics.median(with_tools) - 2 * one_trip) / 10)
    return one_trip * 1e6, per_tool * 1e6


def run(*, quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    repeats = 15 if quick else 60
    figures: list[Figure] = []
    tool_costs: list[float] = []
    with tempfile.TemporaryDirectory(prefix="lamina-bench-loop-") as tmp:
        for prior in (10, 100, 1_000):
            progress(f"{prior} prior turns")
            trip, tool = asyncio.run(_measure(Path(tmp), prior, repeats))
            note = "mostly the turn-end fsync of the log" if prior == 10 else ""
            figures.append(Figure(f"overhead_us_per_round_trip_{prior}", round(trip, 1), "us", note=note))
            tool_costs.append(tool)
        figures.append(Figure("overhead_us_per_tool_call", round(statistics.median(tool_costs), 1), "us"))
        # the same round trips with fsync made a no-op: the harness's own work, without the disk's variance
        progress("again without fsync (harness work only)")
        real_fsync = os.fsync
        os.fsync = lambda fd: None
        try:
            without = [asyncio.run(_measure(Path(tmp) / "nofsync", prior, repeats))[0] for prior in (10, 1_000)]
        finally:
            os.fsync = real_fsync
    figures.append(Figure("overhead_us_per_round_trip_10_no_fsync", round(without[0], 1), "us"))
    figures.append(Figure("overhead_us_per_round_trip_1000_no_fsync", round(without[1], 1), "us"))
    figures.append(Figure("round_trip_growth_10_to_1000_no_fsync", round(without[1] / without[0], 2), "x"))
    return figures
