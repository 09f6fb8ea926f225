"""The PostgreSQL store's own guarantees: leases and fencing, all-or-nothing turns, schema versions, bad servers."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from lamina.errors import (
    SessionLeaseLostError,
    SessionLockedError,
    StoreConnectionError,
    StoreReadOnlyError,
    StoreSchemaError,
    UsageError,
)
from lamina.session import AssistantMessage, LogEntry, OutboxRecord, UserMessage
from lamina.session.postgres import SCHEMA_VERSION, PostgresSessionStore, split_url
from tests.session.factories import exchange
from tests.support.postgres import URL, fresh_schema, schema_url


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema("pgs") as name:
        yield name


@pytest.fixture
def store(schema: str, tmp_path: Path) -> Iterator[PostgresSessionStore]:
    pg = PostgresSessionStore(schema_url(schema), files_root=tmp_path, lease_seconds=30)
    yield pg
    pg.close()


def _committed(schema: str, session_id: str) -> list[str]:
    with psycopg.connect(URL) as conn:
        rows = conn.execute(
            f'SELECT id FROM "{schema}".entries WHERE session_id = %s ORDER BY seq', (session_id,)
        ).fetchall()
    return [r[0] for r in rows]


def _kill_connections(store: PostgresSessionStore) -> None:
    """Terminate every server connection of the store's pool (as a restart or a network cut would)."""
    with psycopg.connect(URL, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = %s AND pid <> pg_backend_pid()",
            (f"lamina-{store.schema}",),
        )


def test_a_turn_is_committed_at_flush_all_together(store: PostgresSessionStore, schema: str) -> None:
    with store.create() as session:
        stamped = [session.append(e) for e in exchange(1)]
        assert _committed(schema, session.id) == []  # ordinary entries wait for the turn boundary
        session.flush()
        assert _committed(schema, session.id) == [e.id for e in stamped]


def test_a_dropped_connection_commits_nothing_and_the_next_flush_retries(
    store: PostgresSessionStore, schema: str
) -> None:
    with store.create() as session:
        session.append(UserMessage(text="before"))
        session.flush()
        turn = [session.append(e) for e in exchange(2)]
        _kill_connections(store)
        with pytest.raises(StoreConnectionError, match="connection"):
            session.flush()
        assert len(_committed(schema, session.id)) == 1  # none of the turn
        session.flush()  # the pool reconnects; the same entries, once
        assert _committed(schema, session.id)[1:] == [e.id for e in turn]


def test_a_critical_append_that_cannot_commit_is_taken_back(store: PostgresSessionStore, schema: str) -> None:
    with store.create() as session:
        user = session.append(UserMessage(text="hello"))
        _kill_connections(store)
        with pytest.raises(StoreConnectionError):
            session.append(OutboxRecord(part_id="p1", status="queued", kind="k", text="t"))
        assert session.leaf_id == user.id
        assert [e.id for e in session.entries()] == [user.id]
        session.flush()
        assert _committed(schema, session.id) == [user.id]


def test_a_commit_whose_answer_was_lost_is_not_written_twice(store: PostgresSessionStore, schema: str) -> None:
    with store.create() as session:
        first = [session.append(e) for e in exchange(1)]
        pending, committed_seq = list(session._pending), session._committed_seq
        session.flush()
        # as if the COMMIT reached the server but its answer did not: the batch is still pending here
        session._pending, session._committed_seq = pending, committed_seq
        more = session.append(UserMessage(text="more"))
        session.flush()
        assert _committed(schema, session.id) == [*(e.id for e in first), more.id]


@pytest.mark.slow
def test_a_writer_whose_lease_was_taken_over_cannot_write(schema: str, tmp_path: Path) -> None:
    stalled = PostgresSessionStore(schema_url(schema), files_root=tmp_path, lease_seconds=2.0)
    other = PostgresSessionStore(schema_url(schema), files_root=tmp_path, lease_seconds=2.0)
    try:
        session = stalled.create()
        session.append(UserMessage(text="mine"))
        session.flush()
        stalled._leases._stop.set()  # the server stalls: its leases are no longer renewed
        with pytest.raises(SessionLockedError, match="lease expires"):
            other.open(session.id)
        with other.open(session.id, wait=10.0) as taken:  # once the stalled lease expires
            assert taken.lease_token == (session.lease_token or 0) + 1
            late = session.append(UserMessage(text="too late"))
            with pytest.raises(SessionLeaseLostError):
                session.flush()
            taken.append(UserMessage(text="the new writer's"))
        assert late.id not in _committed(schema, session.id)
        with pytest.raises(SessionLeaseLostError):
            session.append(UserMessage(text="still refused"))
        session.close()  # gives nothing back: the lease is not its own any more
        with other.open(session.id, writable=False) as reader:
            assert [e.text for e in reader.entries() if isinstance(e, UserMessage)] == ["mine", "the new writer's"]
    finally:
        stalled.close()
        other.close()


