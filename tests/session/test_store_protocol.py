"""The store protocol's suite: every test runs against the JSONL, the PostgreSQL and the in-memory store.

A store is used only through `SessionStore` / `SessionLog`, as the engine, the agent and the CLI use it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lamina.engine import ContextEngine
from lamina.errors import SessionExistsError, SessionLockedError, SessionNotFoundError, UsageError
from lamina.session import (
    AssistantMessage,
    CompactionBoundary,
    Custom,
    FileInfo,
    InMemorySessionStore,
    Label,
    LocalSessionStore,
    OutboxRecord,
    PlanState,
    SessionLog,
    SessionStore,
    StateChange,
    UserMessage,
)
from lamina.session._meta import ForkOrigin
from tests.session.factories import FakeClock, counter_ids, exchange
from tests.support.postgres import fresh_schema, schema_url


@pytest.fixture(params=["jsonl", "postgres", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    if request.param == "jsonl":
        yield LocalSessionStore(tmp_path / "store", clock=FakeClock(), new_entry_id=counter_ids())
        return
    if request.param == "memory":
        with InMemorySessionStore(clock=FakeClock(), new_entry_id=counter_ids()) as memory:
            yield memory
        return
    from lamina.session.postgres import PostgresSessionStore

    with fresh_schema("proto") as schema:
        pg = PostgresSessionStore(
            schema_url(schema), files_root=tmp_path / "files", clock=FakeClock(), new_entry_id=counter_ids()
        )
        try:
            yield pg
        finally:
            pg.close()


def _boundary(first_kept: str | None) -> CompactionBoundary:
    return CompactionBoundary(
        summary="what happened so far", first_kept_id=first_kept, tokens_before=900, tokens_after=90, trigger="manual"
    )


def test_what_is_appended_and_flushed_is_what_a_reopen_reads(store: SessionStore) -> None:
    written = [
        *exchange(1),
        StateChange(key="mode", value="execute", previous="explore"),
        OutboxRecord(part_id="p1", status="queued", kind="mode_transition", text="now in execute mode"),
        PlanState(plan_id="plan1", state="submitted", plan_path="plans/p.md"),
        Label(target_id="e000001", label="start"),
        Custom(name="app.note", data={"k": [1, 2], "s": "é\u0000"}),
    ]
    with store.create(cwd="/work/p") as session:
        stamped = [session.append(e) for e in written]
        session.flush()
        sid, leaf = session.id, session.leaf_id
    with store.open(sid, writable=False) as again:
        assert again.entries() == stamped
        assert again.leaf_id == leaf == stamped[-1].id
        assert [e.parent_id for e in again.entries()] == [None, *(e.id for e in stamped[:-1])]
        assert again.info.cwd == "/work/p" and again.info.entry_count == len(written)
        assert again.info.title.startswith("Please fix the failing test number 1")


def test_a_second_writer_is_refused_until_the_first_closes(store: SessionStore) -> None:
    session = store.create()
    with pytest.raises(SessionLockedError):
        store.open(session.id)
    with store.open(session.id, writable=False) as reader:  # readers never wait for the writer
        assert reader.leaf_id is None
    session.close()
    store.open(session.id).close()


def test_a_read_only_session_takes_no_appends(store: SessionStore) -> None:
    with store.create() as session:
        session.append(UserMessage(text="hello"))
        sid = session.id
    with store.open(sid, writable=False) as reader:
        with pytest.raises(UsageError):
            reader.append(UserMessage(text="no"))
        reader.flush()  # nothing to do, no error


def test_a_read_only_session_takes_no_files(store: SessionStore, tmp_path: Path) -> None:
    with store.create() as session:
        session.put_file("plans/p.md", b"the writer's")
        sid = session.id
    local = tmp_path / "upload.bin"
    local.write_bytes(b"a reader's")
    with store.open(sid, writable=False) as reader:
        for name, source in [("plans/p.md", b"replaced?"), ("data/new.txt", local), ("plans/q.md", iter([b"x"]))]:
            with pytest.raises(UsageError, match="read-only"):
                reader.put_file(name, source)
        assert [f.name for f in reader.list_files()] == ["plans/p.md"]
        assert not reader.local_file("data/new.txt").exists()
        assert not reader.local_file("plans/q.md").exists()
    with store.open(sid, writable=False) as again, again.open_file("plans/p.md") as handle:
        assert handle.read() == b"the writer's"


def test_a_critical_entry_is_committed_before_append_returns(store: SessionStore) -> None:
    with store.create() as session:
        session.append(UserMessage(text="hello"))
        queued = session.append(OutboxRecord(part_id="p1", status="queued", kind="k", text="once"))
        with store.open(session.id, writable=False) as reader:
            assert reader.leaf_id == queued.id
            assert [e.id for e in reader.entries()][-1] == queued.id


def test_list_is_newest_first_and_reads_no_log(store: SessionStore) -> None:
    ids = []
    for n in range(3):
        with store.create(cwd=f"/w{n}") as session:
            session.append(UserMessage(text=f"task {n}"))
            ids.append(session.id)
    rows = store.list()
    assert [r.id for r in rows] == ids[::-1]
    assert [r.title for r in rows] == ["task 2", "task 1", "task 0"]
    assert all(r.entry_count == 1 and r.problem is None for r in rows)


def test_resume_reads_from_the_latest_boundary_only(store: SessionStore) -> None:
    with store.create() as session:
        for n in range(40):
            for e in exchange(n):
                session.append(e)
            session.flush()
        kept = session.append(UserMessage(text="kept verbatim"))
        session.append(AssistantMessage(text="ok"))
        session.append(_boundary(kept.id))
        session.append(UserMessage(text="after the boundary"))
        sid = session.id
        full_view = session.view()
    with store.open(sid) as resumed:
        assert resumed.loaded_count() == 4  # kept, answer, boundary, newest: not the 200 before
        assert resumed.view() == full_view
        assert [e.text for e in resumed.view().entries if isinstance(e, UserMessage)] == [
            "kept verbatim",
            "after the boundary",
        ]
        assert len(resumed.entries()) == 204  # the whole history is still there
        resumed.append(UserMessage(text="and on"))
    with store.open(sid, writable=False) as again:
        assert again.loaded_count() == 5


def test_branching_moves_the_leaf_and_survives_a_reopen(store: SessionStore) -> None:
    with store.create() as session:
        first = [session.append(e) for e in exchange(1)]
        [session.append(e) for e in exchange(2)]
        session.branch(first[-1].id)
        other = session.append(UserMessage(text="another way"))
        sid = session.id
    with store.open(sid) as again:
        assert again.leaf_id == other.id
        assert [e.id for e in again.path()] == [*(e.id for e in first), other.id]
        assert len(again.entries()) == 11
        again.branch(first[1].id)
    with store.open(sid, writable=False) as third:
        assert third.leaf_id == first[1].id


def test_a_branch_with_its_first_entry_its_children_and_the_view_of_any_entry(store: SessionStore) -> None:
    with store.create() as session:
        first = [session.append(e) for e in exchange(1)]
        later = [session.append(e) for e in exchange(2)]
        seed = session.branch(first[-1].id, first=OutboxRecord(part_id="p1", status="queued", kind="branch_seed"))
        assert seed.parent_id == first[-1].id and session.leaf_id == seed.id
        assert [e.id for e in session.children(first[-1].id)] == [later[0].id, seed.id]
        assert [e.id for e in session.view(later[1].id).entries] == [e.id for e in (*first, *later[:2])]
        assert [e.id for e in session.view().entries] == [*(e.id for e in first), seed.id]
        sid = session.id
    with store.open(sid, writable=False) as again:
        assert again.leaf_id == seed.id and again.get(seed.id) == seed


def test_a_fork_copies_the_path_and_the_files(store: SessionStore) -> None:
    with store.create(cwd="/w") as source:
        entries = [source.append(e) for e in exchange(1)]
        source.append(UserMessage(text="not in the fork"))
        (source.attachments_dir / "ab12").write_bytes(b"image bytes")
        (source.plans_dir / "plan.md").write_text("1. do it")
        sid = source.id
    with store.fork(sid, entries[2].id) as fork:
        assert fork.entries() == entries[:3]
        assert fork.info.forked_from == ForkOrigin(sid, entries[2].id)
        assert (fork.attachments_dir / "ab12").read_bytes() == b"image bytes"
        (fork.plans_dir / "plan.md").write_text("changed")  # a copy, not a link
        fork_id = fork.id
    with store.open(sid, writable=False) as again:
        assert (again.plans_dir / "plan.md").read_text() == "1. do it"
    assert {r.id for r in store.list()} == {sid, fork_id}


def test_a_fork_lists_and_opens_like_any_other_session(store: SessionStore) -> None:
    with store.create(cwd="/w", title="the source") as source:
        entries = [source.append(e) for e in exchange(2)]
        sid = source.id
    fork = store.fork(sid, entries[2].id)
    fork_id = fork.id
    # listed with its entries while the fork is still open, as a session written and flushed is
    listed = {r.id: r for r in store.list()}
    assert listed[fork_id].entry_count == 3 and listed[fork_id].forked_from == ForkOrigin(sid, entries[2].id)
    with pytest.raises(SessionLockedError):
        store.open(fork_id, wait=0.0)  # the fork is open for writing: one writer, as for any session
    fork.close()
    with store.open(fork_id) as again:  # the lock is let go at close: a writer opens it
        assert again.entries() == entries[:3]
        assert again.leaf_id == entries[2].id
        assert again.info.entry_count == 3 and again.info.title == "the source"
        again.append(UserMessage(text="on the fork"))
    listed = {r.id: r for r in store.list()}
    assert listed[fork_id].entry_count == 4 and listed[sid].entry_count == len(entries)


def test_delete_removes_a_session_but_never_one_in_use(store: SessionStore) -> None:
    session = store.create()
    session.append(UserMessage(text="bye"))
    with pytest.raises(SessionLockedError):
        store.delete(session.id)
    session.close()
    store.delete(session.id)
    assert store.list() == []
    with pytest.raises(SessionNotFoundError):
        store.open(session.id)


def test_an_unknown_session_is_a_clear_error(store: SessionStore) -> None:
    with pytest.raises(SessionNotFoundError, match="nope"):
        store.open("nope", writable=False)
    with pytest.raises(UsageError):
        store.open("../escape")


def test_a_session_created_with_a_chosen_id_has_it_and_the_id_is_taken_once(store: SessionStore) -> None:
    with store.create(session_id="langgraph-abc", title="thread abc") as session:
        assert session.id == "langgraph-abc" and session.info.title == "thread abc"
        session.append(UserMessage(text="hi"))
    with pytest.raises(SessionExistsError, match="langgraph-abc"):
        store.create(session_id="langgraph-abc")
    with store.open("langgraph-abc", writable=False) as again:
        assert [e.text for e in again.entries() if isinstance(e, UserMessage)] == ["hi"]
    assert [s.id for s in store.list()] == ["langgraph-abc"]  # the refused create left nothing behind
    with pytest.raises(UsageError):
        store.create(session_id="../escape")


def test_concurrent_creates_of_one_id_make_one_session(store: SessionStore) -> None:
    def create() -> str:
        try:
            with store.create(session_id="one-id"):
                return "made"
        except SessionExistsError:
            return "exists"

    with ThreadPoolExecutor(max_workers=4) as pool:
        outcomes = sorted(pool.map(lambda _: create(), range(8)))
    assert outcomes == ["exists"] * 7 + ["made"]
    assert [s.id for s in store.list()] == ["one-id"]


def test_the_engine_runs_on_either_store(store: SessionStore, tmp_path: Path) -> None:
    session: SessionLog = store.create(cwd=str(tmp_path))
    engine = ContextEngine(session, stable_source=lambda: (), mode="ask")
    part = engine.queue_one_shot("note", "delivered exactly once")
    turn = engine.prepare_turn("first")
    assert [o.part_id for o in turn.one_shots] == [part]
    engine.record(AssistantMessage(text="done"))
    engine.commit(turn)
    engine.end_turn()
    assert engine.volatile_inputs().data_dir == session.shown_path("data")  # lamina:/session/data with PostgreSQL
    session.close()
    with store.open(session.id) as resumed:
        engine2 = ContextEngine(resumed, stable_source=lambda: ())
        assert engine2.settings.mode == "ask"
        second = engine2.prepare_turn("second")
        assert second.one_shots == ()  # delivered once, never again
        engine2.end_turn()
    with store.open(session.id, writable=False) as reader:
        delivered = [e for e in reader.entries() if isinstance(e, OutboxRecord) and e.status == "delivered"]
        assert [e.part_id for e in delivered] == [part]


# -- a session's files ----------------------------------------------------------------------------


def test_a_put_file_is_stat_listed_and_read_back_byte_for_byte(store: SessionStore, tmp_path: Path) -> None:
    big = bytes(range(256)) * 9000  # over two chunks of the database store
    local = tmp_path / "upload.bin"
    local.write_bytes(big)
    with store.create() as session:
        small = session.put_file("data/tool-results/c1.txt", b"hello\n")
        assert small == FileInfo("data/tool-results/c1.txt", 6, hashlib.sha256(b"hello\n").hexdigest())
        put = session.put_file("attachments/" + hashlib.sha256(big).hexdigest(), local)
        session.put_file("plans/p.md", iter([b"# plan", b"\n", b"step"]))
        session.put_file("data/empty.txt", b"")
        sid = session.id
    with store.open(sid, writable=False) as again:
        assert again.stat_file(put.name) == FileInfo(put.name, len(big), hashlib.sha256(big).hexdigest())
        with again.open_file(put.name) as handle:
            assert handle.read(10) == big[:10]
            assert handle.read() == big[10:]
        with again.open_file("plans/p.md") as handle:
            assert handle.read() == b"# plan\nstep"
        with again.open_file("data/empty.txt") as handle:
            assert handle.read() == b""
        assert [f.name for f in again.list_files()] == sorted(
            [put.name, "data/empty.txt", "data/tool-results/c1.txt", "plans/p.md"]
        )
        assert [f.name for f in again.list_files("data/")] == ["data/empty.txt", "data/tool-results/c1.txt"]
        assert again.stat_file("data/none.txt") is None
        with pytest.raises(FileNotFoundError):
            again.open_file("data/none.txt")
        assert again.local_file("plans/p.md").read_bytes() == b"# plan\nstep"
        shown = again.shown_path("data/tool-results/c1.txt")
        assert again.file_name(shown) == "data/tool-results/c1.txt"
        assert again.file_name("/elsewhere/data/x") is None


def test_a_put_replaces_a_file_of_the_same_name(store: SessionStore) -> None:
    with store.create() as session:
        session.put_file("plans/p.md", b"first")
        session.put_file("plans/p.md", b"second, longer")
        sid = session.id
    with store.open(sid, writable=False) as again:
        with again.open_file("plans/p.md") as handle:
            assert handle.read() == b"second, longer"
        assert again.local_file("plans/p.md").read_bytes() == b"second, longer"
        assert len(again.list_files("plans/")) == 1


@pytest.mark.parametrize("name", ["", "other/x", "data/../x", "/data/x", "data//x", "data/./x", "data/"])
def test_a_file_name_outside_the_sessions_folders_is_refused(store: SessionStore, name: str) -> None:
    with store.create() as session, pytest.raises(UsageError):
        session.put_file(name, b"x")


def test_a_fork_keeps_the_files_and_a_delete_drops_only_its_own(store: SessionStore) -> None:
    with store.create() as session:
        session.put_file("attachments/abc", b"shared bytes")
        entry = session.append(UserMessage(text="look"))
        session.flush()
        sid = session.id
    with store.fork(sid, entry.id) as forked:
        assert forked.stat_file("attachments/abc") is not None
        fid = forked.id
    store.delete(sid)
    with store.open(fid, writable=False) as again, again.open_file("attachments/abc") as handle:
        assert handle.read() == b"shared bytes"


def test_an_export_carries_what_a_tool_wrote_into_the_sessions_folders(store: SessionStore, tmp_path: Path) -> None:
    """A plan the Write tool wrote straight into `plans_dir` (not yet submitted) goes with the session.

    In the JSONL and in-memory stores the folders are where the model reads and writes by path, so
    they are the session's files; the PostgreSQL store's folder is only this host's cache (its
    tools write through `put_file`, under the virtual paths), so what is only there is not carried.
    """
    import zipfile

    from lamina.session import export_session

    with store.create() as session:
        session.put_file("attachments/abc", b"put")
        session.append(UserMessage(text="plan it"))
        session.flush()
        (session.plans_dir / "draft.md").write_text("# draft\n")
        (session.data_dir / "tool-results").mkdir(parents=True, exist_ok=True)
        (session.data_dir / "tool-results" / "t1.txt").write_text("written by a tool")
        sid = session.id
        listed = [f.name for f in session.list_files()]
        exported = export_session(store, sid, tmp_path / "b.zip")
    with zipfile.ZipFile(exported.path) as zf:
        names = set(zf.namelist())
    tool_written = {"session/plans/draft.md", "session/data/tool-results/t1.txt"}
    assert "session/attachments/abc" in names
    if isinstance(store, LocalSessionStore | InMemorySessionStore):
        assert tool_written <= names
        assert listed == ["attachments/abc", "data/tool-results/t1.txt", "plans/draft.md"]
    else:
        assert not tool_written & names


def test_a_relative_workspace_is_recorded_as_an_absolute_path(
    store: SessionStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the README's quick start names its workspace "shop": a command run from elsewhere must still find it
    monkeypatch.chdir(tmp_path)
    with store.create(cwd="shop") as session:
        sid = session.id
        assert session.info.cwd == str(tmp_path / "shop")
    monkeypatch.chdir("/")
    with store.open(sid, writable=False) as again:
        assert again.info.cwd == str(tmp_path / "shop")
    assert [s.cwd for s in store.list() if s.id == sid] == [str(tmp_path / "shop")]
    with store.create() as no_workspace:
        assert no_workspace.info.cwd == ""
