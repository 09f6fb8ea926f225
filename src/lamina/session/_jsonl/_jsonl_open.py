"""Opening a JSONL session's log: reading and scanning it, dropping duplicate ids, mending links (I/O: reads).

`load_log` reads a session folder's log (all of it, or from the latest compaction boundary) into a
`LoadedLog`, which `JsonlSession` (in `_jsonl_write`) takes as its index. The folder's layout and
durability are described in `lamina.session._jsonl._jsonl_store`.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import gc
import mmap
import os
from collections.abc import Iterator
from operator import attrgetter
from pathlib import Path
from typing import Final

from lamina.errors import LaminaError, SessionCorruptError, SessionIOError, SessionNotFoundError
from lamina.session._entries import LogEntry, UnknownEntry
from lamina.session._jsonl._file_layer import LINK_REFUSED, is_link_refusal
from lamina.session._protocol import LoadReport
from lamina.session._scan import Canonical, DuplicateId, Log, LogScan, Offsets, scan_log
from lamina.session._session_files import open_for_reading
from lamina.session._tree import LostLine, find_broken_links, mend_links

LOG_NAME: Final = "log.jsonl"
_ENTRY_ID: Final = attrgetter("id")
MAP_MIN_BYTES: Final = 1 << 20
"""A writer maps a log range at least this long instead of reading it (no copy); readers always read."""
_MAP_POPULATE: Final[int | None] = getattr(mmap, "MAP_POPULATE", None)


def read_log(path: Path, start: int, end: int | None, *, canonical: Canonical, mapped: bool) -> tuple[LogScan, int]:
    """Scan the log at `path` from byte `start` (to `end`); returns the scan and the end of the bytes read.

    `canonical` is the record of the log's canonical prefix the scan may trust. With `mapped` (only
    a writer: a mapped file that shrinks under its reader kills the reader with SIGBUS, and only
    the lock holder ever shrinks the log, cutting a torn tail) a whole log of `MAP_MIN_BYTES` or
    more is scanned mapped in place, not copied. Raises the store's error for a failed read.
    """
    try:
        with open_for_reading(path) as f:
            if start == 0 and mapped and _MAP_POPULATE is not None:
                size = os.fstat(f.fileno()).st_size
                stop = size if end is None else min(end, size)
                if stop >= MAP_MIN_BYTES:
                    scanned = _scan_mapped(f.fileno(), stop, canonical)
                    if scanned is not None:
                        return scanned
            f.seek(start)
            data = f.read() if end is None else f.read(end - start)
    except OSError as exc:
        raise read_error(path, exc, start) from None
    return _scan(data, start, canonical), start + len(data)


def _scan_mapped(fd: int, stop: int, canonical: Canonical) -> tuple[LogScan, int] | None:
    """Scan the log's first `stop` bytes mapped in place (None: the file cannot be mapped)."""
    assert _MAP_POPULATE is not None
    try:
        mapped = mmap.mmap(fd, stop, flags=mmap.MAP_SHARED | _MAP_POPULATE, prot=mmap.PROT_READ)
    except (OSError, ValueError):  # a file system without mappings: read it instead
        return None
    with mapped:
        return _scan(mapped, 0, canonical), len(mapped)


def _scan(data: Log, start: int, canonical: Canonical) -> LogScan:
    return scan_log(data, base_offset=start, first_line=1 if start == 0 else None, canonical=canonical)


def read_error(path: Path, exc: OSError, offset: int) -> LaminaError:
    """The store's error for a failed read of the log: gone with its folder, missing, a link, or refused."""
    folder = path.parent
    if isinstance(exc, FileNotFoundError):
        if not folder.is_dir():  # deleted while it was read
            return SessionNotFoundError(folder.name, folder.parent)
        return SessionCorruptError(path, "session log is missing")
    if is_link_refusal(exc):
        return SessionCorruptError(path, LINK_REFUSED)
    return SessionIOError(path, "read the log", exc, offset=offset)


def starts_line(path: Path, offset: int) -> bool:
    """Whether a line of the log at `path` starts at byte `offset` (the byte before it is a newline)."""
    try:
        with open_for_reading(path) as f:
            if offset > os.fstat(f.fileno()).st_size:
                return False
            f.seek(offset - 1)
            return f.read(1) == b"\n"
    except OSError as exc:
        raise read_error(path, exc, offset) from None


@dataclasses.dataclass(slots=True)
class LoadedLog:
    """A log read from one byte on, its duplicate ids dropped and, when whole, its links mended."""

    scan: LogScan
    known_end: int
    """The end of the bytes read."""
    entries: list[LogEntry]
    ids: list[str] | None
    """The ids of `entries`, in order; None until first needed (listing the entries needs none)."""
    by_id: dict[str, LogEntry] | None
    """Id -> entry; None until first needed."""
    offsets: Offsets
    canonical: Canonical
    """The record of the canonical prefix, as the scan and the mending left it."""
    links: dict[str, str | None] = dataclasses.field(default_factory=dict)
    """Mended parents of entries whose written parent is lost, missing, later or in a cycle."""
    complete: bool = True
    """False when a tail holds damage only the whole log can mend (a corrupt line, a duplicate id, a later parent)."""
    learned: bool = False
    """A writer's record learned something its metadata should keep."""

    def order(self) -> list[str]:
        """The ids of `entries`, worked out (and kept) on first use."""
        if self.ids is None:
            self.ids = list(map(_ENTRY_ID, self.entries))
        return self.ids


