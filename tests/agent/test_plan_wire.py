"""Accept & Compact end to end: the official SDK clients against the local wire server, real tools.

Plan mode, the plan written in the plans folder and submitted, "Accept & Compact" (the summary
asked of the same server), then the first request after the dispatch: it holds the summary, the
user's words lane and the plan, and none of the history from before the plan.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lamina.agent import AgentOptions, open_agent
from lamina.providers import RetryPolicy
from lamina.session import LocalSessionStore, PlanState
from tests.agent.plan_flow import EARLY_WORDS, PLAN_REQUEST, PLAN_TEXT, make_workspace
from tests.wire.fixtures import anthropic_provider, openai_chat_provider, openai_responses_provider
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

PROVIDERS: dict[str, Callable[[WireServer], Any]] = {
    "anthropic": anthropic_provider,
    "openai-chat": openai_chat_provider,
    "openai-responses": openai_responses_provider,
}
EARLY_ANSWER = "Noted: the billing report depends on it. " * 40
SUMMARY = "## Goal\nFix total() as the approved plan says.\n\n## Key decisions\n- Keep total() pure.\n"


async def _no_sleep(_: float) -> None:
    return None


@pytest.mark.slow
@pytest.mark.parametrize("kind", PROVIDERS)
async def test_accept_and_compact_sends_the_plan_in_a_fresh_context(
    tmp_path: Path, wire: WireServer, kind: str
) -> None:
    workspace = make_workspace(tmp_path)
    store = LocalSessionStore(tmp_path / "store")
    async with PROVIDERS[kind](wire) as provider:
        agent = open_agent(
            store,
            provider,
            workspace=workspace,
            options=AgentOptions(mode="plan", retry=RetryPolicy(sleep=_no_sleep), keep_tokens=200),
        )
        plan_file = str(agent.engine.session.plans_dir / "fix-total.md")
        edit = {"path": "app.py", "old_string": " + 1", "new_string": ""}
        wire.script(
            Reply(text=EARLY_ANSWER),
            Reply(text="Reading the code first.", tool_calls=[ToolUse("Read", {"path": "app.py"})]),
            Reply(
                text="Writing the plan down.", tool_calls=[ToolUse("Write", {"path": plan_file, "content": PLAN_TEXT})]
            ),
            Reply(text="Submitting it.", tool_calls=[ToolUse("SubmitPlan", {"title": "Fix total", "path": plan_file})]),
            Reply(text=SUMMARY),  # the compaction's summary
            Reply(text="Fixing.", tool_calls=[ToolUse("Read", {"path": "AGENTS.md"}), ToolUse("Edit", edit)]),
            Reply(text="Done: total() no longer adds 1."),
        )
        await agent.run_turn(EARLY_WORDS)
        planned = await agent.run_turn(PLAN_REQUEST)
        assert planned.stop_reason == "plan_submitted"
        outcome = await agent.accept_plan(compact=True, draft="then rename it")
    assert outcome is not None and outcome.text == "Done: total() no longer adds 1."
    assert wire.pending == 0 and all(r.status == 200 for r in wire.requests)
    assert (workspace / "app.py").read_text() == "def total(xs):\n    return sum(xs)\n"  # the plan ran, for real
    plan = agent.plan
    assert plan is not None and plan.state == "done" and plan.draft_input == "then rename it"

    bodies = [json.dumps(body) for body in wire.bodies()]
    dispatch = next(i for i, body in enumerate(bodies) if "I approved the plan" in body)
    assert dispatch == 5  # after the planning turn's 4 requests and the summary request
    first = bodies[dispatch]
    assert "Fix total() as the approved plan says." in first  # the summary
    assert EARLY_WORDS in first and PLAN_REQUEST in first  # the user's words lane, verbatim
    assert "Remove the `+ 1` in app.py." in first and "fix-total.md" in first  # the plan: its text and its path
    assert "permission mode: execute" in first and "changed from plan to execute" in first
    for before in ("Noted: the billing report", "Reading the code first.", "Writing the plan down.", "Submitting it."):
        assert before not in first, before  # the history from before the plan is summarised away
    assert all("I approved the plan" not in body for body in bodies[:dispatch])  # not sent before its compaction
    assert sum("I approved the plan" in body for body in bodies) == len(bodies) - dispatch  # one message, then history

    session_id = agent.engine.session.id
    agent.engine.session.close()
    with store.open(session_id, writable=False) as reader:
        states = [e.state for e in reader.entries() if isinstance(e, PlanState)]
    assert states == ["submitted", "accepted", "awaiting_compaction", "compacted", "dispatched", "done"]
