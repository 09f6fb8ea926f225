"""`lamina run`: `--accept-plan` and `--reject-plan` decide a submitted plan headlessly; an interrupted run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from lamina.cli import app
from lamina.session import LocalSessionStore, PlanState, UserMessage

runner = CliRunner()
PLAN = "1. Remove the + 1 in app.py.\n2. Run the tests.\n"
SUBMIT: dict[str, object] = {
    "text": "Here is my plan.",
    "tool_calls": [{"name": "SubmitPlan", "input": {"title": "Fix", "text": PLAN}}],
}


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "app.py").write_text("def total(xs):\n    return sum(xs) + 1\n")
    monkeypatch.chdir(root)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return root


def _run(tmp_path: Path, name: str, responses: list[dict[str, object]], *args: str) -> Result:
    script = tmp_path / f"{name}.json"
    script.write_text(json.dumps({"responses": responses}))
    store = ["--store", str(tmp_path / "store")]
    return runner.invoke(app, [*store, "run", *args, "--model", f"scripted:{script}", "--json"])


def _log(tmp_path: Path) -> list[object]:
    store = LocalSessionStore(tmp_path / "store")
    with store.open(store.list()[0].id, writable=False) as session:
        return list(session.entries())


def _states(tmp_path: Path) -> list[str]:
    return [e.state for e in _log(tmp_path) if isinstance(e, PlanState)]


def test_accept_plan_runs_the_plan_the_turn_submitted(tmp_path: Path, workspace: Path) -> None:
    result = _run(
        tmp_path, "one", [SUBMIT, {"text": "Fixed as planned."}], "Plan the fix.", "--mode", "plan", "--accept-plan"
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["text"] == "Fixed as planned." and data["stop_reason"] == "end_turn"
    assert _states(tmp_path)[:2] == ["submitted", "accepted"]


def test_without_a_decision_a_plan_mode_run_ends_at_the_submitted_plan(tmp_path: Path, workspace: Path) -> None:
    result = _run(tmp_path, "one", [SUBMIT], "Plan the fix.", "--mode", "plan")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["stop_reason"] == "plan_submitted"
    assert _states(tmp_path) == ["submitted"]


def test_reject_plan_decides_a_resumed_sessions_plan_without_a_message(tmp_path: Path, workspace: Path) -> None:
    first = _run(tmp_path, "one", [SUBMIT], "Plan the fix.", "--mode", "plan")
    session_id = json.loads(first.stdout)["session_id"]
    revised: dict[str, object] = {
        "text": "Revised.",
        "tool_calls": [{"name": "SubmitPlan", "input": {"title": "Fix 2", "text": PLAN}}],
    }
    second = _run(tmp_path, "two", [revised], "--resume", session_id, "--reject-plan", "Also the docstring.")
    assert second.exit_code == 0, second.output
    data = json.loads(second.stdout)
    assert data["session_id"] == session_id and data["stop_reason"] == "plan_submitted"
    assert _states(tmp_path) == ["submitted", "rejected", "submitted"]
    assert any(isinstance(e, UserMessage) and "Also the docstring." in e.text for e in _log(tmp_path))


def test_accept_plan_of_a_resumed_session_runs_it(tmp_path: Path, workspace: Path) -> None:
    first = _run(tmp_path, "one", [SUBMIT], "Plan the fix.", "--mode", "plan")
    session_id = json.loads(first.stdout)["session_id"]
    second = _run(tmp_path, "two", [{"text": "Fixed as planned."}], "--resume", session_id, "--accept-plan")
    assert second.exit_code == 0, second.output
    assert json.loads(second.stdout)["text"] == "Fixed as planned."
    assert _states(tmp_path)[:2] == ["submitted", "accepted"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--accept-plan"], "--resume ID or --continue"),
        ([], "missing message"),
        (["hi", "--accept-plan", "--reject-plan", "no"], "--accept-plan or --reject-plan"),
        (["hi", "--reject-plan", " "], "feedback"),
    ],
)
def test_a_bad_plan_decision_is_a_usage_error(tmp_path: Path, workspace: Path, args: list[str], words: str) -> None:
    result = _run(tmp_path, "one", [{"text": "unused"}], *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and words in result.stderr
    data = json.loads(result.stdout)
    assert data["error"]["kind"] == "usage" and words in data["error"]["message"]


def test_deciding_when_no_plan_waits_is_a_usage_error(tmp_path: Path, workspace: Path) -> None:
    first = _run(tmp_path, "one", [{"text": "Hello."}], "hi")
    session_id = json.loads(first.stdout)["session_id"]
    second = _run(tmp_path, "two", [{"text": "unused"}], "--resume", session_id, "--accept-plan")
    assert second.exit_code == 2, second.output
    data = json.loads(second.stdout)
    assert data["error"]["kind"] == "usage" and data["session_id"] == session_id


def test_an_interrupted_run_prints_the_json_error_and_exits_130(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lamina.cli._run as run_module

    async def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "_run", interrupted)
    result = _run(tmp_path, "one", [{"text": "unused"}], "hi")
    assert result.exit_code == 130 and result.stderr == "error: interrupted\n"
    assert json.loads(result.stdout)["error"] == {"kind": "interrupted", "message": "interrupted"}
