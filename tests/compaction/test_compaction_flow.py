"""Compaction through the engine and the loop: the log, the pinned lane, coordination, crashes, overflow."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings

from lamina.compaction import DeterministicSummariser, StructuredSummary, SummaryResult
from lamina.engine import CompactionEvent, ContextEngine
from lamina.placement import render
from lamina.session import (
    AssistantMessage,
    CompactionBoundary,
    Ledger,
    LocalSessionStore,
    LogEntry,
    ToolCall,
    ToolResult,
    UnknownEntry,
    UserMessage,
)
from tests.compaction.logs import views
from tests.conftest import EXHAUSTIVE
from tests.support.engine import ANTHROPIC, Clock, make_engine

REPO = Path(__file__).parents[2]
DETERMINISTIC = DeterministicSummariser()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("Project rule: run `make test` before committing.\n")
    return root


def _chat(engine: ContextEngine, turns: int, *, start: int = 0, size: int = 400) -> None:
    for n in range(start, start + turns):
        turn = engine.prepare_turn(f"Request {n}: look at module_{n}.py. " + "detail " * size)
        engine.record(AssistantMessage(text=f"Reading module_{n}.py."))
        engine.record(ToolCall(call_id=f"c{n}", name="Read", input={"path": f"module_{n}.py"}))
        engine.record(ToolResult(call_id=f"c{n}", name="Read", content="x = 1\n" * size))
        engine.record(AssistantMessage(text=f"module_{n}.py is fine."))
        engine.commit(turn)


@pytest.mark.slow
@settings(max_examples=25 if not EXHAUSTIVE else 500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(view=views())
def test_log_after_compaction_is_the_log_before_plus_one_boundary(
    tmp_path_factory: pytest.TempPathFactory, view: list[LogEntry]
) -> None:
    root = tmp_path_factory.mktemp("store")
    store = LocalSessionStore(root)
    session = store.create()
    previous: str | None = None
    for entry in view:
        if isinstance(entry, UnknownEntry):
            continue
        stamped = msgspec.structs.replace(entry, parent_id=previous)
        session._write(stamped, sync=False)
        previous = stamped.id
    session.flush()
    before = session.entries()
    engine = ContextEngine(session, stable_source=lambda: ())
    outcome = asyncio.run(engine.compactor.compact(DETERMINISTIC, trigger="manual", keep_tokens=300))
    after = session.entries()
    if outcome.status == "compacted":
        assert after[:-1] == before and isinstance(after[-1], CompactionBoundary)
        kept = engine.session.view().entries
        calls = {e.call_id for e in kept if isinstance(e, ToolCall)}
        assert all(r.call_id in calls for r in kept if isinstance(r, ToolResult))  # no orphaned result
        users = [e for e in before if isinstance(e, UserMessage)]
        if users:
            assert users[-1] in kept  # the latest request stays verbatim
    else:
        assert after == before
    session.close()


@pytest.mark.slow
@pytest.mark.parametrize("compactions", [1, 2, 5])
def test_pinned_words_survive_every_compaction(tmp_path: Path, workspace: Path, compactions: int) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    engine.settings.set_mode("execute")
    first = engine.prepare_turn("Never touch the tests in tests/legacy. Refactor the parser, please.")
    engine.record(AssistantMessage(text="Understood."))
    engine.commit(first)
    for round_no in range(compactions):
        _chat(engine, 6, start=round_no * 10, size=150)  # 31 messages: all within the lane's budget
        outcome = asyncio.run(engine.compactor.compact(DETERMINISTIC, trigger="threshold", keep_tokens=1_500))
        assert outcome.status == "compacted", outcome.message
        clock.advance(2)
    body = json.dumps(render(engine.prepare_turn("next"), ANTHROPIC))
    # the user's whole first message, verbatim in the user's words lane
    assert "Never touch the tests in tests/legacy. Refactor the parser, please." in body
    assert "permission mode: execute" in body  # session state stated again after the compaction
    assert "Project rule: run `make test` before committing." in body  # project rules: stable prefix
    boundary = engine.boundary
    assert boundary is not None and boundary.lane.messages[0].turn == 1
    assert boundary.lane.messages[0].text.startswith("Never touch the tests in tests/legacy.")


def test_the_deterministic_summary_keeps_its_shape_over_compactions_that_split_turns(
    tmp_path: Path, workspace: Path
) -> None:
    """Regression: a split turn's prefix was appended as a second summary, so each compaction grew
    another goal paragraph and headings the next one could not place."""
    engine = make_engine(tmp_path, workspace, Clock())
    for round_no in range(5):
        turn = engine.prepare_turn(f"Big job {round_no}: read everything.")
        for step in range(4):
            engine.record(AssistantMessage(text=f"Step {step}."))
            call_id = f"big{round_no}.{step}"
            engine.record(ToolCall(call_id=call_id, name="Read", input={"path": f"part_{round_no}_{step}.py"}))
            engine.record(ToolResult(call_id=call_id, name="Read", content="y = 2\n" * 600))
        engine.record(AssistantMessage(text="Done."))
        engine.commit(turn)
        turn = engine.prepare_turn("Thanks.")
        outcome = asyncio.run(engine.compactor.compact(DETERMINISTIC, trigger="threshold", keep_tokens=1_000))
        assert outcome.status == "compacted", outcome.message
        assert outcome.boundary is not None and outcome.boundary.first_kept_id != turn.user_entry_id  # split
        engine.record(AssistantMessage(text="You are welcome."))
        engine.commit(turn)
        summary = engine.boundary.summary if engine.boundary else ""
        assert summary.count("## Goal") == 1 and "## Notes" not in summary
        assert summary.count("began before the cut") == 1  # one item for the turn that was cut
        assert "Big job" not in summary  # the request is in the user's words lane, not repeated


def test_reopened_session_knows_the_state_from_the_boundary(tmp_path: Path, workspace: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    engine.settings.set_mode("explore")
    engine.settings.set_sources(["github"])
    engine.queue_one_shot("note", "PENDING-AFTER-COMPACTION")
    _chat(engine, 8)
    asyncio.run(engine.compactor.compact(DETERMINISTIC, trigger="manual", keep_tokens=1_000))
    engine.session.close()
    again = make_engine(tmp_path, workspace, clock, session_id=engine.session.id)
    assert again.session.loaded_count() < len(again.session.entries())  # resumed from the boundary
    assert again.settings.mode == "explore" and again.settings.active_sources == ("github",)
    # the one-shot was delivered in the first turn after it was queued; nothing is pending twice
    assert [o.text for o in again.pending_one_shots] == []


def test_too_little_to_free_stops_without_a_boundary(tmp_path: Path, workspace: Path) -> None:
    engine = make_engine(tmp_path, workspace, Clock())
    turn = engine.prepare_turn("hi")
    engine.record(AssistantMessage(text="hello"))
    engine.commit(turn)
    _chat(engine, 1, start=1, size=400)  # one big turn: only the tiny first one could be summarised
    events: list[CompactionEvent] = []
    engine.compactor.listeners.append(events.append)
    outcome = asyncio.run(engine.compactor.compact(DETERMINISTIC, trigger="threshold", keep_tokens=1_000))
    assert outcome.status == "not_enough_freed" and "less than 5%" in outcome.message
    assert not any(isinstance(e, CompactionBoundary) for e in engine.session.entries())
    assert [e.kind for e in events] == ["started", "failed"]


class SlowSummariser:
    def __init__(self) -> None:
        self.active = 0
        self.overlapped = False
        self.calls = 0

    async def summarise(
        self, previous: StructuredSummary | None, entries: Sequence[LogEntry], ledger: Ledger, *, focus: str | None
    ) -> SummaryResult:
        self.calls += 1
        self.active += 1
        self.overlapped |= self.active > 1
        await asyncio.sleep(0.2)
        self.active -= 1
        return await DETERMINISTIC.summarise(previous, entries, ledger, focus=focus)


def test_manual_and_automatic_compaction_together_run_one_after_the_other(tmp_path: Path, workspace: Path) -> None:
    engine = make_engine(tmp_path, workspace, Clock())
    _chat(engine, 10)
    summariser = SlowSummariser()
    hooks: list[str] = []
    engine.compactor.hooks.append(lambda boundary: hooks.append(boundary.trigger))

    async def both() -> tuple[str, str]:
        automatic = asyncio.create_task(engine.compactor.compact(summariser, trigger="threshold", keep_tokens=1_000))
        await asyncio.sleep(0.01)
        manual = asyncio.create_task(engine.compactor.compact(summariser, trigger="manual", keep_tokens=1_000))
        return (await automatic).status, (await manual).status

    assert asyncio.run(both()) == ("compacted", "already_compacted")
    assert not summariser.overlapped and summariser.calls == 1
    assert hooks == ["threshold"]  # read-state reset hook ran once, for the one compaction
    assert sum(isinstance(e, CompactionBoundary) for e in engine.session.entries()) == 1


SLOW_COMPACTION = """
import asyncio, sys, time
sys.path[:0] = [{src!r}, {repo!r}]
from pathlib import Path
from tests.support.engine import Clock, make_engine
from tests.compaction.test_compaction_flow import SlowSummariser
tmp, ws, session_id = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
engine = make_engine(tmp, ws, Clock(), session_id=session_id, on_disk=True)
print("holding", flush=True)
summariser = SlowSummariser()
async def go():
    await asyncio.sleep(0.5)
    return await engine.compactor.compact(summariser, trigger="threshold", keep_tokens=1_000)
