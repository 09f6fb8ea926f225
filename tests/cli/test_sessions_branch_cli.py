"""`lamina sessions branch|show --tree|export|import` through the real Typer app."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.session import AssistantMessage, LocalSessionStore, OutboxRecord, UserMessage
from tests.session.factories import exchange

runner = CliRunner()


def _make(tmp_path: Path) -> tuple[LocalSessionStore, str]:
    store = LocalSessionStore(tmp_path / "store")
    with store.create(cwd="/proj") as session:
        for n in range(2):
            for e in exchange(n):
                session.append(e)
    return store, session.id


def _answers(store: LocalSessionStore, session_id: str) -> list[AssistantMessage]:
    with store.open(session_id, writable=False) as session:
        return [e for e in session.entries() if isinstance(e, AssistantMessage)]


def test_branch_then_tree(tmp_path: Path) -> None:
    store, session_id = _make(tmp_path)
    args = ["--store", str(store.root), "sessions"]
    point = _answers(store, session_id)[1]  # "Fixed test 0."
    result = runner.invoke(app, [*args, "branch", session_id, point.id])
    assert result.exit_code == 0, result.output
    assert f"branched {session_id} at {point.id}; new leaf {point.id}" in result.stdout
    assert "(assistant) is in the provider view: the next request sends the branch's history" in result.stdout
    with store.open(session_id) as session:
        assert session.leaf_id == point.id
        session.append(UserMessage(text="a different second request"))
    tree = runner.invoke(app, [*args, "show", session_id, "--tree"])
    assert tree.exit_code == 0, tree.output
    lines = tree.stdout.splitlines()
    fork = next(i for i, line in enumerate(lines) if point.id in line)
    assert lines[fork + 1].startswith("├─") and "number 1" in lines[fork + 1]  # the abandoned path first
    last = next(line for line in lines if "a different second request" in line)
    assert last.startswith("└─*") and last.endswith("(leaf)")
    assert lines[1].startswith("*")  # the root is on the leaf's path


def test_branch_json_with_a_seed_and_unknown_entry(tmp_path: Path) -> None:
    store, session_id = _make(tmp_path)
    args = ["--store", str(store.root), "sessions"]
    point = _answers(store, session_id)[0]
    result = runner.invoke(app, [*args, "branch", session_id, point.id, "--seed", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["strategy"] == "seed" and data["in_view"] is True and data["kind"] == "assistant"
    assert "one-shot branch seed" in data["note"]
    with store.open(session_id, writable=False) as session:
        seed = session.get(session.leaf_id or "")
    assert isinstance(seed, OutboxRecord) and seed.kind == "branch_seed" and seed.hidden
    shown = runner.invoke(app, [*args, "show", session_id])
    assert "branch_seed" not in shown.stdout
    assert "branch_seed" in runner.invoke(app, [*args, "show", session_id, "--all"]).stdout
    missing = runner.invoke(app, [*args, "branch", session_id, "nope"])
    assert missing.exit_code == 2 and "no entry 'nope'" in missing.stderr


@pytest.mark.slow
def test_export_then_import_elsewhere(tmp_path: Path) -> None:
    store, session_id = _make(tmp_path)
    bundle = tmp_path / "s.zip"
    exported = runner.invoke(app, ["--store", str(store.root), "sessions", "export", session_id, "-o", str(bundle)])
    assert exported.exit_code == 0, exported.output
    assert (
        f"exported {session_id} to {bundle}" in exported.stdout and "without a provider transcript" in exported.stdout
    )
    other = tmp_path / "other"
    workspace = tmp_path / "project"
    imported = runner.invoke(
        app, ["--store", str(other), "sessions", "import", str(bundle), "--cwd", str(workspace), "--json"]
    )
    assert imported.exit_code == 0, imported.output
    data = json.loads(imported.stdout)
    assert data["source_session_id"] == session_id and data["cwd"] == str(workspace)
    assert data["transfer_summary_id"]
    listed = json.loads(runner.invoke(app, ["--store", str(other), "sessions", "list", "--json"]).stdout)
    assert [r["id"] for r in listed["sessions"]] == [data["session_id"]]
    kept = runner.invoke(app, ["--store", str(other), "sessions", "import", str(bundle), "--keep-id"])
    assert kept.exit_code == 0 and f"as {session_id}" in kept.stdout
    again = runner.invoke(app, ["--store", str(other), "sessions", "import", str(bundle), "--keep-id"])
    assert again.exit_code == 2 and "already exists" in again.stderr


def test_import_of_a_bad_bundle_is_a_clean_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"not a zip")
    result = runner.invoke(app, ["--store", str(tmp_path / "store"), "sessions", "import", str(bad)])
    assert result.exit_code == 3
    assert f"error: bundle {bad}: not a zip archive" in result.stderr
    assert not (tmp_path / "store").exists()


def test_branch_at_a_user_message_starts_before_it_and_prints_its_text(tmp_path: Path) -> None:
    store, session_id = _make(tmp_path)
    args = ["--store", str(store.root), "sessions"]
    with store.open(session_id, writable=False) as session:
        second = [e for e in session.entries() if isinstance(e, UserMessage)][1]
    result = runner.invoke(app, [*args, "branch", session_id, second.id])
    assert result.exit_code == 0, result.output
    assert f"branched {session_id} at {second.id}; new leaf {second.parent_id}" in result.stdout
    assert "the branch starts before that message, whose text is offered back" in result.stdout
    assert result.stdout.endswith(
        "your message, to send again or edit:\nPlease fix the failing test number 1 in tests/test_app.py\n"
    )
    with store.open(session_id, writable=False) as session:  # across a reopen: no unanswered message on the path
        assert session.leaf_id == second.parent_id
        assert [e.text for e in session.path() if isinstance(e, UserMessage)] == [
            "Please fix the failing test number 0 in tests/test_app.py"
        ]
    data = json.loads(runner.invoke(app, [*args, "branch", session_id, second.id, "--json"]).stdout)
    assert data["offered_text"] == second.text and data["kind"] == "user"
