"""An agent session whose prune the server makes (Anthropic context editing), against the wire server through the SDK.

The oldest results are the ones worth taking, so the server's clearing rewrites the cache from the
same point as Lamina's prune and frees more (its placeholder is shorter than Lamina's note): the
priced choice takes it. The request carries the edit, the response's `applied_edits` is logged, the
cache is written once from the cleared point, a resumed session sends the same edit, and the replay
rebuilds what the model read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lamina.agent import Agent, AgentOptions, open_agent
from lamina.compaction import PrunePolicy
from lamina.placement import CLEAR_TOOL_USES, SERVER_CLEARED_NOTE, AnthropicTarget, render
from lamina.pricing import ContextEditing
from lamina.providers import Provider, RetryPolicy
from lamina.reports import RecordedPrefixes, replay_request
from lamina.session import AssistantMessage, LogEntry, SessionStore, ToolOutputPruned, ToolResult
from tests.support.engine import Clock, memory_store
from tests.wire.fixtures import anthropic_provider
from tests.wire.script import Reply, ToolUse
from tests.wire.server import ManualClock, WireServer

_PRUNE = PrunePolicy(protect_turns=2, protect_tokens=0, minimum_tokens=1_000)
_FILES = ("a.py", "b.py", "c.py")


async def _no_sleep(_: float) -> None:
    return None


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    for name in _FILES:
        lines = (f"{name[0]}_{n} = compute({n}, limit=42)  # a line of code\n" for n in range(400))
        (root / name).write_text("".join(lines))
    return root


def _agent(
    store: SessionStore,
    workspace: Path,
    provider: Provider,
    clock: Clock,
    *,
    session_id: str | None = None,
    editing: ContextEditing | None = None,
) -> Agent:
    chosen = AgentOptions(
        retry=RetryPolicy(sleep=_no_sleep), clock=clock, mode="execute", prune=_PRUNE, context_editing=editing
    )
    return open_agent(store, provider, workspace=workspace, session_id=session_id, options=chosen)


def _edits(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in body.get("context_management", {}).get("edits", []) if e["type"] == CLEAR_TOOL_USES]


async def _turn(agent: Agent, clock: Clock, wire_clock: ManualClock, text: str) -> None:
    clock.advance(0.5)
    wire_clock.advance(30)
    await agent.run_turn(text)


async def _session(agent: Agent, wire: WireServer, clock: Clock, wire_clock: ManualClock) -> None:
    """Three files read, then four short turns: from the third on, the reads may be pruned."""
    wire.script(
        Reply(text="Reading.", tool_calls=[ToolUse("Read", {"path": name}) for name in _FILES]),
        Reply(text="Read them."),
        *(Reply(text=f"Step {n} done.") for n in range(1, 5)),
    )
    await _turn(agent, clock, wire_clock, "Read the three files")
    for n in range(1, 5):
        await _turn(agent, clock, wire_clock, f"Step {n}")


@pytest.mark.slow
async def test_the_priced_choice_takes_the_server_s_clearing_and_the_cache_is_written_once(
    tmp_path: Path, workspace: Path, wire: WireServer, wire_clock: ManualClock
) -> None:
    clock = Clock()
    store = memory_store(tmp_path, clock)
    async with anthropic_provider(wire) as provider:
        agent = _agent(store, workspace, provider, clock)
        await _session(agent, wire, clock, wire_clock)
        session_id = agent.session.id
        entries = agent.session.entries()
        agent.close()
        (prune,) = (e for e in entries if isinstance(e, ToolOutputPruned))
        assert prune.server is not None and len(prune.call_ids) == len(_FILES)
        assert prune.server.clear_at_least <= prune.tokens
        assert prune.decision and prune.decision.action == "clear_tool_uses"
        before = [r for r in wire.requests if not _edits(r.body)]
        cleared, *later = (r for r in wire.requests if _edits(r.body))
        assert len(before) == 3 and len(later) == 2  # the prune came before the third turn
        assert all(_edits(r.body) == _edits(cleared.body) for r in later)  # the same edit on every later request
        assert _results(cleared.body["messages"]) == _results(before[-1].body["messages"])  # the results sent whole
        assert [e["cleared_tool_uses"] for e in cleared.applied_edits] == [len(_FILES)]
        calls = [e for e in entries if isinstance(e, AssistantMessage)]
        edited = [e for e in calls if e.context_edits]
        assert len(edited) == 3 and all(e.context_edits[0].kind == CLEAR_TOOL_USES for e in edited)  # logged
        assert before[-1].usage is not None and cleared.usage is not None
        assert cleared.usage.read < 0.2 * before[-1].usage.total  # the cache written again from the cleared point
        for request in later:  # and only then
            assert request.usage is not None and request.usage.write < 0.1 * request.usage.read

        reopened = _agent(store, workspace, provider, clock, session_id=session_id)
        wire.script(Reply(text="Resumed."))
        clock.advance(0.5)
        wire_clock.advance(30)
        await reopened.run_turn("Where were we?")
        reopened.close()
    last = wire.requests[-1]
    assert _edits(last.body) == _edits(cleared.body)  # the resumed session sends the same edit
    assert last.usage is not None and last.usage.write < 0.1 * last.usage.read  # and its cached prefix holds


@pytest.mark.slow
@pytest.mark.parametrize("editing", ["lamina", "off"])
async def test_the_agent_s_setting_keeps_the_prune_lamina_s(
    tmp_path: Path, workspace: Path, wire: WireServer, wire_clock: ManualClock, editing: ContextEditing
) -> None:
    clock = Clock()
    async with anthropic_provider(wire) as provider:
        agent = _agent(memory_store(tmp_path, clock), workspace, provider, clock, editing=editing)
        await _session(agent, wire, clock, wire_clock)
        entries = agent.session.entries()
        agent.close()
        assert provider.context_editing == editing  # the option is the provider's setting
    (prune,) = (e for e in entries if isinstance(e, ToolOutputPruned))
    assert prune.server is None and len(prune.call_ids) == len(_FILES)  # Lamina's own prune, the same results
    assert not any("context_management" in r.body for r in wire.requests)  # no thinking: nothing to ask the server


@pytest.mark.slow
async def test_the_replay_rebuilds_what_the_model_read(
    tmp_path: Path, workspace: Path, wire: WireServer, wire_clock: ManualClock
) -> None:
    clock = Clock()
    async with anthropic_provider(wire) as provider:
        agent = _agent(memory_store(tmp_path, clock), workspace, provider, clock)
        await _session(agent, wire, clock, wire_clock)
        entries = agent.session.entries()
        agent.close()
    calls = [i for i, e in enumerate(entries) if isinstance(e, AssistantMessage)]
    for request, index in zip(wire.requests, calls, strict=True):
        call = entries[index]
        assert isinstance(call, AssistantMessage)
        replayed = replay_request(
            entries[:index], prefixes=_prefixes(entries[:index]), applied=call.context_edits, turn_id=call.turn_id or ""
        )
        body: Any = render(replayed.turn, AnthropicTarget(model="claude-sonnet-5"), continuation=replayed.continuation)
        seen = request.seen if request.seen is not None else request.body
        assert _results(body["messages"]) == _results(seen["messages"])
    cleared = [r for r in _results(wire.requests[-1].seen["messages"]) if r == SERVER_CLEARED_NOTE]
    assert len(cleared) == len(_FILES)
    assert sum(isinstance(e, ToolResult) for e in entries) == len(_FILES)  # the log keeps every result whole


def _prefixes(path: list[LogEntry]) -> RecordedPrefixes:
    prefixes = RecordedPrefixes()
    for entry in path:
        prefixes.observe(entry)
    return prefixes


def _results(messages: list[dict[str, Any]]) -> list[str]:
    """Each tool result's text, in order."""
    out: list[str] = []
    for message in messages:
        for block in message["content"] if isinstance(message["content"], list) else ():
            if block.get("type") == "tool_result":
                content = block["content"]
                out.append(content if isinstance(content, str) else "".join(b.get("text", "") for b in content))
    return out
