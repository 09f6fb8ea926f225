"""`lamina run`: one headless turn through the wire server; text and JSON output, exit codes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from lamina.cli import app
from lamina.session import AssistantMessage, LocalSessionStore, ToolCall, ToolOutputPruned, ToolResult, UserMessage
from tests.wire.context_editing import CLEARED_TOOL_RESULT
from tests.wire.fixtures import API_KEY
from tests.wire.script import Fail, Reply, ToolUse
from tests.wire.server import WireServer

runner = CliRunner()
MODEL = "anthropic:claude-sonnet-5"


@pytest.fixture
def ws(tmp_path: Path, wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("# demo\n")
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", wire.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return workspace


def _run(tmp_path: Path, *args: str, stdin: str | None = None) -> Result:
    return runner.invoke(app, ["--store", str(tmp_path / "store"), "run", *args, "--model", MODEL], input=stdin)


@pytest.mark.slow
def test_run_prints_the_answer_and_tool_lines_go_to_stderr(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(Reply(text="Looking.", tool_calls=[ToolUse("Glob", {"pattern": "*.md"})]), Reply(text="One file [/]."))
    result = runner.invoke(app, ["--store", str(tmp_path / "store"), "run", "What is here?", "--model", MODEL])
    assert result.exit_code == 0, result.output
    assert result.stdout == "One file [/].\n"
    assert "→ Glob *.md" in result.stderr


def test_run_json_reports_text_usage_tools_and_session(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(Reply(text="Looking.", tool_calls=[ToolUse("Glob", {"pattern": "*.md"})]), Reply(text="One file."))
    result = runner.invoke(
        app, ["--store", str(tmp_path / "store"), "run", "-", "--model", MODEL, "--json"], input="What?\n"
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["text"] == "One file." and data["tools_run"] == ["Glob"] and data["model_calls"] == 2
    assert data["usage"]["output"] > 0 and data["cost_usd"] > 0
    assert data["session_id"] == LocalSessionStore(tmp_path / "store").list()[0].id
    assert '"text":"What?"' in json.dumps(wire.requests[0].body["messages"], separators=(",", ":"))


def test_run_stream_json_prints_one_event_per_line(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(Fail("rate_limit", retry_after=0), Reply(text="Hello there."))
    store = ["--store", str(tmp_path / "store")]
    result = runner.invoke(app, [*store, "run", "hi", "--model", MODEL, "--stream-json"])
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    session_id = LocalSessionStore(tmp_path / "store").list()[0].id
    assert events[0] == {
        "type": "session",
        "session_id": session_id,
        "model": MODEL,
        "mode": "ask",
        "trust": {"trusted": False, "not_applied": []},
    }
    assert kinds[1] == "retry" and events[1]["attempt"] == 1 and "rate limit" in events[1]["error"]
    assert "".join(e["text"] for e in events if e["type"] == "text") == "Hello there."
    assert kinds[-1] == "result" and events[-1]["text"] == "Hello there."


@pytest.mark.slow
def test_run_continue_resumes_the_latest_session(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(Reply(text="Noted."), Reply(text="42."))
    store = ["--store", str(tmp_path / "store")]
    first = runner.invoke(app, [*store, "run", "remember 42", "--model", MODEL, "--json"])
    second = runner.invoke(app, [*store, "run", "which number?", "--model", MODEL, "--json", "--continue"])
    assert first.exit_code == 0 and second.exit_code == 0, second.output
    assert json.loads(first.stdout)["session_id"] == json.loads(second.stdout)["session_id"]
    assert "remember 42" in json.dumps(wire.requests[1].body["messages"])


@pytest.mark.slow
def test_run_exit_codes(tmp_path: Path, ws: Path, wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    store = ["--store", str(tmp_path / "store")]
    wire.script(Fail("auth"))
    failed = runner.invoke(app, [*store, "run", "hi", "--model", MODEL])
    assert failed.exit_code == 4 and "error:" in failed.stderr and failed.stdout == ""
    empty = runner.invoke(app, [*store, "run", "-", "--model", MODEL], input="  \n")
    assert empty.exit_code == 2 and "empty message" in empty.stderr
    both = runner.invoke(app, [*store, "run", "hi", "--model", MODEL, "--json", "--stream-json"])
    assert both.exit_code == 2
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    no_key = runner.invoke(app, [*store, "run", "hi", "--model", MODEL])
    assert no_key.exit_code == 2 and "set ANTHROPIC_API_KEY" in no_key.stderr
    unknown = runner.invoke(app, [*store, "run", "hi", "--model", "nope:x"])
    assert unknown.exit_code == 2 and "nope:x" in unknown.stderr


@pytest.mark.slow
def test_an_automatic_compaction_is_reported(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    store = LocalSessionStore(tmp_path / "store")
    with store.create(cwd=str(ws)) as session:
        for n in range(60):
            session.append(UserMessage(text=f"step {n}: " + "details of the change " * 120))
            session.append(AssistantMessage(text=f"done {n}", model="claude-sonnet-5"))
    (ws / ".lamina").mkdir()
    (ws / ".lamina" / "config.toml").write_text("context_window = 60000\ncompaction_reserve = 20000\n")
    wire.script(Reply(text="## Summary\nSixty steps of changes."), Reply(text="Carrying on."))
    args = ["--store", str(tmp_path / "store"), "run", "next", "--model", MODEL, "--resume", session.id]
    streamed = runner.invoke(app, [*args, "--stream-json"])
    assert streamed.exit_code == 0, streamed.output
    events = [json.loads(line) for line in streamed.stdout.splitlines()]
    compactions = [(e["kind"], e["trigger"]) for e in events if e["type"] == "compaction"]
    assert compactions == [("started", "threshold"), ("completed", "threshold")]
    assert events[-1]["text"] == "Carrying on."


@pytest.mark.slow
def test_a_runaway_tool_loop_ends_in_one_error_line(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    # The agent's default limit is 50 model calls per turn; the model never stops calling tools.
    wire.script(*[Reply(text="", tool_calls=[ToolUse("Glob", {"pattern": "*.md"})]) for _ in range(50)])
    result = runner.invoke(app, ["--store", str(tmp_path / "store"), "run", "Loop.", "--model", MODEL])
    assert result.exit_code == 1, result.stderr
    assert "50 model calls" in result.stderr and "Traceback" not in result.stderr
    assert "TooManyModelCallsError" not in result.stderr  # a LaminaError: its message, not its class
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.slow
@pytest.mark.parametrize("prune", [True, False])
def test_a_resumed_run_prunes_old_tool_output_unless_the_config_says_no(
    tmp_path: Path, ws: Path, wire: WireServer, prune: bool
) -> None:
    # logged two hours ago: the cache is cold when the run resumes, so the cost model prunes
    store = LocalSessionStore(tmp_path / "store", clock=lambda: time.time() - 7_200)
    with store.create(cwd=str(ws)) as session:
        for n in range(8):  # eight turns, each reading a file of about 9,000 tokens
            session.append(UserMessage(text=f"look at module {n}"))
            session.append(ToolCall(call_id=f"c{n}", name="Read", input={"path": f"m{n}.py"}))
            session.append(ToolResult(call_id=f"c{n}", name="Read", content=f"OLD-{n}\n" + "x = compute(y)\n" * 2_200))
            session.append(AssistantMessage(text=f"read m{n}.py", model="claude-sonnet-5"))
    if not prune:
        (ws / ".lamina").mkdir()
        (ws / ".lamina" / "config.toml").write_text("prune = false\n")
    wire.script(Reply(text="Carrying on."))
    result = runner.invoke(
        app, ["--store", str(tmp_path / "store"), "run", "next", "--model", MODEL, "--resume", session.id]
    )
    assert result.exit_code == 0, result.output
    last = wire.requests[-1]
    read = json.dumps(last.seen if last.seen is not None else last.body)  # what the model read, edits applied
    with store.open(session.id) as reopened:
        pruned = [e for e in reopened.entries() if isinstance(e, ToolOutputPruned)]
    if prune:  # Lamina's own prune, or the server's clearing where the cost model priced it cheaper
        assert pruned and "OLD-0" not in read and "OLD-7" in read
        assert "[output pruned from context: Read" in read or (pruned[-1].server and CLEARED_TOOL_RESULT in read)
    else:
        assert not pruned and "OLD-0" in read and "context_management" not in last.body


def _error_line(result: Result) -> str:
    """The one line a failed run prints on stderr."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.mark.parametrize(
    ("args", "stdin", "words"),
    [
        (["-"], "  \n", ["empty message"]),
        (["hi", "--mode", "yolo"], None, ["--mode yolo", "explore, plan, ask, execute"]),
        (["hi", "--stream-json"], None, ["--json or --stream-json"]),
        (["hi", "--resume", "x", "--continue"], None, ["--resume ID or --continue"]),
    ],
)
def test_a_usage_error_exits_2_with_one_line_and_the_json_error(
    tmp_path: Path, ws: Path, args: list[str], stdin: str | None, words: list[str]
) -> None:
    result = _run(tmp_path, *args, "--json", stdin=stdin)
    assert result.exit_code == 2, result.output
    line = _error_line(result)
    assert all(word in line for word in words), line
    data = json.loads(result.stdout)
    assert data["error"]["kind"] == "usage" and all(word in data["error"]["message"] for word in words)
    assert data["session_id"] is None


