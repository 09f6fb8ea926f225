"""`Agent.accept_plan(mode=…)`: the plan runs in the chosen mode, then the session is in the mode before the plan.

The choice and the way back are recorded with the acceptance, so a reload mid-plan keeps both.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from lamina.agent import Agent, AgentOptions, open_agent
from lamina.compaction import DeterministicSummariser
from lamina.engine import execution_message
from lamina.providers import ScriptedProvider, ScriptedResponse, ScriptedToolCall
from lamina.session import AssistantMessage, LocalSessionStore, StateChange, UserMessage
from lamina.tools import Allow, Deny, PermissionRequest

PLAN = "1. Write fixed.txt.\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def store(tmp_path: Path) -> LocalSessionStore:
    return LocalSessionStore(tmp_path / "store")


def _agent(store: LocalSessionStore, workspace: Path, asked: list[str], *, session_id: str | None = None) -> Agent:
    async def ask(request: PermissionRequest) -> Allow | Deny:
        asked.append(request.call.name)
        return Allow()

    steps = [
        ScriptedResponse(text="Planned.", tool_calls=(ScriptedToolCall("SubmitPlan", {"title": "Fix", "text": PLAN}),)),
        ScriptedResponse(
            text="Fixing.", tool_calls=(ScriptedToolCall("Write", {"path": "fixed.txt", "content": "ok\n"}),)
        ),
        ScriptedResponse(text="Fixed."),
    ]
    return open_agent(
        store,
        ScriptedProvider(steps),
        workspace=workspace,
        session_id=session_id,
        options=AgentOptions(mode="ask", ask=ask, summariser=DeterministicSummariser()),
    )


def _modes(agent: Agent) -> list[str]:
    return [e.value for e in agent.engine.session.entries() if isinstance(e, StateChange) and e.key == "mode"]


async def _submitted(agent: Agent) -> None:
    agent.set_mode("plan")
    outcome = await agent.run_turn("Plan the fix.")
    assert outcome.stop_reason == "plan_submitted"


@pytest.mark.parametrize("mode", ["ask", "execute"])
def test_the_plan_runs_in_the_chosen_mode_then_the_mode_before_plan_mode(
    store: LocalSessionStore, workspace: Path, mode: str
) -> None:
    asked: list[str] = []
    with _agent(store, workspace, asked) as agent:
        asyncio.run(_submitted(agent))
        outcome = asyncio.run(agent.accept_plan(mode=mode))
        assert outcome is not None and outcome.text == "Fixed."
        plan = agent.plan
        assert plan is not None and (plan.state, plan.run_mode, plan.return_mode) == ("done", mode, "ask")
        assert (workspace / "fixed.txt").read_text() == "ok\n"
        assert asked == (["Write"] if mode == "ask" else [])  # ask mode asked before the change
        assert agent.engine.settings.mode == "ask" and agent.tools.context.mode.value == "ask"
        assert _modes(agent) == (["ask", "plan", "ask"] if mode == "ask" else ["ask", "plan", "execute", "ask"])


def test_a_plan_whose_run_the_process_stopped_in_goes_back_to_the_mode_before_it(
    store: LocalSessionStore, workspace: Path
) -> None:
    with _agent(store, workspace, []) as agent:
        asyncio.run(_submitted(agent))
        engine = agent.engine
        # what a process killed during the execution turn leaves: accepted, dispatched, answered, in execute mode
        engine.plans.record("accepted", run_mode="execute", return_mode="ask")
        engine.plans.record("dispatched")
        plan = engine.plans.latest
        assert plan is not None
        agent.set_mode("execute")
        engine.record(UserMessage(text=execution_message(plan)), durable=True)
        engine.record(AssistantMessage(text="Fixing."), durable=True)
        session_id = engine.session.id
    with _agent(store, workspace, [], session_id=session_id) as reopened:
        assert reopened.engine.settings.mode == "execute"
        assert asyncio.run(reopened.resume_plan()) is None  # not sent again
        assert reopened.engine.settings.mode == "ask"
        assert reopened.plan is not None and reopened.plan.state == "dispatched"
