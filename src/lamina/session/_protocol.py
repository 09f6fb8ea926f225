"""The session store protocol: what the engine, the agent and the CLI may ask of a store (pure).

Described in docs/session-log.md ("The store protocol").
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Final, Protocol, TypeAlias, TypedDict, TypeVar, overload

import msgspec

from lamina.session._entries import Entry, LogEntry
from lamina.session._scan import CorruptLine, DuplicateId, TornTail
from lamina.session._tree import ProviderView, Relink

E = TypeVar("E", bound=Entry)

STORE_ENV_VAR: Final = "LAMINA_STORE"
"""Environment variable naming the store: a folder or a `postgresql://` URL."""


@dataclass(frozen=True, slots=True)
class LogCut:
    """A log shorter than its metadata's record of it, with fewer entries: cut or emptied from outside."""

    size: int
    recorded_size: int
    recorded_entries: int
    entries: int

    def describe(self) -> str:
        return (
            f"the log is {self.size} bytes with {self.entries} entries, but its metadata records "
            f"{self.recorded_size} bytes and {self.recorded_entries} entries: it was cut or emptied"
        )


@dataclass(slots=True)
class LoadReport:
    """What opening a session found wrong, and what it did about it (always clean for a database store)."""

    torn_tail: TornTail | None = None
    corrupt_lines: list[CorruptLine] = field(default_factory=list)
    unknown_entries: int = 0
    """Entries of types (or format versions) from a newer Lamina: kept, skipped by the provider view."""
    meta_problem: str | None = None
    """Why the metadata was rebuilt from the log, if it was (or why it could not be written)."""
    bom: bool = False
    """The log starts with a UTF-8 byte order mark (skipped)."""
    duplicate_ids: list[DuplicateId] = field(default_factory=list)
    relinks: list[Relink] = field(default_factory=list)
    """Entries whose parent was lost, missing, later in the log or part of a cycle, and where they now hang."""
    log_cut: LogCut | None = None
    """The log is shorter than its metadata's record and lost entries (damage: never a fresh session)."""

    @property
    def clean(self) -> bool:
        return (
            self.torn_tail is None
            and not self.corrupt_lines
            and self.meta_problem is None
            and not self.bom
            and not self.duplicate_ids
            and not self.relinks
            and self.log_cut is None
        )

    def messages(self) -> list[str]:
        """Human-readable lines, one per problem."""
        out: list[str] = []
        if self.log_cut:
            out.append(self.log_cut.describe())
        if self.meta_problem:
            out.append(f"metadata rebuilt from the log: {self.meta_problem}")
        if self.bom:
            out.append("a UTF-8 byte order mark at the start of the log was skipped")
        if self.torn_tail:
            kept = f"; torn bytes kept in {self.torn_tail.saved_to}" if self.torn_tail.saved_to else ""
            out.append(f"torn last line at byte {self.torn_tail.offset} ({self.torn_tail.length} bytes){kept}")
        for c in self.corrupt_lines:
            out.append(f"corrupt entry skipped at {c.where()}: {c.reason}")
        for d in self.duplicate_ids:
            out.append(f"duplicate entry id {d.entry_id} at {d.where()} skipped (first at byte {d.first_offset})")
        for r in self.relinks:
            out.append(r.describe())
        if self.unknown_entries:
            out.append(f"{self.unknown_entries} entries of unknown (newer) types kept and skipped")
        return out


class ForkOrigin(msgspec.Struct, frozen=True):
    """Where a forked session came from."""

    session_id: str
    entry_id: str


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """What a store knows about a session without reading its log: one row of `sessions list`."""

    id: str
    title: str
    created_at: float
    updated_at: float
    entry_count: int
    cwd: str
    forked_from: ForkOrigin | None
    problem: str | None = None


def absolute_cwd(cwd: str) -> str:
    """The workspace a new session records: `cwd` made absolute against the current directory ("" stays "").

    A relative path would mean another folder to every command run from elsewhere, so stores never
    record one (sessions made before 0.3.0 may hold one).

    Args:
        cwd: The workspace as the caller named it.

    Returns:
        The absolute path, or "" when none was given.
    """
    return os.path.abspath(cwd) if cwd else ""


VIRTUAL_ROOT: Final = "lamina:/session"
"""How a database store's session files are shown to the model: `lamina:/session/data/…`, the same on every host."""
FileSource: TypeAlias = "bytes | Path | Iterable[bytes]"
"""What `put_file` takes: the bytes, a local file to copy, or chunks (streamed, never joined)."""


