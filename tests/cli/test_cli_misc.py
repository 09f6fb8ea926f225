"""Sessions delete and cleanup, config files, --version, API key check, retry and compaction lines, slash commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.cli._turn_view import TurnView, footer_text
from lamina.engine import CompactionEvent
from lamina.session import LocalSessionStore, Usage, UserMessage
from lamina.workspace import trust_workspace
from tests.wire.fixtures import API_KEY
from tests.wire.script import Fail, Reply
from tests.wire.server import WireServer

runner = CliRunner()


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return workspace


def _script(tmp_path: Path, *texts: str) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"responses": [{"text": t} for t in texts]}))
    return f"scripted:{path}"


@pytest.mark.slow
def test_sessions_delete_asks_first_and_yes_skips_the_question(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    with store.create(cwd="/p") as one:
        one.append(UserMessage(text="first"))
    with store.create(cwd="/p") as two:
        two.append(UserMessage(text="second"))
    args = ["--store", str(tmp_path), "sessions", "delete"]
    kept = runner.invoke(app, [*args, one.id], input="n\n")
    assert kept.exit_code == 1 and "not deleted" in kept.stderr
    assert "first" in kept.stderr
    gone = runner.invoke(app, [*args, one.id], input="y\n")
    assert gone.exit_code == 0 and f"deleted {one.id}" in gone.stdout
    assert runner.invoke(app, [*args, two.id, "--yes"]).exit_code == 0
    assert store.list() == []
    missing = runner.invoke(app, [*args, "20260101-000000-abcdef", "--yes"])
    assert missing.exit_code == 3 and "no session" in missing.stderr


def test_delete_refuses_a_session_open_for_writing(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    session = store.create(cwd="/p")
    session.append(UserMessage(text="busy"))
    try:
        result = runner.invoke(app, ["--store", str(tmp_path), "sessions", "delete", session.id, "--yes"])
    finally:
        session.close()
    assert result.exit_code == 3 and "already open for writing" in result.stderr
    assert store.list()[0].id == session.id


def test_empty_sessions_are_not_listed_and_are_cleaned_up(tmp_path: Path, ws: Path) -> None:
    store_root = tmp_path / "store"
    store = LocalSessionStore(store_root, clock=lambda: 1_000.0)  # long ago
    store.create(cwd=str(ws)).close()
    assert len(store.list()) == 1
    listed = runner.invoke(app, ["--store", str(store_root), "sessions", "list", "--json"])
    assert json.loads(listed.stdout)["sessions"] == []
    result = runner.invoke(
        app, ["--store", str(store_root), "chat", "--model", _script(tmp_path, "unused")], input="/quit\n"
    )
    assert result.exit_code == 0, result.output
    assert "resume with" not in result.stderr
    assert LocalSessionStore(store_root).list() == []  # the stale one and the new one are gone


def test_config_files_workspace_wins_and_show_names_the_source(tmp_path: Path, ws: Path) -> None:
    user = tmp_path / "config" / "lamina" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('model = "openai:gpt-5"\nmode = "explore"\ncontext_window = 100000\n')
    (ws / ".lamina").mkdir()
    (ws / ".lamina" / "config.toml").write_text('model = "anthropic:claude-sonnet-5"\ncompaction_reserve = 5000\n')
    trust_workspace(ws)  # an untrusted workspace cannot pick the model (tests/cli/test_trust_cli.py)
    result = runner.invoke(app, ["config", "show", "--json"])
    assert result.exit_code == 0, result.output
    settings = json.loads(result.stdout)["settings"]
    assert settings["model"] == {"value": "anthropic:claude-sonnet-5", "from": str(ws / ".lamina" / "config.toml")}
    assert settings["mode"] == {"value": "explore", "from": str(user)}
    assert settings["context_window"]["value"] == 100000
    assert settings["preset"] == {"value": "default", "from": "default"}
    human = runner.invoke(app, ["config", "show"])
    assert "compaction_reserve" in human.stdout and "5000" in human.stdout
    assert settings["prune"] == {"value": True, "from": "default"}


def test_prune_false_in_the_config_file_turns_pruning_off(ws: Path) -> None:
    from lamina.cli._session import stored_session_engine
    from lamina.session import LocalSessionStore

    session = LocalSessionStore(ws / "store").create(cwd=str(ws))
    assert stored_session_engine(session).compactor.prune_policy is not None
    (ws / ".lamina").mkdir()
    (ws / ".lamina" / "config.toml").write_text("prune = false\n")
    assert stored_session_engine(session).compactor.prune_policy is None
    session.close()


def test_a_stored_session_is_priced_with_its_recorded_providers_prices(ws: Path) -> None:
    from lamina.cli._session import stored_session_engine
    from lamina.pricing import CachePrices
    from lamina.session import LocalSessionStore, StateChange

    store = LocalSessionStore(ws / "store")
    for spec, prices in (
        ("anthropic:claude-sonnet-5", CachePrices.anthropic()),
        ("openai:gpt-5", CachePrices.openai()),
        ("openai-responses:gpt-5", CachePrices.openai()),
        ("openai-compat:http://127.0.0.1:9/v1#local", CachePrices.openai()),
    ):
        with store.create(cwd=str(ws)) as session:
            session.append(StateChange(key="model", value=spec))  # what a chat on that model recorded
            assert stored_session_engine(session).compactor.cache_prices == prices, spec


def test_a_bad_config_file_is_an_error_naming_file_and_key(tmp_path: Path, ws: Path) -> None:
    (ws / ".lamina").mkdir()
    (ws / ".lamina" / "config.toml").write_text('mode = "yolo"\n')
    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 2 and "config.toml" in result.stderr and "mode" in result.stderr
    (ws / ".lamina" / "config.toml").write_text("colour = 1\n")
    chat = runner.invoke(app, ["--store", str(tmp_path / "s"), "chat"], input="/quit\n")
    assert chat.exit_code == 2 and "colour" in chat.stderr


def test_a_missing_api_key_is_reported_at_start(tmp_path: Path, ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    result = runner.invoke(app, ["--store", str(tmp_path / "s"), "chat", "--model", "anthropic:claude-sonnet-5"])
    assert result.exit_code == 2
    assert "no API key for anthropic: set ANTHROPIC_API_KEY" in result.stderr


def test_version_and_help() -> None:
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.stdout.startswith("lamina ")
    helped = runner.invoke(app, ["--help"])
    for command in ("chat", "run", "sessions", "config", "context", "--install-completion"):
        assert command in helped.stdout


def test_chat_shows_retries_footer_and_slash_commands(
    tmp_path: Path, ws: Path, wire: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", wire.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    wire.script(Fail("overloaded", retry_after=0), Reply(text="Hello."))
    result = runner.invoke(
        app,
        ["--store", str(tmp_path / "s"), "chat", "--model", "anthropic:claude-sonnet-5"],
        input="hi\n/help\n/context\n/sessions\n/model nope:x\n/model anthropic:claude-opus-5\n/mode\n/bogus\n/quit\n",
    )
    assert result.exit_code == 0, result.output
    err = result.stderr
    assert "↻ retrying in 0.0 s (attempt 2): " in err and "Overloaded" in err
    assert result.stdout.strip() == "Hello."
    assert "$0.0" in err and "% of 200k" in err  # the footer, with a cost for a priced model
    assert "/compact [FOCUS]" in err  # /help
    assert "compacts  above 183,616 tokens (reserve 16,384)" in err  # /context
    assert "hi" in err  # /sessions lists this one, titled by its first message
    assert "provider spec 'nope:x'" in err and "model anthropic:claude-opus-5" in err
    assert "mode ask" in err and "unknown command '/bogus'" in err
    assert "--model anthropic:claude-opus-5" in err  # the resume hint names the model in use


def test_automatic_compaction_line_and_footer(capsys: pytest.CaptureFixture[str]) -> None:
    view = TurnView(model="claude-sonnet-5", spinner=False)
    view.compaction(CompactionEvent("started", "threshold", "compacting 9,000 tokens"))
    view.compaction(CompactionEvent("completed", "threshold", "compacted 9,000 → 2,000 tokens"))
    view.compaction(CompactionEvent("failed", "overflow", "compaction would free less than 5%"))
    view.compaction(CompactionEvent("completed", "manual", "manual one"))
    captured = capsys.readouterr()
    assert "⊘ automatic compaction (threshold): compacted 9,000 → 2,000 tokens" in captured.err
    assert "automatic compaction (overflow) failed: compaction would free less than 5%" in captured.err
    assert "manual one" not in captured.err
    usage = Usage(input=1_000, output=100, cache_read=10_000, cache_write=2_000)
    assert footer_text("claude-sonnet-5", usage, 50_000, 200_000) == (
        "in 1,000 · out 100 · cache read 10,000 · write 2,000 · $0.0100 · context 25% of 200k"
    )
    assert "$" not in footer_text("unknown-model", usage, 0, 200_000)


@pytest.mark.slow
def test_the_help_does_not_import_the_heavy_modules() -> None:
    heavy = ("anthropic", "openai", "mcp", "prompt_toolkit", "lamina.agent", "lamina.engine", "lamina.sources")
    code = (
        "import sys\nfrom lamina.cli import app\ntry:\n    app(['--help'])\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip() == "[]"


def test_resume_without_an_id_offers_a_list(tmp_path: Path, ws: Path) -> None:
    store = LocalSessionStore(tmp_path / "store")
    ids = []
    for text in ("older work", "newer work"):
        with store.create(cwd=str(ws)) as session:
            session.append(UserMessage(text=text))
            ids.append(session.id)
    result = runner.invoke(
        app,
        ["--store", str(tmp_path / "store"), "chat", "--model", _script(tmp_path, "unused"), "--resume", ""],
        input="2\n/quit\n",
    )
    assert result.exit_code == 0, result.output
    assert "older work" in result.stderr and "newer work" in result.stderr
    assert f"session {ids[0]} (resumed)" in result.stderr  # newest first: number 2 is the older one


def test_a_double_slash_sends_a_message_that_starts_with_a_slash(tmp_path: Path, ws: Path) -> None:
    result = runner.invoke(
        app,
        ["--store", str(tmp_path / "store"), "chat", "--model", _script(tmp_path, "It is a file.")],
        input="//etc/hosts: what is it?\n/quit\n",
    )
    assert result.exit_code == 0, result.output
    store = LocalSessionStore(tmp_path / "store")
    with store.open(store.list()[0].id, writable=False) as session:
        texts = [e.text for e in session.entries() if isinstance(e, UserMessage)]
    assert texts == ["/etc/hosts: what is it?"]


@pytest.mark.slow
def test_a_chat_without_mcp_sources_does_not_import_the_mcp_sdk() -> None:
    code = "import sys\nimport lamina.cli._session\nprint('mcp' in sys.modules, file=sys.stderr)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip() == "False"


def test_resume_with_no_id_asks_for_the_picker() -> None:
    from lamina.cli import _resume_without_id

    assert _resume_without_id(["chat", "--resume"]) == ["chat", "--resume", ""]
    assert _resume_without_id(["chat", "--resume", "--model", "x"]) == ["chat", "--resume", "", "--model", "x"]
    assert _resume_without_id(["chat", "--resume", "abc"]) == ["chat", "--resume", "abc"]


@pytest.mark.slow
def test_the_console_entry_point_ends_a_lamina_error_in_one_line_and_its_exit_code() -> None:
    # A real `lamina` process (not CliRunner): the path a user's shell takes. A store that refuses
    # connections is a LaminaRuntimeError of the store: exit 3, one line, a traceback only when asked.
    args = [sys.executable, "-m", "lamina.cli", "--store", "postgresql://nobody@127.0.0.1:1/x", "sessions", "list"]
    env = {k: v for k, v in os.environ.items() if k != "LAMINA_DEBUG"}
    plain = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    assert plain.returncode == 3
    assert plain.stderr.startswith("error: ") and plain.stderr.count("\n") == 1 and "Traceback" not in plain.stderr
    debug = subprocess.run(args, capture_output=True, text=True, env={**env, "LAMINA_DEBUG": "1"}, timeout=120)
    assert "Traceback" in debug.stderr and "StoreConnectionError" in debug.stderr
