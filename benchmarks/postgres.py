"""The PostgreSQL session store: commits per turn under concurrency, flat resume, and the Agents SDK peer.

Figures (the server is `$LAMINA_BENCH_POSTGRES`, default the local one, database `test`; everything
lives in a schema or tables of this run's own, dropped at the end):

- `pg_append_per_s_1` / `pg_append_per_s_8` / `pg_append_per_s_32`: entries per second appended by
  1, 8 and 32 concurrent writers (threads of one process, one session each, one pooled connection
  each), in turns of 10 entries committed per turn (`flush`: one transaction per turn).
- `jsonl_append_per_s_1`: the same turns through the JSONL store (one fsync per turn), one writer.
- `peer_sqlalchemy_session_add_per_s`: the OpenAI Agents SDK's `SQLAlchemySession` on the same
  server (asyncpg driver), one writer, `add_items` with one turn (10 items) per call.
- `pg_resume_ms_10k` / `pg_resume_ms_1m`: `store.open(id)` + `view()` + `close()` of a session of
  10k / 1M entries whose latest compaction boundary sits 200 entries from the end (1M only in a
  full run; `--quick` builds 100k instead). Flat: the open reads from the boundary by index.
  The big sessions are written with one bulk COPY (as if appended and flushed) and checked.
- `jsonl_resume_ms_10k`: the same 10k session in the JSONL store.
- `pg_takeover_s_stalled_writer`: seconds from SIGSTOPping a writer process while its turn's
  transaction is open (row locks held) to another store's `open(id, wait=...)` returning the
  session, printed beside the bound `wait` + 1 s (lease 3 s, `query_timeout` 1 s, `wait` 4 s);
  the worst of the runs. The takeover ends the stopped holder's backend once its lease expired.
- `peer_sqlalchemy_session_get_ms_100k`: a fresh `SQLAlchemySession` reading all 100k items of a
  session with `get_items()` (what the SDK does to resume); `peer_sqlalchemy_session_get_limit_ms_100k`:
  only the latest N (N = what our resume loads), the like-for-like peer of `pg_resume_ms_*`.
- `pg_file_put_mb_per_s`, `pg_file_read_mb_per_s` (a 20 MB attachment) beside the JSONL store's
  `jsonl_file_*`, and `pg_takeover_s_with_files`: see `benchmarks/_pg_files.py`.

Ratios are printed against the peer (and the JSONL store) measured in the same run.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from tests.session.postgres._pg_writer import lines, open_transactions, spawn, stop_inside_transaction

from benchmarks import Figure, ratio
from benchmarks._pg_files import file_figures
from benchmarks.store import KEPT_BEFORE, TAIL, TURN, _build_log, _entry_id, _make_entry, _peer_item, _text
from lamina.session import CompactionBoundary, LocalSessionStore, LogEntry
from lamina.session._entries import encode_entry
from lamina.session.postgres import PostgresSessionStore

URL = os.environ.get("LAMINA_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
_T0 = 1_750_000_000.0


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1_000.0


# -- append ------------------------------------------------------------------------------------


def _pg_append(store: PostgresSessionStore, writers: int, turns: int, entries: list[LogEntry]) -> float:
    """Entries per second over `writers` threads, each appending `turns` turns to its own session."""
    sessions = [store.create(cwd="/project") for _ in range(writers)]
    start = threading.Barrier(writers + 1)

    def write(index: int) -> None:
        session = sessions[index]
        start.wait()
        for t in range(turns):
            for entry in entries[t * TURN : (t + 1) * TURN]:
                session.append(entry)
            session.flush()

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    for session in sessions:
        session.close()
    return writers * turns * TURN / elapsed


def _jsonl_append(store: LocalSessionStore, turns: int, entries: list[LogEntry]) -> float:
    session = store.create(cwd="/project")
    began = time.perf_counter()
    for t in range(turns):
        for entry in entries[t * TURN : (t + 1) * TURN]:
            session.append(entry)
        session.flush()
    elapsed = time.perf_counter() - began
    session.close()
    return turns * TURN / elapsed


# -- resume ------------------------------------------------------------------------------------


def _pg_build(store: PostgresSessionStore, n: int, progress: Callable[[str], None]) -> str:
    """A session of `n` entries, latest boundary `TAIL` from the end, written by one bulk COPY."""
    session = store.create(cwd="/project", title="benchmark session")
    session_id = session.id
    session.close()
    boundary_at, first_kept = n - TAIL, n - TAIL - KEPT_BEFORE
    step = max(n // 5, 100_000)
    with psycopg.connect(URL, autocommit=True) as conn, conn.transaction():
        conn.execute(f'SET LOCAL search_path TO "{store.schema}"')
        with conn.cursor().copy(
            "COPY entries (session_id, seq, id, parent_id, type, ts, payload, lease_token) FROM STDIN"
        ) as copy:
            parent: str | None = None
            for i in range(n):
                stamp = {"id": _entry_id(i), "parent_id": parent, "ts": _T0 + i * 0.5}
                parent = stamp["id"]  # type: ignore[assignment]
                entry: LogEntry
                if i == boundary_at:
                    entry = CompactionBoundary(
                        summary=_text(i, 1_500),
                        first_kept_id=_entry_id(first_kept),
                        tokens_before=180_000,
                        tokens_after=22_000,
                        trigger="threshold",
                        **stamp,  # type: ignore[arg-type]
                    )
                else:
                    entry = _make_entry(i, stamp)
                tag = str(type(entry).__struct_config__.tag)  # type: ignore[union-attr]
                copy.write_row(
                    (session_id, i + 1, entry.id, entry.parent_id, tag, entry.ts, encode_entry(entry).decode(), 1)
                )
                if (i + 1) % step == 0 and i + 1 < n:
                    progress(f"copying a {n:,}-entry session: {i + 1:,} entries")
        conn.execute(
            "UPDATE sessions SET last_seq = %s, leaf_id = %s, entry_count = %s, resume_seq = %s WHERE id = %s",
            (n, _entry_id(n - 1), n, first_kept + 1, session_id),
        )
        conn.execute("ANALYZE entries")
    return session_id


def _check(store: PostgresSessionStore | LocalSessionStore, session_id: str, n: int) -> tuple[int, str]:
    with store.open(session_id) as session:
        loaded = session.loaded_count()
        view = session.view()
        problems = []
        if loaded > TAIL + KEPT_BEFORE + 5:
            problems.append(f"resume loaded {loaded:,} of {n:,} entries")
        if view.boundary is None or view.boundary.id != _entry_id(n - TAIL):
            problems.append("the view does not start at the boundary")
        elif len(view.entries) != KEPT_BEFORE + TAIL - 1:
            problems.append(f"the view holds {len(view.entries)} entries")
    return loaded, "; ".join(problems)


def _resume_once(store: PostgresSessionStore | LocalSessionStore, session_id: str) -> float:
    began = time.perf_counter()
    session = store.open(session_id)
    session.view()
    session.close()
    return time.perf_counter() - began


# -- the peer ----------------------------------------------------------------------------------


def _peer_url() -> str:
    return URL.replace("postgresql://", "postgresql+asyncpg://", 1)


async def _peer_add(items: list[dict[str, Any]], tables: tuple[str, str]) -> float:
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(_peer_url())
    try:
        session = SQLAlchemySession(
            "add-" + secrets.token_hex(4),
            engine=engine,
            create_tables=True,
            sessions_table=tables[0],
            messages_table=tables[1],
        )
        await session.add_items(items[:TURN])  # tables created outside the timing
        began = time.perf_counter()
        for t in range(1, len(items) // TURN):
            await session.add_items(items[t * TURN : (t + 1) * TURN])
        return (len(items) // TURN - 1) * TURN / (time.perf_counter() - began)
    finally:
        await engine.dispose()


async def _peer_fill(items: list[dict[str, Any]], tables: tuple[str, str], session_id: str) -> None:
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(_peer_url())
    try:
        session = SQLAlchemySession(
            session_id, engine=engine, create_tables=True, sessions_table=tables[0], messages_table=tables[1]
        )
        for start in range(0, len(items), 5_000):
            await session.add_items(items[start : start + 5_000])
    finally:
        await engine.dispose()


async def _peer_get(tables: tuple[str, str], session_id: str, n: int, *, limit: int | None = None) -> float:
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(_peer_url())
    try:
        session = SQLAlchemySession(session_id, engine=engine, sessions_table=tables[0], messages_table=tables[1])
        await session.get_items(limit=1)  # the connection is opened outside the timing, as our pool's is
        began = time.perf_counter()
        items = await session.get_items(limit=limit)
        elapsed = time.perf_counter() - began
        assert len(items) == (limit or n), f"the peer returned {len(items)} items"
        return elapsed
    finally:
        await engine.dispose()


def _drop_peer(tables: tuple[str, str]) -> None:
    with psycopg.connect(URL, autocommit=True) as conn:
        conn.execute(f'DROP TABLE IF EXISTS "{tables[1]}", "{tables[0]}" CASCADE')


# -- takeover of a stalled writer ----------------------------------------------------------------

TAKEOVER_LEASE = 3.0
TAKEOVER_QUERY_TIMEOUT = 1.0
TAKEOVER_WAIT = 4.0


def _takeover_once(url: str, folder: Path, run_no: int) -> float:
    """Seconds from SIGSTOPping a writer inside its transaction to a takeover's `open` returning."""
    acks, name = folder / f"takeover-{run_no}.jsonl", f"lamina-bench-stalled-{os.getpid()}-{run_no}"
    writer = spawn(url, folder / "files", acks, TAKEOVER_LEASE, TAKEOVER_QUERY_TIMEOUT, name)
    taker = PostgresSessionStore(
        url, files_root=folder / "files", lease_seconds=TAKEOVER_LEASE, query_timeout=TAKEOVER_QUERY_TIMEOUT
    )
    try:
        while sum("ack" in line for line in lines(acks)) < 3:
            if writer.poll() is not None:
                raise RuntimeError(acks.with_suffix(".err").read_text())
            time.sleep(0.05)
        session_id = str(lines(acks)[0]["session"])
        stop_inside_transaction(writer, URL, name, seed=run_no)
        began = time.perf_counter()
        taker.open(session_id, wait=TAKEOVER_WAIT).close()
        elapsed = time.perf_counter() - began
        if open_transactions(URL, name):
            raise RuntimeError("the stalled writer's transaction is still open after the takeover")
        return elapsed
    finally:
        writer.kill()
        writer.wait()
        taker.close()


