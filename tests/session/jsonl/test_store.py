"""The local session store: appends, reads, bad input, the tree, resume from the boundary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lamina.errors import SessionCorruptError, SessionLockedError, SessionNotFoundError, UsageError
from lamina.session import (
    AssistantMessage,
    CompactionBoundary,
    Custom,
    Label,
    LocalSessionStore,
    OutboxRecord,
    PlanState,
    StateChange,
    ToolCall,
    ToolResult,
    UnknownEntry,
    UserMessage,
    check_store,
)
from lamina.session._jsonl._jsonl_open import LOG_NAME
from lamina.session._jsonl._jsonl_store import default_store_root
from lamina.session._jsonl._session_meta import META_NAME, read_meta
from lamina.session._protocol import STORE_ENV_VAR
from tests.session.factories import FakeClock, counter_ids, exchange


@pytest.fixture
def store(tmp_path: Path) -> LocalSessionStore:
    return LocalSessionStore(tmp_path / "store", clock=FakeClock(), new_entry_id=counter_ids())


def test_create_lays_out_the_session_folder(store: LocalSessionStore) -> None:
    with store.create(cwd="/work/project", title="first") as session:
        folder = session.folder
    assert sorted(p.name for p in folder.iterdir()) == [".lock", "attachments", "data", LOG_NAME, META_NAME, "plans"]
    assert read_meta(folder).cwd == "/work/project"


def test_store_root_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STORE_ENV_VAR, str(tmp_path / "from-env"))
    assert default_store_root() == tmp_path / "from-env"
    assert default_store_root(tmp_path / "explicit") == tmp_path / "explicit"
    monkeypatch.delenv(STORE_ENV_VAR)
    assert default_store_root().name == "sessions"


def test_every_entry_type_round_trips(store: LocalSessionStore) -> None:
    written = [
        *exchange(1),
        CompactionBoundary(summary="s", first_kept_id=None, tokens_before=10, tokens_after=2, trigger="manual"),
        StateChange(key="mode", value="execute", previous="explore"),
        OutboxRecord(part_id="p1", status="queued", kind="mode_transition", text="now in execute mode"),
        PlanState(plan_id="plan1", state="submitted", plan_path="plans/p.md"),
        Label(target_id="e000001", label="start"),
        Custom(name="app.note", data={"k": [1, 2]}),
    ]
    with store.create() as session:
        stamped = [session.append(e) for e in written]
    with store.open(session.id) as reopened:
        assert reopened.entries() == stamped
    assert [e.parent_id for e in stamped[1:]] == [e.id for e in stamped[:-1]]


def test_list_reads_metadata_only_and_reports_broken_sessions(store: LocalSessionStore) -> None:
    with store.create(cwd="/a") as s1:
        s1.append(UserMessage(text="Refactor the parser module"))
    with store.create(cwd="/b") as s2:
        pass
    (s2.folder / META_NAME).write_text("{not json")
    rows = {r.id: r for r in store.list()}
    assert rows[s1.id].title == "Refactor the parser module"
    assert rows[s1.id].entry_count == 1
    problem = rows[s2.id].problem
    assert problem is not None and "invalid metadata" in problem


def test_title_is_bounded(store: LocalSessionStore) -> None:
    with store.create() as session:
        session.append(UserMessage(text="word " * 10_000))
    assert len(read_meta(session.folder).title) <= 120
    assert len((session.folder / META_NAME).read_bytes()) < 2_000


def test_second_writer_gets_an_error_naming_the_holder(store: LocalSessionStore) -> None:
    with store.create() as session:
        with pytest.raises(SessionLockedError, match=r"already open for writing by pid \d+"):
            store.open(session.id)
        with store.open(session.id, writable=False) as reader:  # readers never block
            assert reader.entries() == []


@pytest.mark.slow
def test_second_writer_in_another_process(store: LocalSessionStore) -> None:
    with store.create() as session:
        code = (
            "import sys; from lamina.session._jsonl._jsonl_store import LocalSessionStore\n"
            "from lamina.errors import SessionLockedError\n"
            f"try:\n LocalSessionStore({str(store.root)!r}).open({session.id!r})\n"
            "except SessionLockedError as e:\n print(e); sys.exit(3)\n"
        )
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 3, result.stderr
    assert "already open for writing by pid" in result.stdout


def test_read_only_session_refuses_appends(store: LocalSessionStore) -> None:
    with store.create() as session:
        pass
    with store.open(session.id, writable=False) as reader, pytest.raises(UsageError, match="read-only"):
        reader.append(UserMessage(text="x"))


def test_unknown_session_and_bad_ids(store: LocalSessionStore) -> None:
    with pytest.raises(SessionNotFoundError, match="no session 'nope'"):
        store.open("nope")
    for bad in ("../etc", "a/b", "", ".hidden", "x..y"):
        with pytest.raises(UsageError, match="invalid session id"):
            store.open(bad)


def test_torn_last_line_is_reported_then_repaired_on_next_append(store: LocalSessionStore) -> None:
    with store.create() as session:
        kept = [session.append(e) for e in exchange(1)]
    log = session.folder / LOG_NAME
    valid_bytes = log.read_bytes()
    with open(log, "ab") as f:
        f.write(b'{"type":"user","id":"torn","parent_id":null,"ts":1.0,"te')
    with store.open(session.id) as reopened:
        torn = reopened.report.torn_tail
        assert torn is not None and torn.offset == len(valid_bytes)
        assert reopened.entries() == kept
        assert log.read_bytes().startswith(valid_bytes)  # nothing touched before the next append
        added = reopened.append(UserMessage(text="after the crash"))
        repaired = reopened.report.torn_tail
    assert repaired is not None and repaired.saved_to is not None
    assert repaired.saved_to.read_bytes().startswith(b'{"type":"user","id":"torn"')
    assert log.read_bytes().startswith(valid_bytes)
    with store.open(session.id) as again:
        assert again.report.torn_tail is None
        assert again.entries() == [*kept, added]


def test_complete_last_entry_missing_its_newline_is_kept(store: LocalSessionStore) -> None:
    with store.create() as session:
        kept = [session.append(e) for e in exchange(1)]
    log = session.folder / LOG_NAME
    log.write_bytes(log.read_bytes().rstrip(b"\n"))
    with store.open(session.id) as reopened:
        assert reopened.entries() == kept
        reopened.append(UserMessage(text="next"))
    with store.open(session.id) as again:
        assert len(again.entries()) == len(kept) + 1
        assert again.report.clean


def test_corrupt_middle_line_is_reported_with_its_line_number_and_skipped(store: LocalSessionStore) -> None:
    with store.create() as session:
        entries = [session.append(e) for e in exchange(1)]
    log = session.folder / LOG_NAME
    lines = log.read_bytes().splitlines(keepends=True)
    lines[2] = b'{"type":"tool_call","id":"broken"\x00garbage}\n'
    log.write_bytes(b"".join(lines))
    with store.open(session.id, writable=False) as reopened:
        loaded = reopened.entries()
        report = reopened.report
    assert [e.id for e in loaded] == [e.id for i, e in enumerate(entries) if i != 2]
    assert len(report.corrupt_lines) == 1 and report.corrupt_lines[0].line == 3
    assert "line 3" in report.messages()[0]


def test_entry_of_a_newer_type_is_kept_and_skipped(store: LocalSessionStore) -> None:
    with store.create() as session:
        first = session.append(UserMessage(text="hello"))
    log = session.folder / LOG_NAME
    future = {"type": "hologram", "id": "f1", "parent_id": first.id, "ts": 5.0, "v": 9, "beams": 3}
    with open(log, "ab") as f:
        f.write(json.dumps(future).encode() + b"\n")
    with store.open(session.id) as reopened:
        assert reopened.report.unknown_entries == 1
        unknown = reopened.get("f1")
        assert isinstance(unknown, UnknownEntry) and unknown.type == "hologram"
        assert [e.id for e in reopened.view().entries] == [first.id]
        reopened.append(AssistantMessage(text="still works"))
    forked = store.fork(session.id, "f1")
    with forked:
        assert json.loads(forked.get("f1").raw) == future  # type: ignore[union-attr]


def test_missing_or_corrupt_metadata_is_rebuilt_from_the_log(store: LocalSessionStore) -> None:
    with store.create(cwd="/w") as session:
        entries = [session.append(e) for e in exchange(1)]
    (session.folder / META_NAME).unlink()
    with store.open(session.id) as reopened:
        assert "missing" in (reopened.report.meta_problem or "")
        assert reopened.entries() == entries
    meta = read_meta(session.folder)
    assert meta.entry_count == len(entries) and meta.leaf_id == entries[-1].id
    (session.folder / META_NAME).write_bytes(b"\x00\x01")
    with store.open(session.id) as reopened:
        assert "invalid metadata" in (reopened.report.meta_problem or "")
        assert reopened.leaf_id == entries[-1].id


def test_session_folder_without_a_log_is_a_clear_error(store: LocalSessionStore) -> None:
    with store.create() as session:
        pass
    (session.folder / LOG_NAME).unlink()
    with pytest.raises(SessionCorruptError, match=r"log.jsonl: session log is missing"):
        store.open(session.id)
    assert store.list()[0].problem == "session log is missing"


def test_branching_inside_a_session(store: LocalSessionStore) -> None:
    with store.create() as session:
        first = [session.append(e) for e in exchange(1)]
        second = [session.append(e) for e in exchange(2)]
        session.branch(first[-1].id)
        alternative = session.append(UserMessage(text="Actually, do something else"))
        assert alternative.parent_id == first[-1].id
        assert session.path() == [*first, alternative]
        assert session.path(second[-1].id) == [*first, *second]
    with store.open(session.id) as reopened:  # the leaf survives a reopen
        assert reopened.leaf_id == alternative.id
        reopened.branch(second[-1].id)
    with store.open(session.id) as reopened:  # a branch with no append after it survives too
        assert reopened.leaf_id == second[-1].id
        with pytest.raises(UsageError, match="no entry 'nope'"):
            reopened.branch("nope")


def test_fork_copies_the_path_and_records_its_origin(store: LocalSessionStore) -> None:
    with store.create(cwd="/w") as session:
        first = [session.append(e) for e in exchange(1)]
        for e in exchange(2):
            session.append(e)
    with store.fork(session.id, first[-1].id) as forked:
        assert forked.id != session.id
        assert forked.entries() == first
        assert forked.meta.forked_from is not None and forked.meta.forked_from.entry_id == first[-1].id
        forked.append(UserMessage(text="in the fork"))
    with store.open(session.id, writable=False) as original:
        assert len(original.entries()) == 10


def _session_with_boundary(store: LocalSessionStore, turns: int, keep: int) -> tuple[str, list[str]]:
    with store.create() as session:
        for n in range(turns):
            for e in exchange(n):
                session.append(e)
        path = session.path()
        kept = path[-keep]
        boundary = session.append(
            CompactionBoundary(
                summary="Earlier: fixed many tests.",
                first_kept_id=kept.id,
                tokens_before=50_000,
                tokens_after=3_000,
                trigger="threshold",
            )
        )
        after = [session.append(e) for e in exchange(turns)]
        session.flush()
    return session.id, [e.id for e in path[-keep:]] + [boundary.id] + [e.id for e in after]


def test_resume_reads_only_from_the_boundary(store: LocalSessionStore) -> None:
    session_id, tail_ids = _session_with_boundary(store, turns=200, keep=7)
    with store.open(session_id) as reopened:
        assert reopened.loaded_count() == len(tail_ids)
        view = reopened.view()
        assert view.boundary is not None and view.boundary.summary.startswith("Earlier")
        assert [e.id for e in view.entries] == [i for i in tail_ids if i != view.boundary.id]
        assert len(reopened.entries()) == 200 * 5 + 1 + 5  # full history is still there


def test_resume_falls_back_to_a_full_read_for_an_old_branch(store: LocalSessionStore) -> None:
    session_id, _ = _session_with_boundary(store, turns=50, keep=3)
    with store.open(session_id) as session:
        old = session.entries()[4]
        session.branch(old.id)
        session.append(UserMessage(text="from the old point"))
    with store.open(session_id) as reopened:
        view = reopened.view()
        assert view.boundary is None
        assert [e.id for e in view.entries][:5] == [e.id for e in reopened.entries()[:5]]


def test_view_never_includes_entries_of_other_branches(store: LocalSessionStore) -> None:
    with store.create() as session:
        root = session.append(UserMessage(text="start"))
        session.append(AssistantMessage(text="answer A"))
        session.branch(root.id)
        b = session.append(AssistantMessage(text="answer B"))
        assert [e.id for e in session.view().entries] == [root.id, b.id]


def test_tool_call_and_result_entries(store: LocalSessionStore) -> None:
    with store.create() as session:
        call = session.append(ToolCall(call_id="c1", name="Bash", input={"command": "ls"}))
        result = session.append(ToolResult(call_id="c1", name="Bash", content="a\nb\n"))
    assert result.parent_id == call.id


def test_a_lone_surrogate_cannot_make_an_append_fail(tmp_path: Path) -> None:
    # a file name that is not UTF-8 reaches a tool result as a lone surrogate (surrogateescape)
    store = LocalSessionStore(tmp_path)
    with store.create(cwd="/p") as session:
        session.append(UserMessage(text="list \udcff"))
        stored = session.append(ToolResult(call_id="c1", name="Glob", content="a\udcff.txt\n", is_error=False))
        session.flush()
        assert stored.content == "a[U+DCFF].txt\n"  # what is logged is what the caller goes on with
        session_id = session.id
    with store.open(session_id) as reopened:
        assert reopened.entries()[-1] == stored
        assert reopened.meta.title == "list [U+DCFF]"


def test_a_fork_carries_the_files_its_entries_point_at(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    with store.create(cwd="/p") as source:
        source.append(UserMessage(text="look at this"))
        (source.folder / "attachments" / "ab12").write_bytes(b"\x89PNG image bytes")
        (source.folder / "data" / "tool-results").mkdir(parents=True)
        (source.folder / "data" / "tool-results" / "call_1.txt").write_text("the whole output")
        (source.folder / "plans" / "plan.md").write_text("1. do it")
        last = source.append(AssistantMessage(text="seen"))
        source.flush()
        source_id, source_folder = source.id, source.folder
    with store.fork(source_id, last.id) as fork:
        assert (fork.folder / "attachments" / "ab12").read_bytes() == b"\x89PNG image bytes"
        assert (fork.folder / "data" / "tool-results" / "call_1.txt").read_text() == "the whole output"
        (fork.folder / "plans" / "plan.md").write_text("1. do it differently")  # a copy, not a link
    assert (source_folder / "plans" / "plan.md").read_text() == "1. do it"


def test_a_fork_checks_clean_and_leaves_no_lock(store: LocalSessionStore) -> None:
    """The session log's first block (README): the fork is complete on disk as soon as `fork` returns."""
    with store.create(cwd="/path/to/project") as session:
        first = session.append(UserMessage(text="Fix the failing test"))
        session.append(AssistantMessage(text="Done."))
        session.flush()
    with store.open(session.id) as session:
        session.branch(first.id)
        session.append(UserMessage(text="Try another way"))
    with store.fork(session.id, first.id) as forked:
        assert read_meta(forked.folder).entry_count == 1  # the metadata is written with the entries
        (health,) = (h for h in check_store(store) if h.id == forked.id)
        assert [f.kind for f in health.findings if f.severity != "note"] == []
    assert all(h.ok for h in check_store(store)), check_store(store)
    assert (forked.folder / ".lock").read_bytes() == b""  # a closed fork names no writer
    (row,) = (r for r in store.list() if r.id == forked.id)
    assert row.entry_count == 1 and row.problem is None
    with store.open(forked.id) as reopened:
        assert reopened.entries() == [first] and reopened.report.meta_problem is None
