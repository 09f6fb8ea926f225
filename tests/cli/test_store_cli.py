"""`lamina store migrate|version` and the session commands on a PostgreSQL store chosen by URL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.session import AssistantMessage, UserMessage
from lamina.session.postgres import SCHEMA_VERSION, PostgresSessionStore
from tests.session.factories import exchange
from tests.support.postgres import fresh_schema, schema_url
from tests.wire.fixtures import API_KEY
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

runner = CliRunner()


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("LAMINA_FILES", str(tmp_path / "files"))
    with fresh_schema("cli") as schema:
        yield schema_url(schema)


def test_migrate_creates_then_reports_the_schema(url: str) -> None:
    result = runner.invoke(app, ["--store", url, "store", "version"])
    assert result.exit_code == 0 and f"schema version 0 (this Lamina: {SCHEMA_VERSION})" in result.stdout
    result = runner.invoke(app, ["--store", url, "store", "migrate"])
    assert result.exit_code == 0, result.output
    assert f"schema migrated from version 0 to {SCHEMA_VERSION}" in result.stdout
    assert "password" not in result.stdout
    result = runner.invoke(app, ["--store", url, "store", "migrate", "--json"])
    assert json.loads(result.stdout)["before"] == SCHEMA_VERSION


def test_migrate_on_a_folder_has_nothing_to_do(tmp_path: Path) -> None:
    result = runner.invoke(app, ["--store", str(tmp_path), "store", "migrate"])
    assert result.exit_code == 0 and "nothing to migrate" in result.stdout


def test_sessions_commands_work_on_the_store_the_url_names(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with PostgresSessionStore(url) as store, store.create(cwd="/proj") as session:
        for e in exchange(1):
            session.append(e)
        session_id = session.id
    monkeypatch.setenv("LAMINA_STORE", url)  # the environment names it as well as --store
    result = runner.invoke(app, ["sessions", "list", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["sessions"]
    assert [(r["id"], r["entry_count"], r["cwd"]) for r in rows] == [(session_id, 5, "/proj")]
    result = runner.invoke(app, ["sessions", "show", session_id])
    assert result.exit_code == 0 and "Fixed test 1." in result.stdout
    result = runner.invoke(app, ["sessions", "check", "--all"])
    assert result.exit_code == 2 and "is not one" in result.output
    result = runner.invoke(app, ["sessions", "delete", session_id, "--yes"])
    assert result.exit_code == 0, result.output
    assert json.loads(runner.invoke(app, ["sessions", "list", "--json"]).stdout)["sessions"] == []


def test_an_unreachable_database_is_one_clear_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["--store", "postgresql://u:pw@127.0.0.1:1/x", "sessions", "list"])
    assert result.exit_code == 3  # the store's exit code
    assert "postgresql://u@127.0.0.1:1/x: cannot connect" in result.output and "pw" not in result.output
    assert "Traceback" not in result.output


def test_run_serves_a_turn_from_the_database_and_continues_it(
    url: str, tmp_path: Path, wire: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", wire.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    model = "anthropic:claude-sonnet-5"
    wire.script(Reply(text="Looking.", tool_calls=[ToolUse("Glob", {"pattern": "*"})]), Reply(text="Nothing here."))
    result = runner.invoke(app, ["--store", url, "run", "What is here?", "--model", model, "--json"])
    assert result.exit_code == 0, result.output
    session_id = json.loads(result.stdout)["session_id"]
    wire.script(Reply(text="Still nothing."))
    result = runner.invoke(app, ["--store", url, "run", "And now?", "--continue", "--model", model, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["session_id"] == session_id
    with PostgresSessionStore(url) as store, store.open(session_id, writable=False) as session:
        texts = [e.text for e in session.entries() if isinstance(e, UserMessage | AssistantMessage)]
    assert texts == ["What is here?", "Looking.", "Nothing here.", "And now?", "Still nothing."]


# every command that opens a store, with the arguments it needs to get that far
STORE_COMMANDS: dict[str, list[str]] = {
    "sessions list": ["sessions", "list"],
    "sessions show": ["sessions", "show", "20260101-000000-abcdef"],
    "sessions branch": ["sessions", "branch", "20260101-000000-abcdef", "0123456789abcdef"],
    "sessions export": ["sessions", "export", "20260101-000000-abcdef", "-o", "out.zip"],
    "sessions import": ["sessions", "import", "in.zip"],
    "sessions compact": ["sessions", "compact", "20260101-000000-abcdef"],
    "sessions budget": ["sessions", "budget", "20260101-000000-abcdef"],
    "sessions delete": ["sessions", "delete", "20260101-000000-abcdef", "--yes"],
    "sessions check": ["sessions", "check", "--all"],
    "sessions repair": ["sessions", "repair", "20260101-000000-abcdef"],
    "context --session": ["context", "--session", "20260101-000000-abcdef"],
    "chat": ["chat", "--model", "scripted:script.json"],
    "run": ["run", "--model", "scripted:script.json", "hello"],
    "serve": ["serve", "--port", "1"],
    "store migrate": ["store", "migrate"],
    "store version": ["store", "version"],
}


@pytest.mark.parametrize("value", ["postgresql://", "~nosuchuser-lamina/x", "postgresql://db.example:x/lamina"])
@pytest.mark.parametrize("command", STORE_COMMANDS)
def test_a_malformed_lamina_store_is_one_error_line_naming_it_and_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, value: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "script.json").write_text(json.dumps({"responses": [{"text": "unused"}]}))
    (tmp_path / "in.zip").write_bytes(b"PK\x05\x06" + bytes(18))
    monkeypatch.setenv("LAMINA_STORE", value)
    result = runner.invoke(app, STORE_COMMANDS[command], input="/quit\n")
    assert result.exit_code == 2, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit)  # typer's exit, not an exception escaping the command
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: LAMINA_STORE='{value}': ") and result.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.zip", "script.json"]  # no store folder made here


def test_a_malformed_store_option_is_named_as_the_option(tmp_path: Path) -> None:
    result = runner.invoke(app, ["--store", "postgresql://", "sessions", "list"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --store='postgresql://': the URL names no host; a PostgreSQL store is ")
    result = runner.invoke(app, ["--store", "postgresql://", "store", "migrate"])
    assert result.exit_code == 2 and result.stderr.startswith("error: --store='postgresql://': the URL names no host")
