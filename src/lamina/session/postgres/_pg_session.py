"""An open session of the PostgreSQL store: its tail loaded, appends batched into one transaction a turn (I/O)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, BinaryIO, Final, TypeVar, overload

import msgspec
import psycopg
import psycopg.errors
from psycopg import sql

from lamina.errors import MissingEntryError, SessionLeaseLostError, StoreConnectionError, StoreError, UsageError
from lamina.session._entries import (
    CRITICAL_ENTRY_TYPES,
    CompactionBoundary,
    Entry,
    LogEntry,
    UnknownEntry,
    UserMessage,
    encode_entry,
)
from lamina.session._protocol import FileInfo, LoadReport, SessionSummary
from lamina.session._session_core import SessionCore
from lamina.session._session_files import CachedFiles, check_file_name
from lamina.session._stamp import _storable, _title_from
from lamina.session._tree import view_start_id
from lamina.session.postgres._bounds import StalledHolder, end_stalled_holder
from lamina.session.postgres._compaction_claims import claim_compaction, release_compaction
from lamina.session.postgres._connection import NOTIFY_CHANNEL, PostgresConnection
from lamina.session.postgres._pg_files import copy_names, file_info, file_list, open_blob, store_file

E = TypeVar("E", bound=Entry)

_ENTRY_ALLOWANCE: Final = 0.001
"""Seconds a turn's transaction is allowed per entry it commits, on top of `query_timeout` (big imports)."""
_BIG_BATCH: Final = 1_000
"""From this many entries a transaction raises its own server-side `statement_timeout` to match."""


def _entry_type(entry: LogEntry) -> str:
    if isinstance(entry, UnknownEntry):
        return entry.type
    return str(entry.__struct_config__.tag)


def _row_held(session_id: str, holder: StalledHolder | None) -> str:
    """Why a flush gave up on its session's row lock (nothing of the batch was committed)."""
    if holder is None or not (holder.ended or holder.refused):
        return f"session {session_id}: its row stayed locked by another transaction; nothing committed, flush again"
    what = f"session {session_id}: its row was held by a stalled transaction"
    what += f" (backend {holder.pid}, open {holder.seconds:.1f} s)"
    if holder.refused:
        return f"{what} that cannot be ended: {holder.refused}"
    return f"{what}, now ended; nothing committed, flush again"


