"""Compaction off the user's time: prepared in the background, logged as prepared, applied at a later turn's start.

The summariser is gated: it finishes only when the test opens its gate, so "the turn did not wait
for it" is checked by order, never by the clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from lamina.agent import Agent, AgentEvent, AgentOptions, BackgroundCompaction, open_agent
from lamina.compaction import DeterministicSummariser, StructuredSummary, SummaryResult
from lamina.providers import ScriptedProvider, ScriptedResponse
from lamina.session import (
    CompactionBoundary,
    CompactionDiscarded,
    Ledger,
    LocalSessionStore,
    LogEntry,
    PreparedCompaction,
    SessionStore,
    UserMessage,
)
from tests.support.engine import Clock, memory_store

THRESHOLD = 12_000
"""The context's tokens at which these sessions compact (a few turns reach it)."""
WAIT = 30.0
"""A bound on waiting for a background event, so a broken build fails instead of hanging (not a timing)."""


class GatedSummariser:
    """A slow summariser: it summarises only once its gate is open (the deterministic summary)."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.calls = 0
        self.running = asyncio.Event()

    async def summarise(
        self, previous: StructuredSummary | None, entries: Sequence[LogEntry], ledger: Ledger, *, focus: str | None
    ) -> SummaryResult:
        self.calls += 1
        self.running.set()
        await self.gate.wait()
        return await DeterministicSummariser().summarise(previous, entries, ledger, focus=focus)


class Events:
    """The agent's background compaction events, and a wait for the next of a kind."""

    def __init__(self) -> None:
        self.seen: list[BackgroundCompaction] = []
        self._changed = asyncio.Event()

    def __call__(self, event: AgentEvent) -> None:
        if isinstance(event, BackgroundCompaction):
            self.seen.append(event)
            self._changed.set()

    def kinds(self) -> list[str]:
        return [e.kind for e in self.seen]

    async def wait_for(self, kind: str) -> BackgroundCompaction:
        async def seen() -> BackgroundCompaction:
            while True:
                found = [e for e in self.seen if e.kind == kind]
                if found:
                    return found[-1]
                self._changed.clear()
                await self._changed.wait()

        return await asyncio.wait_for(seen(), WAIT)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def _agent(store: SessionStore, workspace: Path, summariser: Any, events: Events, **options: Any) -> Agent:
    answers = [ScriptedResponse(text=f"Answer {n}: " + "detail " * 300) for n in range(40)]
    agent = open_agent(
        store,
        ScriptedProvider(answers),
        workspace=workspace,
        options=AgentOptions(
            mode="execute", summariser=summariser, keep_tokens=2_000, prune=None, on_event=events, **options
        ),
    )
    agent.compaction_reserve = agent.provider.capabilities.context_window - THRESHOLD
    return agent


async def _turns_until_started(agent: Agent, events: Events) -> int:
    """Run turns until a background compaction starts at a turn's end; the number of turns run."""
    for n in range(30):
        await agent.run_turn(f"Question {n}: keep total() correct. " + "context " * 300)
        if "started" in events.kinds():
            return n + 1
    raise AssertionError("no background compaction started")


def _of(agent: Agent, kind: type[Any]) -> list[Any]:
    return [e for e in agent.session.entries() if isinstance(e, kind)]


async def test_the_user_types_while_it_runs_and_the_next_turn_applies_it(tmp_path: Path, workspace: Path) -> None:
    summariser, events = GatedSummariser(), Events()
    async with _agent(memory_store(tmp_path, Clock()), workspace, summariser, events, compaction_band=None) as agent:
        await _turns_until_started(agent, events)
        await asyncio.wait_for(summariser.running.wait(), WAIT)
        # the gate is shut: the summariser cannot finish, and the user's next message is answered anyway
        outcome = await agent.run_turn("A question while it compacts")
        assert outcome.text.startswith("Answer") and _of(agent, CompactionBoundary) == []
        assert agent.engine.compactor.calibrated_context_tokens() < THRESHOLD  # it still fits: no wait
        summariser.gate.set()
        await events.wait_for("ready")
        (prepared,) = _of(agent, PreparedCompaction)
        assert _of(agent, CompactionBoundary) == []  # prepared, not applied: the view is unchanged
        await agent.run_turn("And now?")
        (boundary,) = _of(agent, CompactionBoundary)
        assert boundary.prepared_id == prepared.id and boundary.summary == prepared.boundary.summary
        assert events.kinds() == ["started", "ready", "applied"]
        assert summariser.calls == 1
        # the user's message of this turn comes after the boundary: the compaction ran before it
        entries = agent.session.entries()
        assert entries.index(boundary) < max(i for i, e in enumerate(entries) if isinstance(e, UserMessage))


