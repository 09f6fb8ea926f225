"""Every wait of the PostgreSQL store is bounded, even when a writer stalls inside its turn's transaction.

The faults come from a forwarder on loopback between the store and the server (`_pg_forwarder.py`:
a stall with no reset, a stall inside the COPY, a cut that leaves the server side open) and from a
writer process SIGSTOPped while its transaction is open. Each blocking call runs under a hang guard
(`_finishes`): the guard is far above the bounds the stores are given (a lease of 2 s, a
`query_timeout` of 0.5 s); it turns an unbounded wait into a failure instead of a hung suite, and
asserts no timing. `python -m benchmarks postgres` measures the takeover's time beside its bound.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import psycopg
import pytest

from lamina.errors import SessionLeaseLostError, StoreConnectionError, UsageError
from lamina.session import UserMessage
from lamina.session.postgres import PostgresSession, PostgresSessionStore
from tests.session.postgres._pg_forwarder import Forwarder
from tests.session.postgres._pg_writer import lines, open_transactions, spawn, stop_inside_transaction
from tests.support.postgres import URL, fresh_schema, schema_url

LEASE = 2.0
QUERY_TIMEOUT = 0.5
WAIT = LEASE + 1.0
"""A takeover's `wait`: long enough for a stalled holder's lease to run out."""
GUARD = 20.0
"""Seconds after which a call is taken for hung (a failure, not a measurement)."""
ROOT = Path(__file__).resolve().parents[3]
T = TypeVar("T")


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema("stall") as name:
        yield name


@pytest.fixture
def forwarder() -> Iterator[Forwarder]:
    fwd = Forwarder(URL)
    yield fwd
    fwd.close()


def _name(role: str, schema: str) -> str:
    """The application name of one role's connections: unique to the test, since every test run on the
    machine (pytest-xdist workers, other checkouts) sees the same server's pg_stat_activity."""
    return f"{role}-{schema}"


def _store(url: str, files: Path, name: str) -> PostgresSessionStore:
    store = PostgresSessionStore(
        url, files_root=files, lease_seconds=LEASE, query_timeout=QUERY_TIMEOUT, connect_timeout=1.0
    )
    store.application_name = name  # found in pg_stat_activity by it
    return store


def _finishes(call: Callable[[], T]) -> T:
    """`call()`'s result (or its exception, raised here), failing if it is still blocked after `GUARD` s."""
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:
            failure.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(GUARD)
    assert not worker.is_alive(), f"{call} was still waiting after {GUARD:g} s: an unbounded wait"
    if failure:
        raise failure[0]
    return outcome[0]


def _committed(schema: str, session_id: str) -> list[tuple[str, int]]:
    """(entry id, lease token) of every committed entry, in order."""
    with psycopg.connect(URL) as conn:
        rows = conn.execute(
            f'SELECT id, lease_token FROM "{schema}".entries WHERE session_id = %s ORDER BY seq', (session_id,)
        ).fetchall()
    return [(r[0], int(r[1])) for r in rows]


def _open_transactions(name: str) -> int:
    return open_transactions(URL, name)


def _turn(session: PostgresSession, label: str, n: int = 3) -> list[str]:
    return [session.append(UserMessage(text=f"{label} {i}")).id for i in range(n)]


@pytest.mark.slow
def test_a_writer_stalled_inside_its_copy_fails_within_the_bound_and_is_taken_over(
    schema: str, forwarder: Forwarder, tmp_path: Path
) -> None:
    writer = _store(forwarder.url(schema), tmp_path, _name("stall-writer", schema))
    taker = _store(schema_url(schema), tmp_path, _name("stall-taker", schema))
    try:
        session = writer.create()
        acked = _turn(session, "acknowledged")
        session.flush()
        forwarder.stall_inside_copy()
        late = _turn(session, "never acknowledged")
        with pytest.raises(StoreConnectionError, match="query_timeout"):
            _finishes(session.flush)
        assert forwarder.copy_stalled.is_set()
        assert _open_transactions(writer.application_name) == 1  # the server still sits inside the COPY, row locked
        assert _finishes(session.renew_lease) is False  # the stalled transaction holds the row: not waited on
        taken = _finishes(lambda: taker.open(session.id, wait=WAIT))
        assert taken.lease_token == (session.lease_token or 0) + 1
        assert _open_transactions(writer.application_name) == 0  # the stalled backend was ended
        assert taken.renew_lease() is True
        forwarder.resume()
        with pytest.raises(SessionLeaseLostError):
            _finishes(session.flush)
        with pytest.raises(SessionLeaseLostError):
            _finishes(session.renew_lease)
        mine = _turn(taken, "the new writer's")
        taken.close()
        committed = _committed(schema, session.id)
        assert [i for i, _ in committed] == acked + mine  # nothing acknowledged lost, nothing late landed
        assert not set(late) & {i for i, _ in committed}
    finally:
        forwarder.close()  # first: a stalled connection must not hold up the stores' close
        writer.close()
        taker.close()


@pytest.mark.slow
def test_a_writer_whose_flush_stalled_stops_renewing_so_its_ended_transaction_frees_the_session(
    schema: str, forwarder: Forwarder, tmp_path: Path
) -> None:
    # The race a takeover used to lose: once the stalled transaction was ended, the writer's
    # renewing thread extended the lease again before the taker's next try.
    writer = _store(forwarder.url(schema), tmp_path, _name("unsettled-writer", schema))
    taker = _store(schema_url(schema), tmp_path, _name("unsettled-taker", schema))
    try:
        session = writer.create()
        _turn(session, "acknowledged")
        session.flush()
        forwarder.stall_inside_copy()
        _turn(session, "never acknowledged")
        with pytest.raises(StoreConnectionError, match="query_timeout"):
            _finishes(session.flush)
        with psycopg.connect(URL, autocommit=True) as admin:  # the stalled backend ends, as a takeover ends it
            admin.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
                " WHERE application_name = %s AND backend_xid IS NOT NULL",
                (writer.application_name,),
            )
        assert _open_transactions(writer.application_name) == 0
        time.sleep(LEASE * 1.5)  # the renewing thread runs every LEASE / 3 in the meantime
        taken = _finishes(lambda: taker.open(session.id, wait=0.0))
        assert taken.lease_token == (session.lease_token or 0) + 1
        taken.close()
    finally:
        forwarder.close()
        writer.close()
        taker.close()