print(asyncio.run(go()).status, flush=True)
engine.session.close()
"""


@pytest.mark.slow
def test_two_processes_compact_one_after_the_other(tmp_path: Path, workspace: Path) -> None:
    engine = make_engine(tmp_path, workspace, Clock(), on_disk=True)  # other processes open it
    _chat(engine, 10)
    session_id = engine.session.id
    engine.session.close()
    script = SLOW_COMPACTION.format(src=str(REPO / "src"), repo=str(REPO))
    holder = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path), str(workspace), session_id], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
    # the second process waits for the session's writer lock, then finds nothing new to compact
    store = LocalSessionStore(tmp_path / "store")
    with store.open(session_id, wait=30) as session:
        second = ContextEngine(session, stable_source=lambda: ())
        outcome = asyncio.run(second.compactor.compact(DETERMINISTIC, trigger="manual", keep_tokens=1_000))
    rest, _ = holder.communicate(timeout=30)
    assert holder.returncode == 0 and rest.strip() == "compacted"
    assert outcome.status == "already_compacted"
    with store.open(session_id, writable=False) as reader:
        assert sum(isinstance(e, CompactionBoundary) for e in reader.entries()) == 1


CRASHING_COMPACTION = """
import asyncio, sys
sys.path[:0] = [{src!r}, {repo!r}]
from pathlib import Path
from tests.support.engine import Clock, make_engine
from lamina.compaction import DeterministicSummariser
from tests.compaction.test_compaction_flow import _chat
tmp, ws, session_id = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
engine = make_engine(tmp, ws, Clock(), session_id=session_id, on_disk=True)
print("go", flush=True)
n = 1000
while True:
    _chat(engine, 3, start=n, size=200)
    n += 3
    asyncio.run(engine.compactor.compact(DeterministicSummariser(), trigger="threshold", keep_tokens=800))