async def test_compact_during_a_background_compaction_waits_for_it(tmp_path: Path, workspace: Path) -> None:
    summariser, events = GatedSummariser(), Events()
    async with _agent(memory_store(tmp_path, Clock()), workspace, summariser, events, compaction_band=None) as agent:
        await _turns_until_started(agent, events)
        await asyncio.wait_for(summariser.running.wait(), WAIT)
        manual = asyncio.create_task(agent.compact())
        for _ in range(20):
            await asyncio.sleep(0)
        assert not manual.done() and summariser.calls == 1  # waiting, not summarising a second time
        summariser.gate.set()
        outcome = await asyncio.wait_for(manual, WAIT)
        assert outcome.status == "compacted" and outcome.boundary is not None
        (prepared,) = _of(agent, PreparedCompaction)
        assert outcome.boundary.prepared_id == prepared.id
        assert summariser.calls == 1 and len(_of(agent, CompactionBoundary)) == 1


async def test_a_prepared_compaction_survives_a_crash_as_prepared(tmp_path: Path, workspace: Path) -> None:
    summariser, events = GatedSummariser(), Events()
    store = LocalSessionStore(tmp_path / "store")
    agent = _agent(store, workspace, summariser, events, compaction_band=None)
    await _turns_until_started(agent, events)
    summariser.gate.set()
    await events.wait_for("ready")
    session_id = agent.session.id
    # the process dies here: nothing more is written; another process reads what is on disk
    with LocalSessionStore(tmp_path / "store").open(session_id, writable=False) as reader:
        entries = reader.entries()
        assert [type(e) for e in entries if isinstance(e, PreparedCompaction | CompactionBoundary)] == [
            PreparedCompaction
        ]
        assert reader.view().boundary is None  # prepared, never read as applied
    agent.close()
    # opened again, the next turn applies it (what it covers has not changed)
    again_events = Events()
    again = open_agent(
        store,
        ScriptedProvider([ScriptedResponse(text="Back.")]),
        workspace=workspace,
        session_id=session_id,
        options=AgentOptions(mode="execute", summariser=summariser, prune=None, on_event=again_events),
    )
    async with again:
        await again.run_turn("Where were we?")
        (boundary,) = _of(again, CompactionBoundary)
        assert boundary.prepared_id == _of(again, PreparedCompaction)[0].id
        assert again_events.kinds() == ["applied"]


async def test_a_branch_while_it_runs_discards_it(tmp_path: Path, workspace: Path) -> None:
    summariser, events = GatedSummariser(), Events()
    async with _agent(memory_store(tmp_path, Clock()), workspace, summariser, events, compaction_band=None) as agent:
        await _turns_until_started(agent, events)
        await asyncio.wait_for(summariser.running.wait(), WAIT)
        second = [e for e in agent.session.entries() if isinstance(e, UserMessage)][1]
        agent.branch(second.id)  # the user goes back to the second question: what the summary covers changed
        summariser.gate.set()
        await events.wait_for("ready")
        await agent.run_turn("A different last question")
        (prepared,) = _of(agent, PreparedCompaction)
        (discarded,) = _of(agent, CompactionDiscarded)
        assert discarded.prepared_id == prepared.id and "branch" in discarded.reason
        assert "discarded" in events.kinds() and "applied" not in events.kinds()
        assert all(b.prepared_id != prepared.id for b in _of(agent, CompactionBoundary))


async def test_an_idle_session_past_the_cache_ttl_is_compacted_in_the_background(
    tmp_path: Path, workspace: Path
) -> None:
    clock, summariser, events = Clock(), GatedSummariser(), Events()
    summariser.gate.set()
    async with _agent(memory_store(tmp_path, clock), workspace, summariser, events, clock=clock) as agent:
        n = 0
        while agent.engine.compactor.calibrated_context_tokens() < 0.8 * THRESHOLD:
            clock.advance(0.5)  # half a minute apart: the cache stays warm, the band's price says wait
            await agent.run_turn(f"Question {n}: keep total() correct. " + "context " * 300)
            n += 1
        assert events.kinds() == [] and _of(agent, CompactionBoundary) == []
        clock.advance(120)  # the user is away two hours: the cache is cold, a compaction rewrites nothing warm
        ready = await events.wait_for("ready")
        assert ready.trigger == "idle"
        (prepared,) = _of(agent, PreparedCompaction)
        assert prepared.trigger == "idle" and prepared.boundary.decision is not None
        await agent.run_turn("Back again")
        (boundary,) = _of(agent, CompactionBoundary)
        assert boundary.prepared_id == prepared.id


async def test_compact_after_a_discarded_one_compacts_now(tmp_path: Path, workspace: Path) -> None:
    summariser, events = GatedSummariser(), Events()
    async with _agent(memory_store(tmp_path, Clock()), workspace, summariser, events, compaction_band=None) as agent:
        await _turns_until_started(agent, events)
        await asyncio.wait_for(summariser.running.wait(), WAIT)
        questions = [e for e in agent.session.entries() if isinstance(e, UserMessage)]
        agent.branch(questions[-2].id)  # the last answers go: what the prepared compaction keeps from goes too
        summariser.gate.set()
        await events.wait_for("ready")
        outcome = await agent.compact()  # `/compact`: the prepared one is discarded, and a compaction made now
        (prepared,) = _of(agent, PreparedCompaction)
        (discarded,) = _of(agent, CompactionDiscarded)
        assert discarded.prepared_id == prepared.id
        assert outcome.status == "compacted" and outcome.boundary is not None and not outcome.boundary.prepared_id
        assert summariser.calls == 2