def test_a_usage_error_in_text_mode_prints_nothing_on_stdout(tmp_path: Path, ws: Path) -> None:
    result = _run(tmp_path, "hi", "--mode", "yolo")
    assert result.exit_code == 2 and result.stdout == ""
    assert "PermissionMode" not in _error_line(result)


def test_the_modes_listed_are_the_permission_modes() -> None:
    from lamina.cli._run import _MODES
    from lamina.tools import PermissionMode

    assert tuple(mode.value for mode in PermissionMode) == _MODES


def test_a_provider_failure_prints_the_json_error_with_the_session(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(Fail("auth"))
    result = _run(tmp_path, "hi", "--json")
    assert result.exit_code == 4
    _error_line(result)
    data = json.loads(result.stdout)
    assert data["error"]["kind"] == "provider" and data["error"]["message"]
    assert data["session_id"] == LocalSessionStore(tmp_path / "store").list()[0].id
    assert data["model"] == MODEL and data["mode"] == "ask"


def test_a_stream_json_failure_opens_with_the_session_and_ends_with_the_error(
    tmp_path: Path, ws: Path, wire: WireServer
) -> None:
    wire.script(Fail("auth"))
    result = _run(tmp_path, "hi", "--stream-json")
    assert result.exit_code == 4
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert events[0]["type"] == "session" and events[-1]["type"] == "error"
    assert events[-1]["kind"] == "provider" and events[-1]["session_id"] == events[0]["session_id"]


def test_a_missing_session_is_a_json_session_error(tmp_path: Path, ws: Path) -> None:
    result = _run(tmp_path, "hi", "--json", "--resume", "nosuch")
    assert result.exit_code == 3, result.output
    assert "nosuch" in _error_line(result)
    assert json.loads(result.stdout)["error"]["kind"] == "session"


def test_the_help_shows_the_skill_mention_as_written() -> None:
    result = runner.invoke(app, ["run", "--help"], terminal_width=160)
    assert result.exit_code == 0 and "[skill:NAME]" in result.stdout