class ImportKeywords(TypedDict, total=False):
    """What an import of a whole session's entries may say besides them (a store's `import_entries`).

    `session_id` (None: a new id), `cwd`, `title`, `created_at`, `forked_from`, `leaf_id` (None:
    the last entry) and `files` (name and source, committed before the entries).
    """

    session_id: str | None
    cwd: str
    title: str
    created_at: float | None
    forked_from: ForkOrigin | None
    leaf_id: str | None
    files: Iterable[tuple[str, FileSource]]


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One file of a session: its name (relative to the session), size and SHA-256."""

    name: str
    size: int
    sha256: str


class SessionFiles(Protocol):
    """The file operations of an open session (every store implements them)."""

    def put_file(self, name: str, source: FileSource) -> FileInfo:
        """Store `source` as `name` (replacing it), durable when this returns: before any entry that names it."""
        ...

    def open_file(self, name: str) -> BinaryIO:
        """The file `name`, open for reading (streamed). Raises `FileNotFoundError` when there is none."""
        ...

    def list_files(self, prefix: str = "") -> list[FileInfo]:
        """The session's files whose names start with `prefix`, sorted by name."""
        ...

    def stat_file(self, name: str) -> FileInfo | None:
        """The file `name`, or None when the session has none by that name."""
        ...

    def local_file(self, name: str) -> Path:
        """A local path holding `name` (a folder name: every file under it), fetched into the cache if needed."""
        ...

    def shown_path(self, name: str = "") -> str:
        """How `name` (default: the session's root of files) is shown to the model."""
        ...

    def file_name(self, shown: str) -> str | None:
        """The name of the session file (or folder) shown as `shown`, or None when it is not one."""
        ...


class SessionLog(SessionFiles, Protocol):
    """An open session: the append-only log tree, its leaf and its folders of files.

    Opened for writing, it is the session's only writer until `close` (a second writer is refused
    with `SessionLockedError`); opened read-only, `append`, `branch` and `flush` refuse or do nothing.
    """

    @property
    def id(self) -> str: ...
    @property
    def leaf_id(self) -> str | None: ...
    @property
    def info(self) -> SessionSummary:
        """The session's metadata (title, working folder, times, entry count, fork origin)."""
        ...

    @property
    def report(self) -> LoadReport:
        """What the open found wrong and mended."""
        ...

    @property
    def attachments_dir(self) -> Path:
        """Where stored attachments live (files named by their sha256)."""
        ...

    @property
    def data_dir(self) -> Path:
        """Where large tool results, extracted attachment text and the user's-words archive live."""
        ...

    @property
    def plans_dir(self) -> Path:
        """Where plan files live."""
        ...

    def append(self, entry: E, *, durable: bool | None = None) -> E:
        """Append `entry` as a child of the leaf (stamped with id, parent and time); it becomes the leaf.

        Durable at once when `durable` is true (default: only critical entries), else at `flush`.
        """
        ...

    def flush(self) -> None:
        """The turn boundary: make every append so far durable, all or nothing."""
        ...

    @overload
    def branch(self, entry_id: str, *, first: None = None) -> None: ...
    @overload
    def branch(self, entry_id: str, *, first: E) -> E: ...
    def branch(self, entry_id: str, *, first: E | None = None) -> E | None:
        """Move the leaf to `entry_id`: the next append starts a new branch from there.

        With `first`, that entry is appended as the branch's first (a child of `entry_id`) in the
        same durable step: a crash leaves the old leaf, or the branch with it. Returns it stamped.
        """
        ...

    def children(self, entry_id: str) -> list[LogEntry]:
        """The entries whose parent is `entry_id`, in append order."""
        ...

    def get(self, entry_id: str) -> LogEntry: ...
    def path(self, entry_id: str | None = None) -> list[LogEntry]:
        """The entries from the root to `entry_id` (default: the leaf)."""
        ...

    def view(self, entry_id: str | None = None) -> ProviderView:
        """The provider view of the leaf (or of the path to `entry_id`): from the latest compaction boundary on."""
        ...

    def entries(self) -> list[LogEntry]:
        """Every entry of the session in append order (loads the whole history)."""
        ...

    def entries_loaded(self) -> list[LogEntry]:
        """The entries in memory, in append order (after a resume: from the latest boundary on)."""
        ...

    def loaded_count(self) -> int: ...
    def close(self) -> None:
        """Flush and let go of the session (its writer lease or lock). Safe to call twice."""
        ...

    def __enter__(self) -> SessionLog: ...
    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None, /
    ) -> None: ...


class SessionStore(Protocol):
    """Where sessions live."""

    @property
    def location(self) -> str:
        """The store, as a user would name it (a folder, or a URL without its password)."""
        ...

    def create(
        self, *, cwd: str = "", title: str = "", forked_from: ForkOrigin | None = None, session_id: str | None = None
    ) -> SessionLog:
        """Create an empty session and open it for writing.

        With `session_id`, the session gets that id, or `SessionExistsError` says a session has it
        (at most one of several concurrent creates with one id succeeds).
        """
        ...

    def open(self, session_id: str, *, writable: bool = True, wait: float = 0.0) -> SessionLog:
        """Open a session to continue it (reads from its latest compaction boundary only).

        A writer waits up to `wait` seconds for another writer to let go, then raises `SessionLockedError`.
        """
        ...

    def list(self) -> list[SessionSummary]:
        """Every session, most recently updated first, without reading their logs."""
        ...

    def fork(self, session_id: str, entry_id: str) -> SessionLog:
        """A new session holding a copy of the path to `entry_id` (and the files it points at).

        The fork is complete in the store when this returns (listed with its entries); like
        `create`, it is returned open for writing: close it, or use it in a `with` block.
        """
        ...

    def delete(self, session_id: str) -> None:
        """Remove a session and its files; refused (`SessionLockedError`) while a writer has it open."""
        ...

    def close(self) -> None:
        """Let go of the store's resources (connections). Sessions must be closed first."""
        ...
