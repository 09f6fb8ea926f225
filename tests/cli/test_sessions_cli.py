"""`lamina sessions list|show` through the real Typer app."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.session import (
    BranchSummary,
    Label,
    LocalSessionStore,
    OutboxRecord,
    ToolCall,
    ToolResult,
    UserMessage,
    describe_entry,
)
from tests.session.factories import exchange

LOG_NAME = "log.jsonl"  # the JSONL store's documented layout: a session folder holds log.jsonl and meta.json
META_NAME = "meta.json"

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
    missing = f"no sessions: the store folder {tmp_path / 'none'} does not exist (check --store or LAMINA_STORE)"
    assert result.exit_code == 0 and result.stdout.strip() == missing
    (tmp_path / "empty").mkdir()
    result = runner.invoke(app, ["--store", str(tmp_path / "empty"), "sessions", "list"])
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


def test_show_words_each_entry_as_describe_entry_does(tmp_path: Path) -> None:
    store, session_id = _make(tmp_path)
    with store.open(session_id) as session:
        session.append(BranchSummary(summary="the abandoned way", from_id="e1"))
        session.append(Label(target_id="e1", label="[bold]mine[/bold]"))
        session.append(OutboxRecord(part_id="p1", status="queued", kind="recovery", text="RECOVERED", hidden=True))
        session.append(ToolCall(call_id="c9", name="Write", input={"content": "x" * 500}))
    result = runner.invoke(
        app, ["--store", str(tmp_path), "sessions", "show", session_id, "--all"], terminal_width=2000
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    words = [describe_entry(e) for e in exchange(1)]
    assert any(line.endswith(f"{words[1].title}: {words[1].detail}  (in 1200, out 40, cache read 0)") for line in lines)
    assert any(line.endswith('tool call Read: {"path":"tests/test_app.py"}') for line in lines)
    assert any(line.endswith("branch summary (from e1): the abandoned way") for line in lines)
    assert any(line.endswith("label on e1: [bold]mine[/bold]") for line in lines)  # escaped, printed as it reads
    assert any(line.endswith("one-shot recovery queued (hidden bridge): RECOVERED") for line in lines)
    call = next(line for line in lines if "tool call Write" in line)  # a record's text is cut, a message's is not
    assert call.endswith('tool call Write: {"content":"' + "x" * (200 - len('{"content":"')))


def test_show_unknown_session_is_a_clean_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["--store", str(tmp_path), "sessions", "show", "missing-1"])
    assert result.exit_code == 3
    assert "error: no session 'missing-1'" in result.stderr
    bad = runner.invoke(app, ["--store", str(tmp_path), "sessions", "show", "../x"])
    assert bad.exit_code == 2 and "invalid session id" in bad.stderr


@pytest.mark.slow
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
    assert busy.exit_code == 3 and "already open for writing by pid" in busy.stderr


# -- check and repair -------------------------------------------------------------------------


def _damaged(tmp_path: Path) -> tuple[LocalSessionStore, str, list[str]]:
    """A session with a BOM, a corrupt middle line, a duplicate id and a torn tail."""
    store, session_id = _make(tmp_path)
    log = store.folder_of(session_id) / LOG_NAME
    lines = log.read_bytes().splitlines(keepends=True)
    ids = [json.loads(line)["id"] for line in lines]
    duplicate = lines[0]
    lines[2] = b"{garbage\n"
    log.write_bytes(b"\xef\xbb\xbf" + b"".join(lines) + duplicate + b'{"type":"user","id":"tor')
    return store, session_id, ids


def test_check_reports_every_kind_of_damage_like_fsck(tmp_path: Path) -> None:
    _, session_id, _ = _damaged(tmp_path)
    result = runner.invoke(app, ["--store", str(tmp_path), "sessions", "check", session_id, "--json"])
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["ok"] is False
    findings = data["sessions"][0]["findings"]
    kinds = {f["kind"] for f in findings}
    assert {"bom", "corrupt_line", "duplicate_id", "lost_parent", "torn_tail"} <= kinds
    corrupt = next(f for f in findings if f["kind"] == "corrupt_line")
    assert (corrupt["file"], corrupt["line"]) == (LOG_NAME, 3) and corrupt["offset"] > 0
    human = runner.invoke(app, ["--store", str(tmp_path), "sessions", "check", session_id])
    assert human.exit_code == 1
    assert f"{session_id}: damage corrupt_line {LOG_NAME}:3 (byte {corrupt['offset']}): skipped line" in human.stdout


def test_check_all_reports_stale_metadata_locks_and_leftovers(tmp_path: Path) -> None:
    store, healthy = _make(tmp_path)
    with store.create() as stale:
        stale.append(UserMessage(text="x"))
    meta_path = stale.folder / META_NAME
    meta = json.loads(meta_path.read_bytes())
    meta["entry_count"] = 7
    meta_path.write_text(json.dumps(meta))
    (stale.folder / ".lock").write_text("pid 99999 on gone since then")
    (tmp_path / ".creating-20260101-000000-abcdef").mkdir()
    result = runner.invoke(app, ["--store", str(tmp_path), "sessions", "check", "--all"])
    assert result.exit_code == 0, result.output  # nothing damaged: stale things are not damage
    assert f"{healthy}: ok (5 entries)" in result.stdout
    assert f"{stale.id}: stale stale_metadata {META_NAME}: metadata says entry_count 7 (log: 1)" in result.stdout
    assert f"{stale.id}: stale stale_lock .lock: stale lock file naming pid 99999 on gone" in result.stdout
    assert ".creating-20260101-000000-abcdef: stale interrupted_create" in result.stdout
    both = runner.invoke(app, ["--store", str(tmp_path), "sessions", "check"])
    assert both.exit_code == 1 and "give one session id, or --all" in both.stderr


def test_repair_writes_a_clean_log_and_keeps_the_original(tmp_path: Path) -> None:
    store, session_id, ids = _damaged(tmp_path)
    folder = store.folder_of(session_id)
    original = (folder / LOG_NAME).read_bytes()
    result = runner.invoke(app, ["--store", str(tmp_path), "sessions", "repair", session_id, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["original_kept_in"] == f"{LOG_NAME}.damaged-1"
    assert (folder / data["original_kept_in"]).read_bytes() == original
    changes = "\n".join(data["changes"])
    for expected in ("byte order mark", "corrupt line at line 3", f"second entry with id {ids[0]}", "torn last line"):
        assert expected in changes
    assert f"entry {ids[3]} names a parent whose line is damaged" in changes
    with store.open(session_id, writable=False) as repaired:
        assert repaired.report.clean
        assert [e.id for e in repaired.entries()] == [ids[0], ids[1], ids[3], ids[4]]
        assert [e.id for e in repaired.path()] == [ids[0], ids[1], ids[3], ids[4]]
    check = runner.invoke(app, ["--store", str(tmp_path), "sessions", "check", session_id])
    assert check.exit_code == 0, check.output
    again = runner.invoke(app, ["--store", str(tmp_path), "sessions", "repair", session_id])
    assert again.exit_code == 0 and again.stdout.strip() == f"{session_id}: nothing to repair"


def test_repair_of_a_locked_session_is_a_clean_error(tmp_path: Path) -> None:
    store, session_id = _make(tmp_path)
    with store.open(session_id):
        result = runner.invoke(app, ["--store", str(tmp_path), "sessions", "repair", session_id])
    assert result.exit_code == 3 and "already open for writing by pid" in result.stderr


def test_check_reports_a_cut_log_and_repair_accepts_it(tmp_path: Path) -> None:
    store, session_id = _make(tmp_path)
    log = store.folder_of(session_id) / LOG_NAME
    log.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:2]))  # cut from outside
    check = runner.invoke(app, ["--store", str(tmp_path), "sessions", "check", session_id, "--json"])
    assert check.exit_code == 1, check.output
    (cut,) = [f for f in json.loads(check.stdout)["sessions"][0]["findings"] if f["kind"] == "cut_log"]
    assert cut["severity"] == "damage"
    assert "but its metadata records" in cut["message"] and "5 entries" in cut["message"]
    refused = runner.invoke(app, ["--store", str(tmp_path), "sessions", "compact", session_id])
    assert refused.exit_code != 0 and "it was cut or emptied" in refused.stderr
    repair = runner.invoke(app, ["--store", str(tmp_path), "sessions", "repair", session_id, "--json"])
    assert repair.exit_code == 0, repair.output
    assert "accepted the log as it is" in "\n".join(json.loads(repair.stdout)["changes"])
    again = runner.invoke(app, ["--store", str(tmp_path), "sessions", "check", session_id])
    assert again.exit_code == 0, again.output
    with store.open(session_id) as session:
        assert len(session.entries()) == 2


def test_check_reports_symlinked_files_and_interrupted_deletes(tmp_path: Path) -> None:
    store, session_id = _make(tmp_path)
    outside = tmp_path.parent / f"{tmp_path.name}-outside.jsonl"
    log = store.folder_of(session_id) / LOG_NAME
    outside.write_bytes(log.read_bytes())
    log.unlink()
    log.symlink_to(outside)
    (tmp_path / ".deleting-20260101-000000-abcdef.123456").mkdir()
    result = runner.invoke(app, ["--store", str(tmp_path), "sessions", "check", "--all"])
    assert result.exit_code == 1, result.output
    assert f"{session_id}: damage symlink {LOG_NAME}: a symbolic link in place of a session file" in result.stdout
    assert ".deleting-20260101-000000-abcdef.123456: stale interrupted_delete" in result.stdout
    listed = runner.invoke(app, ["--store", str(tmp_path), "sessions", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    assert not (tmp_path / ".deleting-20260101-000000-abcdef.123456").exists()  # the listing removed it


def test_compact_force_summarises_a_session_that_fits(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    with store.create(cwd="/proj") as session:
        session.append(UserMessage(text="Keep the parser pure."))
        for e in exchange(1):
            session.append(e)
    args = ["--store", str(tmp_path), "sessions", "compact", session.id, "--json"]
    plain = runner.invoke(app, args)
    assert plain.exit_code == 0, plain.output
    assert json.loads(plain.stdout)["status"] != "compacted"  # it fits the kept budget: nothing to compact
    with store.open(session.id, writable=False) as reopened:
        assert reopened.view().boundary is None
    forced = runner.invoke(app, [*args, "--force"])
    assert forced.exit_code == 0, forced.output
    assert json.loads(forced.stdout)["status"] == "compacted"
    with store.open(session.id, writable=False) as reopened:
        boundary = reopened.view().boundary
        assert boundary is not None and boundary.trigger == "manual"
        assert boundary.lane.messages[0].text == "Keep the parser pure."