@pytest.mark.slow
def test_a_stalled_network_fails_flush_and_renewal_within_the_bound(
    schema: str, forwarder: Forwarder, tmp_path: Path
) -> None:
    writer = _store(forwarder.url(schema), tmp_path, _name("stall-writer", schema))
    taker = _store(schema_url(schema), tmp_path, _name("stall-taker", schema))
    try:
        session = writer.create()
        acked = _turn(session, "acknowledged")
        session.flush()
        forwarder.stall()
        _turn(session, "stalled")
        with pytest.raises(StoreConnectionError):
            _finishes(session.flush)
        with pytest.raises(StoreConnectionError):
            _finishes(session.renew_lease)
        with _finishes(lambda: taker.open(session.id, wait=WAIT)) as taken:
            mine = _turn(taken, "the new writer's")
        forwarder.resume()
        with pytest.raises(SessionLeaseLostError):
            _finishes(session.flush)
        assert [i for i, _ in _committed(schema, session.id)] == acked + mine
    finally:
        forwarder.close()  # first: a stalled connection must not hold up the stores' close
        writer.close()
        taker.close()


@pytest.mark.slow
def test_a_writer_cut_inside_its_copy_gets_its_session_back_and_commits_the_turn_once(
    schema: str, forwarder: Forwarder, tmp_path: Path
) -> None:
    writer = _store(forwarder.url(schema), tmp_path, _name("stall-writer", schema))
    try:
        session = writer.create()
        first = _turn(session, "first")
        session.flush()
        forwarder.stall_inside_copy()
        turn = _turn(session, "the cut turn")
        errors: list[BaseException] = []

        def flush() -> None:
            try:
                session.flush()
            except StoreConnectionError as exc:
                errors.append(exc)

        flushing = threading.Thread(target=flush)
        flushing.start()
        assert forwarder.copy_stalled.wait(GUARD)
        forwarder.cut()  # the client hears a reset; the server side stays inside the COPY, row locked
        flushing.join(GUARD)
        assert not flushing.is_alive() and len(errors) == 1
        assert _open_transactions(writer.application_name) == 1
        # the retries find the row held by the writer's own orphaned transaction, each failing within
        # the bound, until one ends it (once it is older than query_timeout) and a next one commits
        refusals: list[str] = []
        for _ in range(20):
            try:
                _finishes(session.flush)
                break
            except StoreConnectionError as exc:
                refusals.append(str(exc))
        assert refusals and "now ended" in refusals[-1], refusals
        assert [i for i, _ in _committed(schema, session.id)] == first + turn  # once each
        assert _open_transactions(writer.application_name) == 0
        session.close()
    finally:
        forwarder.close()
        writer.close()


@pytest.mark.slow
def test_a_writer_sigstopped_inside_its_transaction_is_taken_over(schema: str, tmp_path: Path) -> None:
    url, acks, name = schema_url(schema), tmp_path / "acks.jsonl", _name("stall-sigstop", schema)
    writer = spawn(url, tmp_path / "files", acks, LEASE, QUERY_TIMEOUT, name)
    taker = _store(url, tmp_path / "files", _name("stall-taker", schema))
    try:
        while sum("ack" in line for line in lines(acks)) < 3:
            assert writer.poll() is None, (acks.with_suffix(".err")).read_text()
            threading.Event().wait(0.05)
        stop_inside_transaction(writer, URL, name, seed=28)
        session_id = str(lines(acks)[0]["session"])
        with _finishes(lambda: taker.open(session_id, wait=WAIT)) as taken:
            assert _open_transactions(name) == 0  # the stopped writer's transaction was ended
            mine = _turn(taken, "the new writer's")
        writer.send_signal(signal.SIGCONT)
        assert _finishes(lambda: writer.wait()) == 0, (acks.with_suffix(".err")).read_text()
        written = lines(acks)
        assert "fenced" in written[-1]  # it woke up to find its lease lost, and wrote nothing more
        acked = [str(i) for line in written if "ack" in line for i in line["ack"]]  # type: ignore[attr-defined]
        committed = _committed(schema, session_id)
        ids = [i for i, _ in committed]
        assert set(acked) <= set(ids), f"{len(set(acked) - set(ids))} acknowledged entries lost"
        assert ids[-len(mine) :] == mine
        tokens = [t for _, t in committed]
        assert tokens == sorted(tokens)  # the old writer never wrote after the new one
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
        taker.close()


def test_the_bounds_are_validated_and_defaulted(tmp_path: Path) -> None:
    store = PostgresSessionStore(URL, files_root=tmp_path)
    assert (store.lease_seconds, store.query_timeout) == (30.0, 10.0)
    assert PostgresSessionStore(URL, files_root=tmp_path, lease_seconds=3).query_timeout == 1.0
    with pytest.raises(UsageError, match="query_timeout"):
        PostgresSessionStore(URL, files_root=tmp_path, query_timeout=0)
    with pytest.raises(UsageError, match="lease_seconds"):
        PostgresSessionStore(URL, files_root=tmp_path, lease_seconds=-1)
