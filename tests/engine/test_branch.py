"""Branching (F12): from any entry, the live engine sends what the branch holds; a seed reaches the model once."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lamina.agent import Agent, AgentOptions, open_agent
from lamina.compaction import DeterministicSummariser
from lamina.context import INTERRUPTED_RESULT
from lamina.engine import ContextEngine
from lamina.errors import UsageError
from lamina.placement import SdkManagedTarget, render
from lamina.providers import ScriptedProvider, ScriptedResponse, ScriptedToolCall
from lamina.session import (
    AssistantMessage,
    LocalSessionStore,
    LogEntry,
    OutboxRecord,
    ToolCall,
    ToolResult,
    UserMessage,
    open_tool_calls,
)
from tests.support.engine import ANTHROPIC, Clock, make_engine, sdk_prompt
from tests.wire.fixtures import anthropic_provider, openai_chat_provider
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("Run the tests before you finish.\n")
    (root / "app.py").write_text("def total(xs):\n    return sum(xs)\n")
    return root


def _agent(tmp_path: Path, workspace: Path, provider: Any) -> Agent:
    return open_agent(
        LocalSessionStore(tmp_path / "store"), provider, workspace=workspace, options=AgentOptions(mode="execute")
    )


def _find(entries: list[LogEntry], kind: str) -> LogEntry:
    match kind:
        case "user":
            return next(e for e in entries if isinstance(e, UserMessage) and e.text == "Second request")
        case "assistant":
            return next(e for e in entries if isinstance(e, AssistantMessage) and e.text == "First answer")
        case "tool_call":
            return next(e for e in entries if isinstance(e, ToolCall))
        case "tool_result":
            return next(e for e in entries if isinstance(e, ToolResult))
    raise AssertionError(kind)


# what the request after the branch must hold (True) or must not (False)
EXPECTED: dict[str, dict[str, bool]] = {
    # at a user message the branch starts before it (as Claude Code's rewind): its text is offered back
    "user": {"First request": True, "First answer": True, "Second request": False, "Second answer": False},
    "assistant": {"First request": True, "First answer": True, "Second request": False, "Second answer": False},
    "tool_call": {"First request": True, "Reading app.py": True, "First answer": False, "def total": False},
    "tool_result": {"First request": True, "def total": True, "First answer": False, "Second request": False},
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", EXPECTED)
@pytest.mark.parametrize("make_provider", [anthropic_provider, openai_chat_provider], ids=["anthropic", "openai-chat"])
async def test_branch_at_each_kind_of_entry_sends_what_the_branch_holds(
    tmp_path: Path, workspace: Path, wire: WireServer, kind: str, make_provider: Callable[[WireServer], Any]
) -> None:
    wire.script(
        Reply(text="Reading app.py", tool_calls=[ToolUse("Read", {"path": "app.py"})]),
        Reply(text="First answer"),
        Reply(text="Second answer"),
        Reply(text="Answer on the branch"),
    )
    async with make_provider(wire) as provider:
        agent = _agent(tmp_path, workspace, provider)
        await agent.run_turn("First request")
        await agent.run_turn("Second request")
        point = _find(agent.engine.session.entries(), kind)
        branch = agent.branch(point.id)
        assert branch.kind == kind and branch.entry_id == point.id
        assert branch.in_view and branch.strategy == "log" and branch.seed_id is None
        assert "is in the provider view" in branch.note
        assert branch.open_calls == ((point.call_id,) if isinstance(point, ToolCall) else ())
        assert branch.offered_text == ("Second request" if kind == "user" else None)
        outcome = await agent.run_turn("Branch request")
    assert outcome.text == "Answer on the branch"
    assert wire.requests[-1].status == 200  # well-formed: the open tool call was closed
    sent = json.dumps(wire.requests[-1].body)
    for text, present in EXPECTED[kind].items():
        assert (text in sent) is present, (kind, text)
    assert sent.count("Branch request") == 1
    if kind == "tool_call":
        assert INTERRUPTED_RESULT[:30] in sent
    # the abandoned path stays in the log; the leaf's path is the branch
    session = agent.engine.session
    assert any(isinstance(e, AssistantMessage) and e.text == "Second answer" for e in session.entries())
    path_texts = [e.text for e in session.path() if isinstance(e, UserMessage | AssistantMessage)]
    assert "Branch request" in path_texts and "Second answer" not in path_texts
    session.close()
    # a reopened session continues the branch
    with LocalSessionStore(tmp_path / "store").open(session.id, writable=False) as reopened:
        assert reopened.leaf_id == session.leaf_id


@pytest.mark.slow
async def test_branch_after_a_compaction_removed_the_point(tmp_path: Path, workspace: Path, wire: WireServer) -> None:
    wire.script(*[Reply(text=f"Answer {n} " + "words " * 150) for n in range(6)], Reply(text="Answer on the branch"))
    async with anthropic_provider(wire) as provider:
        agent = _agent(tmp_path, workspace, provider)
        agent.keep_tokens = 300
        agent.summariser = DeterministicSummariser()
        for n in range(6):
            await agent.run_turn(f"Request {n} " + "detail " * 150)
        outcome = await agent.compact()
        assert outcome.status == "compacted"
        point = next(e for e in agent.engine.session.entries() if isinstance(e, AssistantMessage))  # "Answer 0"
        assert not agent.engine.in_view(point.id)
        branch = agent.branch(point.id)
        assert not branch.in_view and branch.strategy == "log" and not branch.summarised
        assert "no longer in the provider view" in branch.note and "not from the prompt cache" in branch.note
        await agent.run_turn("Branch request")
    sent = json.dumps(wire.requests[-1].body)
    # the branch holds the point verbatim, not the summary of a later compaction, nor later turns
    assert "Request 0" in sent and "Answer 0" in sent and "Request 1" not in sent
    assert outcome.boundary is not None and outcome.boundary.summary[:40] not in sent
    agent.engine.session.close()


def test_a_seed_reaches_a_transcript_keeping_backend_exactly_once(tmp_path: Path, workspace: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    for n in range(3):
        turn = engine.prepare_turn(f"Request {n}")
        engine.commit(turn)
        engine.record(AssistantMessage(text=f"Answer {n}"))
    point = next(e for e in engine.session.entries() if isinstance(e, AssistantMessage) and e.text == "Answer 1")
    branch = engine.branch(point.id, seed=True)
    assert branch.strategy == "seed" and branch.seed_id is not None and branch.in_view
    assert "one-shot branch seed" in branch.note
    seed = engine.session.get(branch.leaf_id)
    assert isinstance(seed, OutboxRecord) and seed.hidden and seed.kind == "branch_seed"
    assert seed.parent_id == point.id  # the branch's first entry, written with it
    # recent first: Answer 1 before Request 0; Request 2 (abandoned) absent
    assert seed.text.index("Answer 1") < seed.text.index("Request 0") and "Request 2" not in seed.text
    session_id = engine.session.id
    engine.session.close()

    engine = make_engine(tmp_path, workspace, clock, session_id)  # the seed survives a restart
    first = engine.prepare_turn("On the branch")
    prompt = sdk_prompt(render(first, SdkManagedTarget()))
    assert prompt.count("Answer 1") == 1 and "<branch_seed>" in prompt
    engine.commit(first)
    engine.record(AssistantMessage(text="ok"))
    second = engine.prepare_turn("Again")
    assert "<branch_seed>" not in sdk_prompt(render(second, SdkManagedTarget()))
    engine.session.close()


def test_a_seed_of_an_abandoned_branch_is_never_delivered_elsewhere(tmp_path: Path, workspace: Path) -> None:
    engine = make_engine(tmp_path, workspace, Clock())
    turn = engine.prepare_turn("Request 0")
    engine.commit(turn)
    answer = engine.record(AssistantMessage(text="Answer 0"))
    first = engine.branch(turn.user_entry_id, seed=True)
    assert [o.part_id for o in engine.pending_one_shots] == [first.seed_id]
    second = engine.branch(answer.id, seed=True)  # before the first seed was delivered
    assert [o.part_id for o in engine.pending_one_shots] == [second.seed_id]
    nxt = engine.prepare_turn("Request 1")
    assert [o.part_id for o in nxt.one_shots] == [second.seed_id]
    engine.session.close()


def test_branch_to_an_unknown_entry_is_a_usage_error(tmp_path: Path, workspace: Path) -> None:
    engine = make_engine(tmp_path, workspace, Clock())
    with pytest.raises(UsageError, match="no entry 'nope'"):
        engine.branch("nope")
    engine.session.close()


def test_open_tool_calls_of_a_parallel_batch() -> None:
    path: list[LogEntry] = [
        UserMessage(id="u", text="go"),
        AssistantMessage(id="a", text="two reads"),
        ToolCall(id="c1", call_id="x", name="Read", input={}),
        ToolCall(id="c2", call_id="y", name="Read", input={}),
        ToolResult(id="r1", call_id="x", name="Read", content="1"),
    ]
    assert open_tool_calls(path) == ("y",)
    assert open_tool_calls(path[:4]) == ("x", "y")
    assert open_tool_calls(path[:2]) == ()


# --- the branch's own conversation state (issue 29) ---------------------------------------------------

INTERRUPTION = "The user interrupted the previous turn while 1 tool call(s) were running."


def _reopen(engine: ContextEngine, tmp_path: Path, workspace: Path, clock: Clock) -> ContextEngine:
    session_id = engine.session.id
    engine.session.close()
    return make_engine(tmp_path, workspace, clock, session_id)


def test_an_interruption_on_the_path_left_is_not_told_on_a_branch_made_before_it(
    tmp_path: Path, workspace: Path
) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    engine.commit(engine.prepare_turn("Request 0"))
    answer = engine.record(AssistantMessage(text="Answer 0"))
    engine.commit(engine.prepare_turn("Request 1"))
    engine.record(AssistantMessage(text="Running it."))
    engine.record(ToolCall(call_id="c1", name="Bash", input={"command": "sleep 100"}))
    engine.record(ToolResult(call_id="c1", name="Bash", content=INTERRUPTED_RESULT, is_error=True))
    reminder = engine.queue_one_shot("interruption", INTERRUPTION)  # what the loop queues when a turn is cancelled
    assert [o.part_id for o in engine.pending_one_shots] == [reminder]
    engine.branch(answer.id)
    assert engine.pending_one_shots == ()
    engine = _reopen(engine, tmp_path, workspace, clock)
    assert not engine.pending_one_shots
    turn = engine.prepare_turn("On the branch")
    assert turn.one_shots == () and "interrupted the previous turn" not in json.dumps(render(turn, ANTHROPIC))
    # the reminder belongs to the path it was queued on: back there, it is still due
    engine.commit(turn)
    engine.branch(_queued_record(engine, reminder).id)
    assert [o.part_id for o in engine.pending_one_shots] == [reminder]
    engine.session.close()


def _queued_record(engine: ContextEngine, part_id: str) -> OutboxRecord:
    return next(
        e
        for e in engine.session.entries()
        if isinstance(e, OutboxRecord) and e.part_id == part_id and e.status == "queued"
    )


def test_a_one_shot_delivered_only_on_the_path_left_is_delivered_on_the_branch(tmp_path: Path, workspace: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    engine.commit(engine.prepare_turn("Request 0"))
    engine.record(AssistantMessage(text="Answer 0"))
    note = engine.queue_one_shot("note", "The user invoked the skill 'deploy': read its SKILL.md first.")
    first = engine.prepare_turn("Request 1")
    assert [o.part_id for o in first.one_shots] == [note]
    engine.commit(first)  # delivered on this path
    engine.record(AssistantMessage(text="Answer 1"))
    branch = engine.branch(first.user_entry_id)  # before Request 1: after the note was queued, before its delivery
    assert [o.part_id for o in engine.pending_one_shots] == [note]
    assert branch.offered_text == "Request 1" and "offered back" in branch.note
    engine = _reopen(engine, tmp_path, workspace, clock)
    assert [o.part_id for o in engine.pending_one_shots] == [note]
    again = engine.prepare_turn("Request 1, put better")
    assert [o.part_id for o in again.one_shots] == [note]
    assert json.dumps(render(again, ANTHROPIC)).count("read its SKILL.md first") == 1
    engine.commit(again)
    engine.record(AssistantMessage(text="Answer on the branch"))
    assert engine.prepare_turn("Next").one_shots == ()  # delivered once on this branch too
    engine.session.close()


def test_a_branch_has_its_path_s_plan_and_skills_and_the_user_s_latest_settings(
    tmp_path: Path, workspace: Path
) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    engine.commit(engine.prepare_turn("Plan the fix"))
    engine.plans.submit(title="Fix total", plan_path="", text="1. Remove the + 1.")
    point = engine.record(AssistantMessage(text="Submitted the plan."))
    # the path left: the plan runs and is done, a skill is invoked, the user changes mode and sources
    engine.plans.record("accepted")
    engine.plans.record("dispatched")
    engine.settings.set_mode("execute")
    engine.settings.add_skills(["deploy"])
    engine.settings.set_sources(["github"])
    engine.commit(engine.prepare_turn("Carry out the plan"))
    engine.record(AssistantMessage(text="Done."))
    engine.plans.record("done")
    assert (
        engine.plans.latest is not None
        and engine.plans.latest.state == "done"
        and engine.settings.skills_in_use == ("deploy",)
    )

    engine.branch(point.id)
    for current in (engine, engine := _reopen(engine, tmp_path, workspace, clock)):
        assert (
            current.plans.latest is not None and current.plans.latest.state == "submitted"
        )  # still awaiting the decision
        assert current.settings.skills_in_use == ()
        assert current.settings.mode == "execute" and current.settings.active_sources == (
            "github",
        )  # as the user last set them
        # the mode and sources changes were told on the path left: this branch's tail states them
        assert all(o.kind not in ("mode_transition", "source_activated") for o in current.pending_one_shots)
    turn = engine.prepare_turn("On the branch")
    tail = " ".join(p.text for p in turn.volatile)
    assert "execute" in tail and "github" in tail
    engine.session.close()


SKILL = "---\nname: deploy\ndescription: How to deploy this service.\n---\n# Deploy\n1. Run the tests.\n"


def _skill_agent(
    tmp_path: Path, workspace: Path, steps: list[ScriptedResponse], session_id: str | None = None
) -> Agent:
    (workspace / ".lamina" / "skills" / "deploy").mkdir(parents=True, exist_ok=True)
    (workspace / ".lamina" / "skills" / "deploy" / "SKILL.md").write_text(SKILL)
    return open_agent(
        LocalSessionStore(tmp_path / "store"),
        ScriptedProvider(steps),
        workspace=workspace,
        session_id=session_id,
        options=AgentOptions(mode="execute", summariser=DeterministicSummariser(), keep_tokens=200),
    )


def _reopened(agent: Agent, tmp_path: Path, workspace: Path) -> Agent:
    agent.engine.session.close()
    return _skill_agent(tmp_path, workspace, [], agent.engine.session.id)


def _pending(agent: Agent) -> list[str]:
    assert agent.activation is not None
    return [r.key for r in agent.activation.manager.pending()]


def _glob() -> ScriptedResponse:
    return ScriptedResponse(text="Listing.", tool_calls=(ScriptedToolCall(name="Glob", input={"pattern": "*.py"}),))


def _last_result(agent: Agent) -> ToolResult:
    return next(e for e in reversed(agent.engine.session.path()) if isinstance(e, ToolResult))


async def test_a_skill_invoked_only_on_the_path_left_blocks_nothing_on_the_branch(
    tmp_path: Path, workspace: Path
) -> None:
    agent = _skill_agent(
        tmp_path,
        workspace,
        [ScriptedResponse(text="Hi."), ScriptedResponse(text="Not reading it."), _glob(), ScriptedResponse(text="ok")],
    )
    await agent.run_turn("Hello")
    point = next(e for e in agent.engine.session.path() if isinstance(e, AssistantMessage))
    await agent.run_turn("Please [skill:deploy] the service.")  # required, never read on this path
    assert agent.activation is not None and [r.key for r in agent.activation.manager.pending()] == ["skill:deploy"]
    agent.branch(point.id)
    assert agent.engine.settings.skills_in_use == () and agent.activation.manager.pending() == ()
    await agent.run_turn("List the Python files.")
    result = _last_result(agent)
    assert not result.is_error and "app.py" in result.content  # not denied for a skill this branch never invoked
    agent.engine.session.close()


async def test_a_read_made_on_the_branch_s_path_still_counts_there(tmp_path: Path, workspace: Path) -> None:
    read = ScriptedToolCall(name="Read", input={"path": ".lamina/skills/deploy/SKILL.md"})
    agent = _skill_agent(
        tmp_path,
        workspace,
        [
            ScriptedResponse(text="Reading the skill.", tool_calls=(read,)),
            ScriptedResponse(text="Read it. " + "notes " * 400),
            ScriptedResponse(text="More. " + "details " * 400),
            _glob(),
            ScriptedResponse(text="ok"),
        ],
    )
    await agent.run_turn("Please [skill:deploy] the service. " + "context " * 400)
    point = next(
        e for e in agent.engine.session.path() if isinstance(e, AssistantMessage) and e.text.startswith("Read it.")
    )
    await agent.run_turn("Go on. " + "more context " * 400)
    assert (await agent.compact()).status == "compacted"  # on the path left: every read forgotten, the skill due again
    assert agent.activation is not None and [r.key for r in agent.activation.manager.pending()] == ["skill:deploy"]
    agent.branch(point.id)  # before the compaction: the skill was read in this branch's window
    assert agent.engine.settings.skills_in_use == ("deploy",) and agent.activation.manager.pending() == ()
    await agent.run_turn("List the Python files.")
    result = _last_result(agent)
    assert not result.is_error and "app.py" in result.content
    agent.engine.session.close()


async def test_a_reopened_session_has_its_path_s_skills_and_prerequisites(tmp_path: Path, workspace: Path) -> None:
    steps = [ScriptedResponse(text="Hi."), ScriptedResponse(text="Not reading it.")]
    agent = _skill_agent(tmp_path, workspace, steps)
    await agent.run_turn("Hello")
    point = next(e for e in agent.engine.session.path() if isinstance(e, AssistantMessage))
    await agent.run_turn("Please [skill:deploy] the service.")
    agent = _reopened(agent, tmp_path, workspace)
    assert agent.engine.settings.skills_in_use == ("deploy",) and _pending(agent) == [
        "skill:deploy"
    ]  # still unread here
    agent.branch(point.id)
    assert _pending(agent) == []
    agent = _reopened(agent, tmp_path, workspace)
    assert agent.engine.settings.skills_in_use == () and _pending(agent) == []
    agent.engine.session.close()