@pytest.mark.slow
def test_a_held_lease_is_renewed_while_the_writer_works(schema: str, tmp_path: Path) -> None:
    holder = PostgresSessionStore(schema_url(schema), files_root=tmp_path, lease_seconds=1.5)
    other = PostgresSessionStore(schema_url(schema), files_root=tmp_path, lease_seconds=1.5)
    try:
        with holder.create() as session:
            time.sleep(3.5)  # a long model call: more than two lease periods
            with pytest.raises(SessionLockedError):
                other.open(session.id)
            session.append(UserMessage(text="still mine"))
            session.flush()
    finally:
        holder.close()
        other.close()


def test_a_reader_follows_a_live_session(store: PostgresSessionStore) -> None:
    session = store.create()
    first = session.append(UserMessage(text="one"))
    session.flush()
    seen: list[LogEntry] = []
    woke: list[float] = []
    stop = threading.Event()

    def follow() -> None:
        for _, entry in store.follow(session.id, poll_seconds=5.0, stop=stop):
            seen.append(entry)
            if len(seen) == 3:
                woke.append(time.monotonic())
                break  # the reader stops iterating (`stop` is noticed only after the next wait)

    reader = threading.Thread(target=follow)
    reader.start()
    second = session.append(AssistantMessage(text="two"))
    third = session.append(UserMessage(text="three"))
    flushed = time.monotonic()
    session.flush()
    reader.join(timeout=20.0)
    stop.set()
    session.close()
    assert not reader.is_alive()
    assert [e.id for e in seen] == [first.id, second.id, third.id]
    assert woke[0] - flushed < 4.0  # the notification woke the reader well before its 5 s poll


def test_a_newer_schema_is_refused_with_both_versions(schema: str, tmp_path: Path) -> None:
    PostgresSessionStore(schema_url(schema), files_root=tmp_path).migrate()
    with psycopg.connect(URL, autocommit=True) as conn:
        conn.execute(f'INSERT INTO "{schema}".schema_migrations (version) VALUES (%s)', (SCHEMA_VERSION + 7,))
    newer = PostgresSessionStore(schema_url(schema), files_root=tmp_path)
    with pytest.raises(StoreSchemaError) as caught:
        newer.list()
    assert (caught.value.found, caught.value.supported) == (SCHEMA_VERSION + 7, SCHEMA_VERSION)
    assert f"schema version {SCHEMA_VERSION + 7}, this Lamina knows version {SCHEMA_VERSION}" in str(caught.value)


def test_migrations_apply_in_order_and_only_once(schema: str, tmp_path: Path) -> None:
    store = PostgresSessionStore(schema_url(schema), files_root=tmp_path, auto_migrate=False)
    assert store.version() == 0
    with pytest.raises(StoreSchemaError, match="lamina store migrate"):
        store.list()
    assert store.migrate() == (0, SCHEMA_VERSION)
    assert store.migrate() == (SCHEMA_VERSION, SCHEMA_VERSION)
    assert store.list() == []
    store.close()


def test_connection_refused_is_a_clear_error(tmp_path: Path) -> None:
    store = PostgresSessionStore("postgresql://lamina:secret@127.0.0.1:1/nowhere", files_root=tmp_path)
    with pytest.raises(StoreConnectionError) as caught:
        store.list()
    message = str(caught.value)
    assert message.startswith("postgresql://lamina@127.0.0.1:1/nowhere: cannot connect")
    assert "secret" not in message


def test_a_read_only_database_refuses_writes_clearly(schema: str, tmp_path: Path) -> None:
    with PostgresSessionStore(schema_url(schema), files_root=tmp_path) as primary, primary.create() as session:
        session.append(UserMessage(text="written on the primary"))
        sid = session.id
    replica_url = schema_url(schema, URL + "?options=-c%20default_transaction_read_only%3Don")
    with PostgresSessionStore(replica_url, files_root=tmp_path) as replica:
        with replica.open(sid, writable=False) as reader:
            assert reader.info.title == "written on the primary"
        with pytest.raises(StoreReadOnlyError, match="read-only"):
            replica.create()
        with pytest.raises(StoreReadOnlyError):
            replica.open(sid)


def test_the_url_chooses_the_schema_and_hides_the_password() -> None:
    conninfo, schema, shown = split_url("postgresql://u:pw@db.example:5433/app?schema=agents&sslmode=require")
    assert (schema, shown) == ("agents", "postgresql://u@db.example:5433/app")
    assert conninfo == "postgresql://u:pw@db.example:5433/app?sslmode=require"


