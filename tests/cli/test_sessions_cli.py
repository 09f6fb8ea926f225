"""`lamina sessions list|show` through the real Typer app."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
from typer.testing import CliRunner

from lamina.cli import app
from lamina.session.entries import ToolResult, UserMessage
from lamina.session.meta import META_NAME
from lamina.session.store import LocalSessionStore
from tests.session.factories import exchange

runner = CliRunner()


def _make(tmp_path: Path) -> tuple[LocalSessionStore, str]:
    store = LocalSessionStore(tmp_path)
    with store.create(cwd="/proj") as session:
        for e in exchange(1):
            session.append(e)
    return store, session.id


def test_list_json_reads_metadata(tmp_path: Path) -> None:
    _, session_id = _make(tmp_path)
    result = runner.invoke(app, ["--store", str(tmp_path), "sessions", "list", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["sessions"]
    assert [(r["id"], r["entry_count"], r["cwd"]) for r in rows] == [(session_id, 5, "/proj")]


def test_list_human_and_empty(tmp_path: Path) -> None:
    result = runner.invoke(app, ["--store", str(tmp_path / "none"), "sessions", "list"])
    assert result.exit_code == 0 and result.stdout.strip() == "no sessions"
    _, session_id = _make(tmp_path)
    result = runner.invoke(app, ["--store", str(tmp_path), "sessions", "list"])
    assert session_id in result.stdout and "Please fix the failing test" in result.stdout


def test_show_prints_the_path_and_problems(tmp_path: Path) -> None:
    store, session_id = _make(tmp_path)
    with store.open(session_id) as session:
        session.branch(session.path()[0].id)
        session.append(UserMessage(text="other branch"))
    result = runner.invoke(app, ["--store", str(tmp_path), "sessions", "show", session_id, "--json"])
    data = json.loads(result.stdout)
    assert [e["type"] for e in data["entries"]] == ["user", "user"]
    full = runner.invoke(app, ["--store", str(tmp_path), "sessions", "show", session_id, "--full", "--json"])
    assert len(json.loads(full.stdout)["entries"]) == 6
    (store.folder_of(session_id) / META_NAME).unlink()
    human = runner.invoke(app, ["--store", str(tmp_path), "sessions", "show", session_id])
    assert human.exit_code == 0
    assert "metadata rebuilt from the log: metadata file is missing" in human.stderr


def test_show_unknown_session_is_a_clean_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["--store", str(tmp_path), "sessions", "show", "missing-1"])
    assert result.exit_code == 1
    assert "error: no session 'missing-1'" in result.stderr
    bad = runner.invoke(app, ["--store", str(tmp_path), "sessions", "show", "../x"])
    assert bad.exit_code == 1 and "invalid session id" in bad.stderr


def test_compact_appends_one_boundary_then_reports_already_compacted(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    with store.create(cwd="/proj") as session:
        session.append(UserMessage(text="Never edit generated files. Start with the parser."))
        for n in range(12):
            for e in exchange(n):
                if isinstance(e, ToolResult):  # what a compaction frees: the user's words stay verbatim
                    e = msgspec.structs.replace(e, content=e.content * 20)
                session.append(e)
    args = ["--store", str(tmp_path), "sessions", "compact", session.id, "--keep-tokens", "200", "--json"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["status"] == "compacted"
    again = runner.invoke(app, args)
    assert json.loads(again.stdout)["status"] == "already_compacted"
    with store.open(session.id, writable=False) as reopened:
        boundary = reopened.view().boundary
        assert boundary is not None and boundary.trigger == "manual"
        assert boundary.lane.messages[0].text == "Never edit generated files. Start with the parser."
    locked = store.open(session.id)
    try:
        busy = runner.invoke(app, ["--store", str(tmp_path), "sessions", "compact", session.id, "--wait", "0.2"])
    finally:
        locked.close()
    assert busy.exit_code == 1 and "already open for writing by pid" in busy.stderr
