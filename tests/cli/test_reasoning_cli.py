"""Reasoning settings in the CLI: `[reasoning]`, the flags, `config show`, resume, `/effort`, the switch note."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from lamina.cli import app
from lamina.cli._reasoning_settings import EFFORTS, parse_reasoning, reasoning_text
from lamina.engine import ContextEngine
from lamina.errors import ConfigError
from lamina.placement import Effort, ReasoningConfig
from lamina.session import AssistantMessage, LocalSessionStore, Reasoning, StateChange
from tests.support.engine import TOOLS, workspace_source
from tests.wire.fixtures import API_KEY
from tests.wire.script import Reply
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
    monkeypatch.setenv("OPENAI_BASE_URL", wire.openai_url)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return workspace


def _config(ws: Path, text: str) -> Path:
    path = ws / ".lamina" / "config.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def _store(tmp_path: Path) -> list[str]:
    return ["--store", str(tmp_path / "store")]


def _reasoning_changes(tmp_path: Path, session_id: str) -> list[str]:
    with LocalSessionStore(tmp_path / "store").open(session_id, writable=False) as session:
        return [e.value for e in session.entries() if isinstance(e, StateChange) and e.key == "reasoning"]


def test_the_effort_levels_are_the_placements() -> None:
    assert get_args(Effort) == EFFORTS


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ('effort = "extreme"', "reasoning.effort: invalid enum value 'extreme'; allowed: 'high', 'low'"),
        ("budget_tokens = 500", "reasoning.budget_tokens: must be an integer >= 1024"),
        ("depth = 3", "reasoning.depth: unknown field 'depth'; the fields are thinking, budget_tokens"),
        ('thinking = "adaptive"\nbudget_tokens = 2048', "reasoning.budget_tokens needs reasoning.thinking"),
        ('thinking = "enabled"', "reasoning.budget_tokens (at least 1024)"),
    ],
)
def test_a_bad_reasoning_table_is_one_error_naming_the_file_and_field(ws: Path, table: str, named: str) -> None:
    path = _config(ws, f"[reasoning]\n{table}\n")
    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 2  # a usage error
    assert result.stderr.startswith(f"error: {path}: ") and named in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_config_show_gives_each_reasoning_key_and_where_it_came_from(ws: Path) -> None:
    path = _config(ws, '[reasoning]\nbudget_tokens = 4096\neffort = "high"\nhistory = "drop"\n')
    result = runner.invoke(app, ["config", "show", "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)["settings"]
    assert shown["reasoning.thinking"] == {"value": "enabled", "from": str(path)}  # a budget alone: enabled
    assert shown["reasoning.budget_tokens"] == {"value": 4096, "from": str(path)}
    assert shown["reasoning.effort"] == {"value": "high", "from": str(path)}
    assert shown["reasoning.history"] == {"value": "drop", "from": str(path)}
    assert shown["reasoning.summary"] == {"value": None, "from": "default"}
    table = runner.invoke(app, ["config", "show"])
    assert "reasoning.summary" in table.stdout and "(provider default)" in table.stdout


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--thinking", "500"], "--thinking 500: a thinking budget is at least 1024 tokens"),
        (["--thinking", "lots"], "--thinking lots: use off, adaptive or a budget in tokens (at least 1024)"),
        (["--effort", "extreme"], "--effort extreme: use one of none, minimal, low, medium, high, xhigh, max"),
        (["--reasoning-summary", "long"], "--reasoning-summary long: use one of auto, concise, detailed"),
    ],
)
def test_a_bad_reasoning_flag_is_a_usage_error(tmp_path: Path, ws: Path, flags: list[str], message: str) -> None:
    run = runner.invoke(app, [*_store(tmp_path), "run", "hi", "--model", MODEL, *flags, "--json"])
    assert run.exit_code == 2 and json.loads(run.stdout)["error"] == {"kind": "usage", "message": message}
    chat = runner.invoke(app, [*_store(tmp_path), "chat", "--model", MODEL, *flags], input="/quit\n")
    assert chat.exit_code == 2 and chat.stderr == f"error: {message}\n"


def test_the_flags_win_over_the_file_and_reach_the_request(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    _config(ws, '[reasoning]\nthinking = "adaptive"\neffort = "low"\ndisplay = "omitted"\n')
    wire.script(Reply(text="Done."))
    result = runner.invoke(app, [*_store(tmp_path), "run", "hi", "--model", MODEL, "--thinking", "2048", "--json"])
    assert result.exit_code == 0, result.output
    body = wire.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048, "display": "omitted"}
    assert body["output_config"] == {"effort": "low"}
    session_id = json.loads(result.stdout)["session_id"]
    assert _reasoning_changes(tmp_path, session_id) == [
        "thinking=enabled budget_tokens=2048 display=omitted effort=low"
    ]


def test_responses_gets_effort_and_summary(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(Reply(text="Done."))
    args = ["run", "hi", "--model", "openai-responses:gpt-5", "--effort", "medium", "--reasoning-summary", "auto"]
    result = runner.invoke(app, [*_store(tmp_path), *args])
    assert result.exit_code == 0, result.output
    assert wire.requests[0].body["reasoning"] == {"effort": "medium", "summary": "auto"}


def test_a_resumed_session_keeps_its_reasoning_unless_the_command_line_says(
    tmp_path: Path, ws: Path, wire: WireServer
) -> None:
    spec = f"openai-compat:{wire.openai_url}#local-model"
    wire.script(Reply(text="One."), Reply(text="Two."), Reply(text="Three."))
    first = runner.invoke(app, [*_store(tmp_path), "run", "one", "--model", spec, "--effort", "high", "--json"])
    assert first.exit_code == 0, first.output
    _config(ws, '[reasoning]\neffort = "minimal"\n')  # a file gives way to what the session recorded
    second = runner.invoke(app, [*_store(tmp_path), "run", "two", "--continue", "--json"])
    assert second.exit_code == 0, second.output
    third = runner.invoke(app, [*_store(tmp_path), "run", "three", "--continue", "--effort", "low", "--json"])
    assert third.exit_code == 0, third.output
    assert [r.body.get("reasoning_effort") for r in wire.requests] == ["high", "high", "low"]
    session_id = json.loads(first.stdout)["session_id"]
    assert _reasoning_changes(tmp_path, session_id) == ["effort=high", "effort=low"]


def test_a_session_that_asks_nothing_records_no_reasoning(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(Reply(text="Done."))
    result = runner.invoke(app, [*_store(tmp_path), "run", "hi", "--model", MODEL, "--json"])
    assert result.exit_code == 0, result.output
    assert _reasoning_changes(tmp_path, json.loads(result.stdout)["session_id"]) == []
    assert "thinking" not in wire.requests[0].body and "output_config" not in wire.requests[0].body


def test_effort_in_chat_sets_the_next_requests_and_is_recorded(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(Reply(text="First."), Reply(text="Second."))
    typed = "/effort\nfirst\n/effort high\n/effort extreme\nsecond\n/quit\n"
    result = runner.invoke(app, [*_store(tmp_path), "chat", "--model", MODEL, "--thinking", "adaptive"], input=typed)
    assert result.exit_code == 0, result.output
    assert "reasoning thinking=adaptive\n" in result.stderr
    assert "reasoning thinking=adaptive effort=high\n" in result.stderr
    assert "error: effort extreme: use one of none, minimal, low, medium, high, xhigh, max" in result.stderr
    assert [r.body.get("output_config") for r in wire.requests] == [None, {"effort": "high"}]
    assert all(r.body["thinking"] == {"type": "adaptive"} for r in wire.requests)
    (row,) = LocalSessionStore(tmp_path / "store").list()
    assert _reasoning_changes(tmp_path, row.id) == ["thinking=adaptive", "thinking=adaptive effort=high"]


def test_effort_on_a_script_is_recorded_for_the_next_model(tmp_path: Path, ws: Path) -> None:
    script = ws / "script.json"
    script.write_text(json.dumps({"responses": [{"text": "Noted."}]}))
    typed = "hello\n/effort high\n/effort default\n/quit\n"
    result = runner.invoke(app, [*_store(tmp_path), "chat", "--model", "scripted:script.json"], input=typed)
    assert result.exit_code == 0, result.output
    assert "(scripted:script.json takes no reasoning settings: recorded for the next model)" in result.stderr
    assert "reasoning effort=high\n" in result.stderr and "reasoning default\n" in result.stderr
    (row,) = LocalSessionStore(tmp_path / "store").list()
    assert _reasoning_changes(tmp_path, row.id) == ["effort=high", "default"]


def _anthropic_session(tmp_path: Path, ws: Path) -> str:
    """A stored session on Anthropic whose one answer came with two thinking blocks."""
    (ws / "AGENTS.md").write_text("Keep answers short.\n")
    store = LocalSessionStore(tmp_path / "store")
    session = store.create(cwd=str(ws))
    with ContextEngine(session, stable_source=workspace_source(ws), tools=TOOLS, owns_session=True) as engine:
        engine.settings.set_model(MODEL)
        turn = engine.prepare_turn("think about it")
        thinking = (
            Reasoning(provider="anthropic", kind="thinking", text="Let me see.", signature="sig-1"),
            Reasoning(provider="anthropic", kind="redacted_thinking", data="opaque"),
        )
        engine.record(AssistantMessage(text="Thought about it.", reasoning=thinking))
        engine.commit(turn)
        engine.end_turn()
        return engine.session.id


NOTE = (
    "2 reasoning blocks of anthropic left out of the requests to openai-compat from here on"
    " (reasoning goes only to the provider that made it; the log keeps them)"
)


def test_resuming_on_another_provider_notes_the_reasoning_left_out(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    session_id = _anthropic_session(tmp_path, ws)
    wire.script(Reply(text="Done."))
    spec = f"openai-compat:{wire.openai_url}#local-model"
    result = runner.invoke(app, [*_store(tmp_path), "run", "go on", "--resume", session_id, "--model", spec])
    assert result.exit_code == 0, result.output
    assert NOTE in " ".join(result.stderr.split())
    assistant = [m for m in wire.requests[0].body["messages"] if m["role"] == "assistant"]
    assert assistant == [{"role": "assistant", "content": "Thought about it."}]  # no foreign reasoning
    shown = runner.invoke(app, [*_store(tmp_path), "sessions", "show", session_id])
    assert "state foreign_reasoning = anthropic" in shown.stdout
    again = runner.invoke(app, [*_store(tmp_path), "run", "more", "--continue"])  # the same model: no new note
    assert "left out" not in again.stderr


def test_model_in_chat_notes_the_reasoning_left_out(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    session_id = _anthropic_session(tmp_path, ws)
    wire.script(Reply(text="Done."))
    spec = f"openai-compat:{wire.openai_url}#local-model"
    typed = f"/model {MODEL}\n/model {spec}\ngo on\n/quit\n"
    result = runner.invoke(app, [*_store(tmp_path), "chat", "--resume", session_id], input=typed)
    assert result.exit_code == 0, result.output
    assert " ".join(result.stderr.split()).count(NOTE) == 1  # the same provider first: nothing left out
    with LocalSessionStore(tmp_path / "store").open(session_id, writable=False) as session:
        notes = [e for e in session.entries() if isinstance(e, StateChange) and e.key == "foreign_reasoning"]
    assert [(e.value, e.detail) for e in notes] == [("anthropic", NOTE)]


_CONFIGS = st.builds(
    lambda thinking, display, effort, summary, history: ReasoningConfig(
        thinking=thinking[0],
        budget_tokens=thinking[1],
        display=display,
        effort=effort,
        summary=summary,
        history=history,
    ),
    st.sampled_from([(None, None), ("adaptive", None), ("disabled", None)])
    | st.integers(1024, 100_000).map(lambda n: ("enabled", n)),
    st.sampled_from([None, "summarized", "omitted"]),
    st.sampled_from([None, *EFFORTS]),
    st.sampled_from([None, "auto", "concise", "detailed"]),
    st.sampled_from(["keep", "drop"]),
)


@given(_CONFIGS)
def test_the_logged_text_reads_back_as_the_same_settings(config: ReasoningConfig) -> None:
    assert parse_reasoning(reasoning_text(config)) == config


@pytest.mark.parametrize("text", ["effort=extreme", "thinking", "budget_tokens=2048", "depth=3"])
def test_recorded_text_that_cannot_be_read_is_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError, match="recorded reasoning settings"):
        parse_reasoning(text)
