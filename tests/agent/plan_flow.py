"""A plan-mode session on the scripted provider, for the plan tests (the crash children import it too)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lamina.agent import Agent, AgentOptions, open_agent
from lamina.compaction import DeterministicSummariser
from lamina.engine import Plan, execution_message
from lamina.providers import RetryPolicy, ScriptedProvider, ScriptedResponse, ScriptedToolCall
from lamina.session import CompactionBoundary, LocalSessionStore, LogEntry, PlanState, UserMessage

PLAN_TEXT = "# Fix total()\n\n1. Remove the `+ 1` in app.py.\n2. Run `python test_app.py`.\n"
EARLY_WORDS = "Before anything else: total() is used by the billing report, keep it pure."
PLAN_REQUEST = "total() returns the wrong number. Plan the fix; do not change anything yet."


async def _no_sleep(_: float) -> None:
    return None


def make_workspace(root: Path) -> Path:
    workspace = root / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "AGENTS.md").write_text("Run the tests after every change.\n")
    (workspace / "app.py").write_text("def total(xs):\n    return sum(xs) + 1\n")
    return workspace


def open_plan_agent(
    store: LocalSessionStore, workspace: Path, steps: list[ScriptedResponse], *, session_id: str | None = None
) -> Agent:
    """An agent in plan mode (for a new session) on a scripted provider, summaries made offline."""
    return open_agent(
        store,
        ScriptedProvider(steps),
        workspace=workspace,
        session_id=session_id,
        options=AgentOptions(
            mode="plan", summariser=DeterministicSummariser(), retry=RetryPolicy(sleep=_no_sleep), keep_tokens=200
        ),
    )


def planning_script(plans_dir: Path) -> list[ScriptedResponse]:
    """The model's side of a planning turn: read, write the plan in the plans folder, submit it."""

    def call(name: str, **args: Any) -> ScriptedToolCall:
        return ScriptedToolCall(name=name, input=args)

    plan_file = str(plans_dir / "fix-total.md")
    return [
        ScriptedResponse(text="Noted. " + "The billing report calls total() on every row. " * 150),
        ScriptedResponse(text="Reading the code.", tool_calls=(call("Read", path="app.py"),)),
        ScriptedResponse(text="Writing the plan.", tool_calls=(call("Write", path=plan_file, content=PLAN_TEXT),)),
        ScriptedResponse(text="Submitting it.", tool_calls=(call("SubmitPlan", title="Fix total", path=plan_file),)),
        ScriptedResponse(text="Done: total() fixed and the test passes."),
    ]


async def plan_until_submitted(agent: Agent) -> None:
    """An earlier exchange, then the planning turn that ends with SubmitPlan."""
    await agent.run_turn(EARLY_WORDS)
    outcome = await agent.run_turn(PLAN_REQUEST)
    assert outcome.stop_reason == "plan_submitted", outcome.stop_reason


def full_log(store: LocalSessionStore, session_id: str) -> list[LogEntry]:
    with store.open(session_id, writable=False) as reader:
        reader.load_all()
        return reader.entries()


def dispatch_facts(entries: list[LogEntry]) -> dict[str, Any]:
    """What the whole log says about the session's plans: dispatches, execution messages, compactions."""
    submitted = {e.plan_id: e for e in entries if isinstance(e, PlanState) and e.state == "submitted"}
    facts: dict[str, Any] = {}
    index = {id(e): i for i, e in enumerate(entries)}
    for plan_id, first in submitted.items():
        states = [e for e in entries if isinstance(e, PlanState) and e.plan_id == plan_id]
        dispatched = [index[id(e)] for e in states if e.state == "dispatched"]
        text = execution_message(
            Plan(plan_id=plan_id, state="dispatched", title=first.title, plan_path=first.plan_path, text=first.text)
        )
        messages = [i for i, e in enumerate(entries) if isinstance(e, UserMessage) and e.text == text]
        boundaries = [i for i, e in enumerate(entries) if isinstance(e, CompactionBoundary) and e.plan_id == plan_id]
        facts[plan_id] = {
            "states": [e.state for e in states],
            "dispatched": dispatched,
            "messages": messages,
            "boundaries": boundaries,
        }
    return facts


def describe(entries: list[LogEntry]) -> str:
    return json.dumps([type(e).__name__ + (f":{e.state}" if isinstance(e, PlanState) else "") for e in entries])