# -- run ---------------------------------------------------------------------------------------


def run(*, quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    turns = {1: 100, 8: 40, 32: 15} if quick else {1: 400, 8: 150, 32: 60}
    append_runs = 3 if quick else 5
    resume_runs = 21 if quick else 51
    peer_runs = 3 if quick else 5
    big_key, big_n = ("100k", 100_000) if quick else ("1m", 1_000_000)
    peer_n = 100_000
    schema = f"bench_{os.getpid()}_{secrets.token_hex(3)}"
    tables = (f"bench_sessions_{schema}", f"bench_messages_{schema}")
    entries = [_make_entry(i) for i in range(max(turns.values()) * TURN)]
    peer_items = [_peer_item(_make_entry(i)) for i in range(peer_n)]
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="lamina-bench-pg-") as tmp:
        store = PostgresSessionStore(f"{URL}?schema={schema}", files_root=Path(tmp) / "files", max_connections=34)
        jsonl = LocalSessionStore(Path(tmp) / "jsonl")
        try:
            # append: ours (1, 8, 32 writers), the JSONL store's and the peer's, interleaved
            rates: dict[int, list[float]] = {w: [] for w in turns}
            jsonl_rates: list[float] = []
            peer_rates: list[float] = []
            for run_no in range(append_runs):
                progress(f"append round {run_no + 1}/{append_runs}: 1, 8, 32 writers; JSONL; the peer")
                for writers, count in turns.items():
                    rates[writers].append(_pg_append(store, writers, count, entries))
                jsonl_rates.append(_jsonl_append(jsonl, turns[1], entries))
                peer_rates.append(asyncio.run(_peer_add(peer_items[: turns[1] * TURN], tables)))
            # resume: 10k and the big one, both stores; the peer's 100k
            built: dict[str, str] = {}
            notes: dict[str, str] = {}
            loaded = 0
            for key, n in (("10k", 10_000), (big_key, big_n)):
                progress(f"writing a {n:,}-entry session (one COPY)")
                built[key] = _pg_build(store, n, progress)
                loaded, notes[key] = _check(store, built[key], n)
                if notes[key]:
                    progress(f"WARNING {key}: {notes[key]}")
            jsonl_10k, _ = _build_log(jsonl, 10_000, progress)
            jsonl_loaded, jsonl_note = _check(jsonl, jsonl_10k, 10_000)
            progress(f"peer: filling a SQLAlchemySession with {peer_n:,} items")
            peer_id = "get-" + secrets.token_hex(4)
            asyncio.run(_peer_fill(peer_items, tables, peer_id))
            samples: dict[str, list[float]] = {key: [] for key in built}
            jsonl_samples: list[float] = []
            peer_get: list[float] = []
            peer_limit: list[float] = []
            progress(f"resuming (x{resume_runs}) and reading the peer (x{peer_runs})")
            for run_no in range(resume_runs):
                for key, sid in built.items():
                    samples[key].append(_resume_once(store, sid))
                jsonl_samples.append(_resume_once(jsonl, jsonl_10k))
                peer_limit.append(asyncio.run(_peer_get(tables, peer_id, peer_n, limit=loaded)))
                if run_no < peer_runs:
                    peer_get.append(asyncio.run(_peer_get(tables, peer_id, peer_n)))
        finally:
            store.close()
            with psycopg.connect(URL, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            _drop_peer(tables)
        progress("takeover of a writer SIGSTOPped inside its transaction")
        takeover_schema = f"{schema}_takeover"
        try:
            takeovers = [
                _takeover_once(f"{URL}?schema={takeover_schema}", Path(tmp), n) for n in range(3 if quick else 5)
            ]
        finally:
            with psycopg.connect(URL, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{takeover_schema}" CASCADE')
        files_schema = f"{schema}_files"
        try:
            file_rows = file_figures(f"{URL}?schema={files_schema}", Path(tmp), quick=quick, progress=progress)
        finally:
            with psycopg.connect(URL, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{files_schema}" CASCADE')

    peer_add = statistics.median(peer_rates)
    jsonl_add = statistics.median(jsonl_rates)
    peer_name = "peer_sqlalchemy_session_add_per_s"
    for writers in turns:
        value = statistics.median(rates[writers])
        note = f"{turns[writers]} turns of {TURN} entries per writer, a transaction per turn; threads of one process"
        if writers == 1:
            note += f"; {value / jsonl_add:.2f}x jsonl_append_per_s_1"
        figures.append(
            Figure(f"pg_append_per_s_{writers}", value, "entries/s", ratio(value, peer_add, peer_name), note)
        )
    figures.append(Figure("jsonl_append_per_s_1", jsonl_add, "entries/s", note="one fsync per turn"))
    figures.append(Figure(peer_name, peer_add, "entries/s", note="SQLAlchemySession + asyncpg, add_items per turn"))
    resume = {key: _median_ms(s) for key, s in samples.items()}
    spread = max(resume.values()) / min(resume.values())
    limit_ms = _median_ms(peer_limit)
    limit_name = "peer_sqlalchemy_session_get_limit_ms_100k"
    for key, value in resume.items():
        note = f"{loaded} entries loaded, the writer lease taken and given back; 10k..{big_key}: {spread:.2f}x"
        if notes.get(key):
            note += f"; PROBLEM: {notes[key]}"
        figures.append(Figure(f"pg_resume_ms_{key}", value, "ms", ratio(value, limit_ms, limit_name), note))
    jsonl_resume = _median_ms(jsonl_samples)
    figures.append(
        Figure(
            "jsonl_resume_ms_10k",
            jsonl_resume,
            "ms",
            note=f"{jsonl_loaded} entries loaded; pg/jsonl = {resume['10k'] / jsonl_resume:.2f}x"
            + (f"; PROBLEM: {jsonl_note}" if jsonl_note else ""),
        )
    )
    figures.append(Figure(limit_name, limit_ms, "ms", note=f"get_items(limit={loaded}) of {peer_n:,}"))
    peer_get_ms = _median_ms(peer_get)
    figures.append(
        Figure(
            "peer_sqlalchemy_session_get_ms_100k",
            peer_get_ms,
            "ms",
            note=f"get_items() of {peer_n:,} (the SDK's resume); {peer_get_ms / resume['10k']:.0f}x pg_resume_ms_10k",
        )
    )
    worst, bound = max(takeovers), TAKEOVER_WAIT + 1.0
    figures.append(
        Figure(
            "pg_takeover_s_stalled_writer",
            worst,
            "s",
            note=f"bound wait + 1 s = {bound:g} s ({'within' if worst <= bound else 'OVER'}); worst of"
            f" {len(takeovers)}, median {statistics.median(takeovers):.2f} s; lease {TAKEOVER_LEASE:g} s,"
            f" query_timeout {TAKEOVER_QUERY_TIMEOUT:g} s, wait {TAKEOVER_WAIT:g} s",
        )
    )
    return figures + file_rows