class PostgresSession(CachedFiles, SessionCore):
    """An open session of a `PostgresSessionStore`. Create it through the store.

    Its files live in the database; `files_dir` (under `$LAMINA_FILES`) is only a local cache of them.
    """

    _virtual = True
    claim_compaction = claim_compaction  # `lamina.session.CompactionClaims`: one host compacts it at a time
    release_compaction = release_compaction

    def __init__(self, store: PostgresConnection, info: SessionSummary, files_dir: Path, *, token: int | None) -> None:
        super().__init__()
        self._store = store
        self._info = info
        self.files_dir = files_dir
        """The session's folder of files: `attachments/`, `data/`, `plans/`."""
        self._token = token
        """The fencing token of this writer's lease; None when read-only or closed."""
        self._lost = False
        """The lease was found taken over: every write is refused."""
        self._unsettled = False
        """A flush failed with its outcome unknown (its transaction may still sit on the row): the
        store's thread stops renewing the lease until a flush settles it, so a stalled turn cannot
        keep the session."""
        self._creating = False
        """The session's row is not in the database yet: the first commit inserts it (an import)."""
        self._files_from: str | None = None
        """A session whose files the first commit gives this one (a fork)."""
        self.report = LoadReport()
        self._seq_of: dict[str, int] = {}
        self._pending: list[tuple[int, LogEntry]] = []
        self._committed_seq = 0
        """The last sequence number known committed."""
        self._next_seq = 1
        self._loaded_from = 1
        """The lowest sequence number in memory (1: everything is loaded)."""
        self._committed_leaf: str | None = None
        self._count = info.entry_count
        self._view_start: str | None = None

    # -- loading ---------------------------------------------------------------------------------

    def _restore(self, rows: tuple[list[int], list[LogEntry]], *, leaf_id: str | None, last_seq: int) -> None:
        seqs, entries = rows
        self._entry_list = list(entries)
        self._by_id = {e.id: e for e in entries}
        self._order_list = None
        self._seq_of = dict(zip((e.id for e in entries), seqs, strict=True))
        self._loaded_from = seqs[0] if seqs else last_seq + 1
        self._committed_seq = last_seq
        self._next_seq = last_seq + 1
        self._leaf = leaf_id if leaf_id in self._entries else (entries[-1].id if entries else None)
        if leaf_id is not None and leaf_id not in self._entries and self._loaded_from > 1:
            self.load_all()
            self._leaf = leaf_id if leaf_id in self._entries else self._last_id()
        self._committed_leaf = self._leaf
        self.report.unknown_entries = sum(isinstance(e, UnknownEntry) for e in self._entry_list)
        try:
            self._view_start = view_start_id(self._entries, self._leaf)
        except MissingEntryError:
            self.load_all()
            self._view_start = view_start_id(self._entries, self._leaf)

    def load_all(self) -> None:
        """Load the entries before the first one in memory (needed for full history, old branches, forks)."""
        if self._loaded_from <= 1:
            return
        with self._store.conn() as conn:
            seqs, older = self._store.fetch(conn, self.id, after=0, before=self._loaded_from)
        self._entry_list = older + self._entry_list
        self._order_list = None
        for seq, entry in zip(seqs, older, strict=True):
            self._entries[entry.id] = entry
            self._seq_of[entry.id] = seq
        self._loaded_from = 1

    # -- reading (the rest is `SessionCore`'s) -------------------------------------------------

    def _header(self) -> SessionSummary:
        return self._info

    @property
    def _files_root(self) -> Path:
        return self.files_dir

    def _leaf_view_start(self) -> str | None:
        return self._view_start

    # -- files (the rest is `CachedFiles`') ------------------------------------------------------

    def _store_file(self, name: str, source: bytes | Path, sha256: str, size: int) -> None:
        self._check_writable()
        assert self._token is not None
        store_file(self._store, self.id, name, source, (sha256, size), token=self._token, creating=self._creating)

    def open_file(self, name: str) -> BinaryIO:
        info = self.stat_file(name)
        if info is None:
            raise FileNotFoundError(f"session {self.id} has no file {name}")
        return open_blob(self._store, info)

    def stat_file(self, name: str) -> FileInfo | None:
        return file_info(self._store, self.id, check_file_name(name))

    def list_files(self, prefix: str = "") -> list[FileInfo]:
        return file_list(self._store, self.id, prefix)

    @property
    def writable(self) -> bool:
        return self._token is not None

    @property
    def lease_token(self) -> int | None:
        """This writer's fencing token (None when read-only)."""
        return self._token

    def seq_of(self, entry_id: str) -> int | None:
        """The per-session sequence number of an entry in memory."""
        return self._seq_of.get(entry_id)

    def children(self, entry_id: str) -> list[LogEntry]:
        """The entries whose parent is `entry_id`, in append order.

        All of them, not only those after the parent as `SessionCore` looks: an imported list of
        entries (`import_entries`) may hold a child before its parent, and nothing here mends it.
        """
        self.get(entry_id)
        return [e for e in self._entry_list if e.parent_id == entry_id]

    # -- writing ---------------------------------------------------------------------------------

    def renew_lease(self) -> bool:
        """Extend this writer's lease now (the store's thread also does, a few times per lease period).

        Takes at most `query_timeout` (plus `connect_timeout` when a connection must be made).

        Returns:
            False when the session's row was held by a transaction (this writer's turn in flight,
            or one of its turns stalled) and the lease was not extended; True when it was.

        Raises:
            SessionLeaseLostError: Another server has taken the session over.
            StoreConnectionError: The database did not answer within the bound.
        """
        self._check_writable()
        renewed = self.id in self._store.leases.renew([self])
        self._check_writable()
        return renewed

    def _check_writable(self) -> None:
        if self._token is None:
            raise UsageError(f"session {self.id} was opened read-only (or is closed)")
        if self._lost:
            raise SessionLeaseLostError(self.id, "another server")

    def _add(self, entry: LogEntry) -> None:
        """Put an entry in memory and in the pending batch, as the new leaf."""
        self._check_writable()
        seq = self._next_seq
        self._next_seq += 1
        self._remember(entry)
        self._seq_of[entry.id] = seq
        self._pending.append((seq, entry))
        if isinstance(entry, CompactionBoundary):
            self._view_start = entry.first_kept_id or entry.id
        elif self._leaf is None:
            self._view_start = entry.id
        self._leaf = entry.id
        self._count += 1
        if not self._info.title and isinstance(entry, UserMessage):
            self._info = dataclasses.replace(self._info, title=_title_from(entry.text))

    def append(self, entry: E, *, durable: bool | None = None) -> E:
        """Append `entry` as a child of the leaf; it becomes the new leaf.

        Committed now when `durable` is true (default: only critical entries), with the entries
        still pending before it; else at the next `flush`. A critical append that cannot be
        committed is taken back (the leaf returns to where it was) and its error raised.
        """
        self._check_writable()
        stamped = _storable(
            msgspec.structs.replace(entry, id=self._store.new_entry_id(), parent_id=self._leaf, ts=self._store.clock())
        )
        must_commit = isinstance(stamped, CRITICAL_ENTRY_TYPES) if durable is None else durable
        saved = (self._leaf, self._view_start, self._count, self._info)
        self._add(stamped)
        if must_commit:
            try:
                self.flush()
            except BaseException:
                self._take_back(stamped, saved)
                raise
        return stamped

    def _take_back(self, entry: LogEntry, saved: tuple[str | None, str | None, int, SessionSummary]) -> None:
        self._pending.pop()
        self._forget_last()
        del self._seq_of[entry.id]
        self._next_seq -= 1
        self._leaf, self._view_start, self._count, self._info = saved

    @overload
    def branch(self, entry_id: str, *, first: None = None) -> None: ...
    @overload
    def branch(self, entry_id: str, *, first: E) -> E: ...
    def branch(self, entry_id: str, *, first: E | None = None) -> E | None:
        """Move the leaf to `entry_id` (committed at once): the next append starts a new branch from there.

        With `first`, that entry is appended as the branch's first and committed in the same
        transaction as the new leaf. Returns it stamped.
        """
        self._check_writable()
        self.get(entry_id)
        previous = (self._leaf, self._view_start)
        self._leaf = entry_id
        self._view_start = view_start_id(self._entries, entry_id)
        if first is None:
            self.flush(force=True)
            return None
        try:
            return self.append(first, durable=True)  # one commit: the entry and the leaf it makes
        except BaseException:
            self._leaf, self._view_start = previous
            raise

    def flush(self, *, force: bool = False) -> None:
        """The turn boundary: commit every pending entry and the session row in one transaction.

        The transaction is bounded: it takes at most the store's `query_timeout` plus 1 ms per
        entry committed (plus `connect_timeout` when a new connection must be made), even when the
        database or the network stalls; then `StoreConnectionError`.

        Raises:
            StoreConnectionError: The database could not be reached, the connection dropped, or it
                did not answer within the bound. The batch was committed entirely or not at all, and
                if the COMMIT's answer was what got lost, it may well have been committed. Either way
                the entries stay pending and the next `flush` (or `close`) settles it: it recognises
                the sequence number a lost commit left and never writes an entry twice. A caller that
                gives up instead (or whose next flush raises `SessionLeaseLostError`) learns what
                landed by reopening the session (read-only is enough) and looking for the turn's
                entry ids.
            SessionLeaseLostError: Another server has taken the session over; nothing is committed
                by this writer any more.
        """
        if self._token is None:
            return
        self._check_writable()
        if not self._pending and not force and self._leaf == self._committed_leaf:
            return
        for _ in range(2):  # a second round only after an earlier commit whose answer was lost
            try:
                self._unsettled = True
                self._commit_pending()
            except _NotApplied:
                self._settle()
                continue
            self._unsettled = False
            return
        raise StoreError(self._store.location, f"session {self.id}: the flush could not be settled")

    def _commit_pending(self) -> None:
        batch = list(self._pending)
        last_seq = batch[-1][0] if batch else self._committed_seq
        store = self._store
        start_seq = self._seq_of.get(self._view_start, 0) if self._view_start is not None else 0
        seconds = store.query_timeout + len(batch) * _ENTRY_ALLOWANCE
        with store.conn(seconds) as conn:
            try:
                with conn.transaction():
                    if len(batch) >= _BIG_BATCH:  # the server's statement_timeout grows with the batch too
                        conn.execute(
                            sql.SQL("SET LOCAL statement_timeout = {}").format(sql.Literal(round(seconds * 1000)))
                        )
                    if self._creating:
                        self._insert_row(conn, last_seq, start_seq)
                        if self._files_from is not None:
                            copy_names(conn, self._files_from, self.id)
                    row = conn.execute(
                        "UPDATE sessions SET last_seq = %s, leaf_id = %s, entry_count = %s, resume_seq = %s,"
                        " title = %s, updated_at = %s, lease_expires = now() + make_interval(secs => %s)"
                        " WHERE id = %s AND lease_token = %s AND last_seq = %s RETURNING 1",
                        (
                            last_seq,
                            self._leaf,
                            self._count,
                            start_seq,
                            self._info.title,
                            store.clock(),
                            store.lease_seconds,
                            self.id,
                            self._token,
                            self._committed_seq,
                        ),
                    ).fetchone()
                    if row is None:
                        raise _NotApplied
                    if batch:
                        with conn.cursor().copy(
                            "COPY entries (session_id, seq, id, parent_id, type, ts, payload, lease_token) FROM STDIN"
                        ) as copy:
                            for seq, entry in batch:
                                copy.write_row(
                                    (
                                        self.id,
                                        seq,
                                        entry.id,
                                        entry.parent_id,
                                        _entry_type(entry),
                                        entry.ts,
                                        encode_entry(entry).decode(),
                                        self._token,
                                    )
                                )
                    conn.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, f"{store.schema}\t{self.id}\t{last_seq}"))
            except psycopg.errors.LockNotAvailable:  # the row stayed locked for half the bound
                holder = end_stalled_holder(conn, self.id, older_than=store.query_timeout, wait_ms=0)
                raise StoreConnectionError(store.location, _row_held(self.id, holder)) from None
        self._creating = False
        self._committed_seq = last_seq
        self._committed_leaf = self._leaf
        del self._pending[: len(batch)]

    def _insert_row(self, conn: psycopg.Connection[Any], last_seq: int, start_seq: int) -> None:
        """The row of a session being imported, in the transaction that commits its entries."""
        info, store = self._info, self._store
        row = conn.execute(
            "INSERT INTO sessions (id, created_at, updated_at, cwd, title, forked_from_session, forked_from_entry,"
            " leaf_id, entry_count, last_seq, resume_seq, lease_owner, lease_token, lease_expires)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 0, %s, %s, %s, now() + make_interval(secs => %s))"
            " ON CONFLICT (id) DO NOTHING RETURNING 1",
            (
                info.id,
                info.created_at,
                info.updated_at,
                info.cwd,
                info.title,
                info.forked_from.session_id if info.forked_from else None,
                info.forked_from.entry_id if info.forked_from else None,
                self._leaf,
                self._count,
                start_seq,
                store.owner,
                self._token,
                store.lease_seconds,
            ),
        ).fetchone()
        if row is None:
            raise UsageError(f"session {info.id} already exists in store {store.location}")

    def _settle(self) -> None:
        """Settle a conditional update that matched nothing.

        Either the lease was taken (raise), or an earlier attempt committed part of the pending
        entries and only its answer was lost (drop those).
        """
        with self._store.conn() as conn:
            row = conn.execute(
                "SELECT lease_token, last_seq, lease_owner FROM sessions WHERE id = %s", (self.id,)
            ).fetchone()
        if row is None:
            self._lost = True
            raise SessionLeaseLostError(self.id, "a delete")
        token, committed, owner = int(row[0]), int(row[1]), row[2]
        if token != self._token:
            self._lost = True
            raise SessionLeaseLostError(self.id, str(owner or "another server"))
        pending_end = self._pending[-1][0] if self._pending else self._committed_seq
        if not self._committed_seq <= committed <= pending_end:
            self._lost = True
            raise SessionLeaseLostError(self.id, f"a writer that left sequence number {committed}")
        self._pending = [(seq, e) for seq, e in self._pending if seq > committed]
        self._committed_seq = committed

    def close(self) -> None:
        """Flush, then give the lease back. Safe to call twice; the lease is released even when the flush fails."""
        if self._token is None:
            return
        try:
            if not self._lost:
                self.flush()
        finally:
            self._abandon()

    def _abandon(self) -> None:
        token, self._token = self._token, None
        if token is not None and not self._lost:
            self._store.leases.release(self.id, token)
        self._store.leases.drop(self)


class _NotApplied(Exception):
    """The session row did not match this writer's token and sequence number (raised to roll back)."""