def test_an_import_is_one_transaction_keeping_ids_parents_and_leaf(store: PostgresSessionStore, schema: str) -> None:
    with store.create(cwd="/src") as source:
        first = [source.append(e) for e in exchange(1)]
        [source.append(e) for e in exchange(2)]
        entries = source.entries()
    sid = store.new_session_id()
    (store.files_dir_of(sid) / "plans" / "p.md").write_text("the plan")  # files first, then the entries
    with store.import_entries(entries, session_id=sid, cwd="/dst", leaf_id=first[-1].id) as imported:
        assert imported.entries() == entries and imported.leaf_id == first[-1].id
    with store.open(sid, writable=False) as again:
        assert again.entries() == entries and again.leaf_id == first[-1].id
        assert again.info.cwd == "/dst" and (again.plans_dir / "p.md").read_text() == "the plan"
    with pytest.raises(UsageError, match="already exists"):
        store.import_entries(entries, session_id=sid)
    _kill_connections(store)
    other = store.new_session_id()
    with pytest.raises(StoreConnectionError):
        store.import_entries(entries, session_id=other)
    assert other not in {r.id for r in store.list()}  # nothing half-made


def test_an_imported_child_stored_before_its_parent_is_still_its_child(store: PostgresSessionStore) -> None:
    # `import_entries` takes a hand-made list as it is: the session keeps every parent link, and
    # `children` finds a child wherever it sits in the list (the shared core looks only after the parent)
    root = UserMessage(id="e_root", parent_id=None, ts=1.0, text="root")
    early = AssistantMessage(id="e_early", parent_id="e_late", ts=2.0, text="stored first")
    late = UserMessage(id="e_late", parent_id="e_root", ts=3.0, text="its parent, stored later")
    with store.import_entries([root, early, late], leaf_id="e_early") as imported:
        assert [e.id for e in imported.children("e_late")] == ["e_early"]
        assert [e.id for e in imported.path()] == ["e_root", "e_late", "e_early"]
    with store.open(imported.id, writable=False) as again:
        assert [e.id for e in again.children("e_late")] == ["e_early"]
        assert [e.id for e in again.children("e_root")] == ["e_late"]


@pytest.mark.slow
def test_a_put_whose_lease_is_taken_over_in_flight_does_not_land(schema: str, tmp_path: Path) -> None:
    """A takeover cannot slip between a put's lease check and its commit: the stale writer's file never lands."""
    gate = 734_001
    stalled = PostgresSessionStore(schema_url(schema), files_root=tmp_path / "a", lease_seconds=1.0, query_timeout=20)
    other = PostgresSessionStore(schema_url(schema), files_root=tmp_path / "b", lease_seconds=1.0, query_timeout=0.5)
    outcome: list[BaseException | None] = []
    try:
        session = stalled.create()
        session.append(UserMessage(text="mine"))
        session.flush()
        with psycopg.connect(URL, autocommit=True) as conn:  # a put's name insert waits at this gate
            conn.execute(
                f'CREATE FUNCTION "{schema}".gate() RETURNS trigger LANGUAGE plpgsql AS'
                f" $$ BEGIN PERFORM pg_advisory_xact_lock_shared({gate}); RETURN NEW; END $$"
            )
            conn.execute(
                f'CREATE TRIGGER gate BEFORE INSERT OR UPDATE ON "{schema}".session_files'
                f' FOR EACH ROW EXECUTE FUNCTION "{schema}".gate()'
            )
        stalled._leases._stop.set()  # the server stalls: its lease is no longer renewed
        with psycopg.connect(URL, autocommit=True) as gatekeeper:
            gatekeeper.execute("SELECT pg_advisory_lock(%s)", (gate,))

            def put() -> None:
                try:
                    session.put_file("plans/late.md", b"the stale writer's")
                except BaseException as exc:
                    outcome.append(exc)
                else:
                    outcome.append(None)

            writer = threading.Thread(target=put)
            writer.start()
            deadline = time.monotonic() + 10
            while not gatekeeper.execute(
                "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = %s AND NOT granted", (gate,)
            ).fetchone():
                assert time.monotonic() < deadline, "the put never reached its name insert"
                time.sleep(0.02)
            taken = other.open(session.id, wait=10.0)  # once the stalled lease expires
            gatekeeper.execute("SELECT pg_advisory_unlock(%s)", (gate,))
        writer.join(timeout=30)
        assert outcome and isinstance(outcome[0], SessionLeaseLostError | StoreConnectionError), outcome
        with taken:
            assert taken.stat_file("plans/late.md") is None
            assert taken.list_files() == []
            with pytest.raises(SessionLeaseLostError):
                session.put_file("plans/later.md", b"still refused")
            assert taken.stat_file("plans/later.md") is None
    finally:
        stalled.close()
        other.close()
