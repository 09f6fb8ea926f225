"""`lamina chat` and plans: the decision prompt after a submitted plan, `/plan`, a reload mid-plan."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.session import CompactionBoundary, LocalSessionStore, PlanState, UserMessage

runner = CliRunner()
PLAN = "1. Remove the + 1 in app.py.\n2. Run the tests.\n"


def _script(tmp_path: Path, *responses: Mapping[str, object]) -> Path:
    script = tmp_path / "script.json"
    planning = [
        {"text": "Noted. " + "The report sums every row. " * 60},
        {"text": "Here is my plan.", "tool_calls": [{"name": "SubmitPlan", "input": {"title": "Fix", "text": PLAN}}]},
    ]
    script.write_text(json.dumps({"responses": [*planning, *responses]}))
    return script


def _chat(tmp_path: Path, script: Path, text: str, *options: str) -> tuple[int, str, str]:
    result = runner.invoke(
        app, ["--store", str(tmp_path / "store"), "chat", "--model", f"scripted:{script}", *options], input=text
    )
    return result.exit_code, result.stdout, result.stderr


def _log(tmp_path: Path) -> list[object]:
    store = LocalSessionStore(tmp_path / "store")
    with store.open(store.list()[0].id, writable=False) as session:
        return list(session.entries())


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "app.py").write_text("def total(xs):\n    return sum(xs) + 1\n")
    monkeypatch.chdir(root)
    return root


def test_a_submitted_plan_is_shown_and_accept_and_compact_runs_it(tmp_path: Path, workspace: Path) -> None:
    summary = {"text": "## Goal\nFix total().\n"}  # the compaction's summary comes from the model too
    script = _script(tmp_path, summary, {"text": "Fixed as planned."})
    typed = "It is used by the report.\nPlan the fix.\nc and rename it\ne\n/plan\n/quit\n"  # e: run it in execute mode
    code, stdout, stderr = _chat(tmp_path, script, typed, "--mode", "plan")
    assert code == 0, stderr
    assert "1. Remove the + 1 in app.py." in stdout  # the plan, shown for the decision
    assert "◆ plan 'Fix' submitted for your decision" in stderr
    assert "◆ plan 'Fix' accepted (Accept & Compact)" in stderr
    assert "compaction complete" in stderr and "◆ plan 'Fix' done" in stderr
    assert "Fixed as planned." in stdout
    assert "your draft kept with it: and rename it" in stderr  # /plan shows the draft
    entries = _log(tmp_path)
    states = [e.state for e in entries if isinstance(e, PlanState)]
    assert states == ["submitted", "accepted", "awaiting_compaction", "compacted", "dispatched", "done"]
    assert any(isinstance(e, CompactionBoundary) and e.plan_id for e in entries)


def test_plan_reject_sends_the_feedback_and_a_later_decision_waits_for_plan(tmp_path: Path, workspace: Path) -> None:
    script = _script(
        tmp_path,
        {"text": "Revised.", "tool_calls": [{"name": "SubmitPlan", "input": {"title": "Fix 2", "text": PLAN}}]},
    )
    code, _, stderr = _chat(
        tmp_path, script, "Hello.\nPlan the fix.\nr Also update the docstring.\n\n/plan\n/quit\n", "--mode", "plan"
    )
    assert code == 0, stderr
    assert "rejected: back to planning" in stderr and "◆ plan 'Fix 2' submitted" in stderr
    entries = _log(tmp_path)
    assert [e.state for e in entries if isinstance(e, PlanState)] == ["submitted", "rejected", "submitted"]
    last_user = [e for e in entries if isinstance(e, UserMessage)][-1]
    assert "Also update the docstring." in last_user.text


@pytest.mark.slow
def test_reopening_a_session_carries_on_with_its_accepted_plan(tmp_path: Path, workspace: Path) -> None:
    script = _script(tmp_path)
    # first run: the plan is submitted; the user decides later
    code, _, stderr = _chat(tmp_path, script, "It is used by the report.\nPlan the fix.\n\n/quit\n", "--mode", "plan")
    assert code == 0, stderr
    store = LocalSessionStore(tmp_path / "store")
    session_id = store.list()[0].id
    with store.open(session_id) as session:  # accepted, then the process died before it compacted
        plan_id = next(e.plan_id for e in session.entries() if isinstance(e, PlanState))
        session.append(PlanState(plan_id=plan_id, state="accepted", compact=True, draft_input="my draft"))
        session.append(PlanState(plan_id=plan_id, state="awaiting_compaction"))
    rest = tmp_path / "rest.json"
    rest.write_text(
        json.dumps({"responses": [{"text": "## Goal\nFix total().\n"}, {"text": "Fixed after the reload."}]})
    )
    code, stdout, stderr = _chat(tmp_path, rest, "/quit\n", "--resume", session_id)
    assert code == 0, stderr
    assert "was accepted: carrying on where it stopped" in stderr
    assert "Fixed after the reload." in stdout and "◆ plan 'Fix' done" in stderr
    states = [e.state for e in _log(tmp_path) if isinstance(e, PlanState)]
    assert states[-3:] == ["compacted", "dispatched", "done"]