"""


@pytest.mark.slow
def test_killed_during_compaction_leaves_no_boundary_or_a_complete_one(tmp_path: Path, workspace: Path) -> None:
    engine = make_engine(tmp_path, workspace, Clock(), on_disk=True)  # other processes open it
    _chat(engine, 4)
    session_id = engine.session.id
    engine.session.close()
    script = CRASHING_COMPACTION.format(src=str(REPO / "src"), repo=str(REPO))
    rng = random.Random(6)
    store = LocalSessionStore(tmp_path / "store")
    for _ in range(40 if EXHAUSTIVE else 8):
        proc = subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path), str(workspace), session_id], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "go"
        try:
            proc.wait(timeout=rng.uniform(0.05, 0.6))
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
        with store.open(session_id, writable=False) as reader:
            entries = reader.entries()
            assert reader.report.corrupt_lines == []  # at most a torn last line
            boundaries = [e for e in entries if isinstance(e, CompactionBoundary)]
            assert all(b.summary and b.tokens_before > 0 for b in boundaries)  # complete, or absent
            reader.view()  # the provider view builds


def test_branch_points_summarised_away_leave_the_provider_view(tmp_path: Path, workspace: Path) -> None:
    engine = make_engine(tmp_path, workspace, Clock())
    _chat(engine, 8)
    first_user = next(e for e in engine.session.entries() if isinstance(e, UserMessage))
    last = engine.session.leaf_id or ""
    assert engine.in_view(first_user.id)
    assert (
        asyncio.run(engine.compactor.compact(DETERMINISTIC, trigger="manual", keep_tokens=1_000)).status == "compacted"
    )
    assert not engine.in_view(first_user.id)  # a branch from here can no longer keep the exact context
    assert engine.in_view(last)  # the recent entries are kept verbatim
