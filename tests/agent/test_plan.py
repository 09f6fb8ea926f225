"""Plan mode and Accept & Compact (SPEC F16, invariant 7): the table, the tools, the flow, reloads."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from lamina.agent import Agent, PlanUpdate
from lamina.compaction import StructuredSummary, SummaryResult
from lamina.engine import PlanTransitionError, execution_message
from lamina.providers import ScriptedProvider, ScriptedResponse
from lamina.session import LocalSessionStore, PlanState, StateChange, UserMessage
from lamina.tools import PermissionMode
from tests.agent.plan_flow import (
    EARLY_WORDS,
    PLAN_REQUEST,
    PLAN_TEXT,
    dispatch_facts,
    full_log,
    make_workspace,
    open_plan_agent,
    plan_until_submitted,
    planning_script,
)

# --- plan mode and SubmitPlan ----------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> LocalSessionStore:
    return LocalSessionStore(tmp_path / "store")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return make_workspace(tmp_path)


def _call(agent: Agent, name: str, **args: object) -> tuple[str, bool]:
    result = asyncio.run(agent.tools.execute("c1", name, args))
    return result.content, result.is_error


def test_plan_mode_reads_everything_and_writes_only_in_the_plans_folder(
    store: LocalSessionStore, workspace: Path
) -> None:
    agent = open_plan_agent(store, workspace, [])
    plans = agent.engine.session.plans_dir
    assert agent.engine.settings.mode == "plan" and agent.tools.context.mode is PermissionMode.PLAN
    content, error = _call(agent, "Read", path="app.py")
    assert not error and "sum(xs) + 1" in content
    content, error = _call(agent, "Write", path=str(plans / "p.md"), content="# plan\n")
    assert not error and (plans / "p.md").read_text() == "# plan\n"
    content, error = _call(agent, "Edit", path=str(plans / "p.md"), old_string="# plan", new_string="# Plan")
    assert not error and (plans / "p.md").read_text() == "# Plan\n"
    content, error = _call(agent, "Write", path="app.py", content="broken")
    assert error and "outside the folders this session may change" in content and str(plans) in content
    content, error = _call(agent, "Bash", command="touch x")
    assert error and "not available in plan mode" in content
    assert "sum(xs) + 1" in (workspace / "app.py").read_text() and not (workspace / "x").exists()
    agent.engine.session.close()


def test_explore_mode_still_writes_nothing_and_execute_mode_may_write_plans(
    store: LocalSessionStore, workspace: Path
) -> None:
    agent = open_plan_agent(store, workspace, [])
    plans = agent.engine.session.plans_dir
    agent.set_mode("explore")
    _, error = _call(agent, "Write", path=str(plans / "p.md"), content="x")
    assert error and not (plans / "p.md").exists()
    agent.set_mode("execute")
    _, error = _call(agent, "Write", path=str(plans / "p.md"), content="x")
    assert not error
    agent.engine.session.close()


def test_submit_plan_records_the_plan_durably_and_ends_the_turn(store: LocalSessionStore, workspace: Path) -> None:
    agent = open_plan_agent(store, workspace, [])
    events: list[object] = []
    agent.on_event = events.append
    agent.provider = ScriptedProvider(planning_script(agent.engine.session.plans_dir))
    asyncio.run(plan_until_submitted(agent))
    plan = agent.plan
    assert plan is not None and plan.state == "submitted" and plan.title == "Fix total" and plan.text == PLAN_TEXT
    assert plan.plan_path == str(agent.engine.session.plans_dir / "fix-total.md")
    assert any(isinstance(e, PlanUpdate) and e.plan.state == "submitted" for e in events)
    # the turn ended after SubmitPlan's result: no model call followed it
    assert agent.provider.remaining == 1
    session_id = agent.engine.session.id
    agent.engine.session.close()
    kinds = [e for e in full_log(store, session_id) if isinstance(e, PlanState)]
    assert [(e.state, e.text) for e in kinds] == [("submitted", PLAN_TEXT)]


def test_submit_plan_with_text_saves_it_in_the_plans_folder(store: LocalSessionStore, workspace: Path) -> None:
    agent = open_plan_agent(store, workspace, [])
    content, error = _call(agent, "SubmitPlan", title="Tidy up", text="1. Tidy.\n")
    assert not error and "submitted" in content
    plan = agent.plan
    assert plan is not None and Path(plan.plan_path).parent == agent.engine.session.plans_dir
    assert Path(plan.plan_path).read_text() == "1. Tidy.\n"
    _, error = _call(agent, "SubmitPlan", title="Empty", text="  ")
    assert error
    # a second plan replaces one still waiting for a decision
    _call(agent, "SubmitPlan", title="Better", text="1. Better.\n")
    second = agent.plan
    assert second is not None and second.title == "Better" and second.plan_id != plan.plan_id
    agent.engine.session.close()


# --- the flow ------------------------------------------------------------------------------------------


def _submitted_agent(store: LocalSessionStore, workspace: Path) -> Agent:
    agent = open_plan_agent(store, workspace, [])
    agent.provider = ScriptedProvider(planning_script(agent.engine.session.plans_dir))
    asyncio.run(plan_until_submitted(agent))
    return agent


def test_accept_and_compact_runs_the_plan_in_a_fresh_context(store: LocalSessionStore, workspace: Path) -> None:
    agent = _submitted_agent(store, workspace)
    outcome = asyncio.run(agent.accept_plan(compact=True, draft="and then rename it"))
    assert outcome is not None and outcome.text.startswith("Done")
    plan = agent.plan
    assert plan is not None and plan.state == "done" and plan.draft_input == "and then rename it"
    assert (
        agent.engine.settings.mode == "plan"
    )  # it ran in execute mode, then the session went back (it began in plan mode)
    request = json.dumps(agent.provider.requests[-1])  # type: ignore[attr-defined]
    assert PLAN_TEXT.splitlines()[2] in request  # the plan
    assert "<conversation_summary" in request or "summary" in request.lower()
    assert EARLY_WORDS in request and PLAN_REQUEST in request  # the user's words lane
    assert "Reading the code." not in request and "Writing the plan." not in request  # not the history
    assert "mode_transition" in request  # the switch to execute, once
    session_id = agent.engine.session.id
    agent.engine.session.close()
    entries = full_log(store, session_id)
    (facts,) = dispatch_facts(entries).values()
    assert facts["states"] == ["submitted", "accepted", "awaiting_compaction", "compacted", "dispatched", "done"]
    assert len(facts["boundaries"]) == 1 and len(facts["dispatched"]) == 1 and len(facts["messages"]) == 1
    assert facts["boundaries"][0] < facts["dispatched"][0] < facts["messages"][0]
    modes = [e.value for e in entries if isinstance(e, StateChange) and e.key == "mode"]
    assert modes == ["plan", "execute", "plan"]


def test_plain_accept_dispatches_without_compacting(store: LocalSessionStore, workspace: Path) -> None:
    agent = _submitted_agent(store, workspace)
    outcome = asyncio.run(agent.accept_plan())
    assert outcome is not None
    assert agent.engine.boundary is None
    request = json.dumps(agent.provider.requests[-1])  # type: ignore[attr-defined]
    assert "Reading the code." in request  # the whole conversation is still there
    with pytest.raises(PlanTransitionError):
        asyncio.run(agent.accept_plan())  # never dispatched twice
    agent.engine.session.close()


def test_reject_returns_to_planning_with_the_feedback(store: LocalSessionStore, workspace: Path) -> None:
    agent = _submitted_agent(store, workspace)
    outcome = asyncio.run(agent.reject_plan("Also update the docstring."))
    assert outcome.text.startswith("Done")  # the scripted model's next answer
    plan = agent.plan
    assert plan is not None and plan.state == "rejected" and plan.detail == "Also update the docstring."
    assert agent.engine.settings.mode == "plan"
    last_user = [e for e in agent.engine.session.entries() if isinstance(e, UserMessage)][-1]
    assert "Also update the docstring." in last_user.text and "did not approve" in last_user.text
    assert last_user.typed == "Also update the docstring."  # the user's words lane takes only the feedback
    agent.engine.session.close()


class _FailingSummariser:
    async def summarise(self, *args: object, **kwargs: object) -> SummaryResult:
        raise OSError(28, "No space left on device")


class _SlowSummariser:
    async def summarise(self, *args: object, **kwargs: object) -> SummaryResult:
        await asyncio.sleep(3600)
        return SummaryResult(StructuredSummary(), "model")


@pytest.mark.parametrize(
    ("summariser", "reason"), [(_FailingSummariser(), "No space left"), (_SlowSummariser(), "longer")]
)
def test_a_failed_or_timed_out_compaction_fails_the_plan_and_leaves_it_re_acceptable(
    store: LocalSessionStore, workspace: Path, summariser: object, reason: str
) -> None:
    agent = _submitted_agent(store, workspace)
    good = agent.summariser
    agent.summariser = summariser  # type: ignore[assignment]
    agent.plan_compaction_timeout = 0.05
    assert asyncio.run(agent.accept_plan(compact=True)) is None
    plan = agent.plan
    assert plan is not None and plan.state == "failed" and reason in plan.detail and not plan.dispatched
    assert not [e for e in agent.engine.session.entries() if isinstance(e, UserMessage) and "approved" in e.text]
    agent.summariser = good
    outcome = asyncio.run(agent.accept_plan(compact=True))
    assert outcome is not None and agent.plan is not None and agent.plan.state == "done"
    agent.engine.session.close()


def test_a_compaction_in_between_keeps_the_plan_and_its_snapshot_carries_it(
    store: LocalSessionStore, workspace: Path
) -> None:
    agent = _submitted_agent(store, workspace)
    asyncio.run(agent.run_turn("Thinking it over; a question first: " + "is it safe? " * 100))
    outcome = asyncio.run(agent.compact("manual, while the plan waits"))
    assert outcome.status == "compacted" and outcome.boundary is not None
    snapshot = outcome.boundary.state.plan
    assert snapshot is not None and snapshot.state == "submitted" and snapshot.text == PLAN_TEXT
    session_id = agent.engine.session.id
    agent.engine.session.close()
    # a resume reads from the boundary only: the snapshot alone restores the plan
    again = open_plan_agent(store, workspace, [ScriptedResponse(text="Done.")], session_id=session_id)
    loaded = again.engine.session.entries_loaded()
    assert not any(isinstance(e, PlanState) for e in loaded)
    assert again.plan == snapshot
    assert asyncio.run(again.accept_plan(compact=True)) is not None
    assert again.plan is not None and again.plan.state == "done"
    again.engine.session.close()


def _stop_at(store: LocalSessionStore, workspace: Path, state: str) -> str:
    """A session whose accepted plan stopped at `state`, as a process that died there leaves it."""
    agent = _submitted_agent(store, workspace)
    agent.engine.plans.record("accepted", compact=True, draft_input="my unsent words")
    if state != "accepted":
        agent.engine.plans.record("awaiting_compaction")
    session_id = agent.engine.session.id
    agent.engine.session.close()
    return session_id


@pytest.mark.slow
@pytest.mark.parametrize("state", ["accepted", "awaiting_compaction"])
def test_reopening_resumes_an_accepted_plan_where_it_stopped(
    store: LocalSessionStore, workspace: Path, state: str
) -> None:
    session_id = _stop_at(store, workspace, state)
    again = open_plan_agent(store, workspace, [ScriptedResponse(text="Done.")], session_id=session_id)
    plan = again.plan
    assert plan is not None and plan.state == state and plan.draft_input == "my unsent words"
    outcome = asyncio.run(again.resume_plan())
    assert outcome is not None and again.plan is not None and again.plan.state == "done"
    again.engine.session.close()
    (facts,) = dispatch_facts(full_log(store, session_id)).values()
    assert len(facts["boundaries"]) == 1 and len(facts["dispatched"]) == 1 and len(facts["messages"]) == 1


def test_a_new_message_after_a_reload_runs_the_accepted_plan_first(store: LocalSessionStore, workspace: Path) -> None:
    session_id = _stop_at(store, workspace, "awaiting_compaction")
    again = open_plan_agent(
        store, workspace, [ScriptedResponse(text="Plan done."), ScriptedResponse(text="Hi.")], session_id=session_id
    )
    outcome = asyncio.run(again.run_turn("hello again"))
    assert outcome.text == "Hi." and again.plan is not None and again.plan.state == "done"
    users = [e.text for e in again.engine.session.entries() if isinstance(e, UserMessage)]
    assert users[-2] == execution_message(again.plan) and users[-1] == "hello again"
    again.engine.session.close()