def load_log(
    path: Path, start: int, end: int | None, *, canonical: Canonical, writer: bool, report: LoadReport
) -> LoadedLog:
    """Read the log at `path` from byte `start` (to `end`) and index it; `report` learns what was wrong.

    A whole log (`start` 0) is always mended; a tail that holds damage only the whole log can mend
    is marked not `complete`. `canonical` is the record the session holds; `writer` says whether it
    holds the lock (see `read_log`).
    """
    with _collector_paused():
        scan, known_end = read_log(path, start, end, canonical=canonical, mapped=writer)
        entries = scan.entries
        # the ids and the id index are built when first needed: listing the entries needs neither
        distinct = start == 0 and scan.canonical is not None and scan.canonical.distinct == scan.end
        ids = None if distinct else list(map(_ENTRY_ID, entries))
        by_id: dict[str, LogEntry] | None = None
        offsets = scan.offsets
        duplicates: list[DuplicateId] = []
        if ids is not None and len(set(ids)) != len(ids):
            by_id, ids, kept, duplicates = _drop_duplicates(scan, whole=start == 0)
            offsets = Offsets(kept)
            entries = [by_id[i] for i in ids]
        record = scan.canonical if scan.canonical is not None else canonical
        loaded = LoadedLog(scan, known_end, entries, ids, by_id, offsets, record)
        if scan.torn is not None or report.torn_tail is None or report.torn_tail.saved_to is None:
            report.torn_tail = scan.torn
        report.bom = scan.bom
        report.corrupt_lines = list(scan.corrupt)
        report.duplicate_ids = duplicates
        report.unknown_entries = 0 if scan.lines is None else sum(isinstance(e, UnknownEntry) for e in entries)
        if start == 0:
            _mend_whole(loaded, report, clean=not duplicates and not scan.corrupt, writer=writer)
        elif scan.corrupt or duplicates:
            loaded.complete = False
        elif broken := find_broken_links(entries, loaded.order()):
            if loaded.by_id is None:
                loaded.by_id = dict(zip(loaded.order(), entries, strict=True))
            loaded.complete = all(entries[i].parent_id not in loaded.by_id for i in broken)
        return loaded


def _mend_whole(loaded: LoadedLog, report: LoadReport, *, clean: bool, writer: bool) -> None:
    """Re-link the entries of a whole log whose parent is lost, missing, later or in a cycle.

    Skipped when the canonical record proves every entry names no parent or an earlier entry
    (and no id is used twice: the record proves it or the load has just checked); else the record
    learns it when it holds, and that the ids are distinct when a writer checked them all.
    """
    scan, canonical = loaded.scan, loaded.canonical
    if clean and canonical.linked == scan.end:
        report.relinks = []
    else:
        flat = loaded.offsets.resolved() if scan.corrupt else []
        lost = [LostLine(bisect.bisect_left(flat, c.offset), c.lost_id, c.lost_parent) for c in scan.corrupt]
        report.relinks = mend_links(loaded.entries, lost, ids=loaded.order())
        loaded.links = {r.entry_id: r.new_parent for r in report.relinks}
        if clean and not report.relinks:
            canonical = dataclasses.replace(canonical, linked=canonical.size)
    # every id was checked; only a writer keeps the record, so only a writer works out the greatest id
    learn = clean and writer and canonical.size == scan.end
    if learn and canonical.distinct != canonical.size:
        canonical = dataclasses.replace(canonical, distinct=canonical.size, max_id=max(loaded.order(), default=""))
    loaded.learned = writer and canonical != loaded.canonical  # kept at the next metadata write
    loaded.canonical = canonical


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a log is decoded.

    The entries cannot form cycles, and creating a hundred thousand of them would otherwise set off
    full collections over and over.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _drop_duplicates(
    scan: LogScan, *, whole: bool
) -> tuple[dict[str, LogEntry], list[str], list[int], list[DuplicateId]]:
    """Keep the first entry of each id; report the others with their line and byte offset."""
    by_id: dict[str, LogEntry] = {}
    first: dict[str, int] = {}
    ids: list[str] = []
    offsets: list[int] = []
    duplicates: list[DuplicateId] = []
    for index, (entry, offset) in enumerate(zip(scan.entries, scan.offsets, strict=True)):
        if entry.id in by_id:
            line = scan.lines[index] if scan.lines is not None else (index + 1 if whole else None)
            duplicates.append(DuplicateId(entry.id, offset, line, first[entry.id]))
            continue
        by_id[entry.id] = entry
        first[entry.id] = offset
        ids.append(entry.id)
        offsets.append(offset)
    return by_id, ids, offsets, duplicates
