"""Decoding log bytes into entries, with torn and corrupt lines reported, never skipped silently (pure).

Described in docs/session-log.md ("Decoding the log").
"""

from __future__ import annotations

import dataclasses
import json
import mmap
import re
import threading
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate, repeat
from operator import add
from pathlib import Path
from typing import Final, cast, overload

import msgspec

from lamina.errors import EntryDecodeError
from lamina.session._entries import Entry, LogEntry, UnknownEntry, decode_entry, encode_entry

BOM: Final = b"\xef\xbb\xbf"
"""A UTF-8 byte order mark: some editors add one when a log is saved; it is skipped and reported."""

_entry_decoder: Final = msgspec.json.Decoder(Entry)
_entry_encoder: Final = msgspec.json.Encoder()
_SALVAGE_ID: Final = re.compile(rb'"id"\s*:\s*"([A-Za-z0-9._:-]{1,128})"')
_SALVAGE_PARENT: Final = re.compile(rb'"parent_id"\s*:\s*(?:null|"([A-Za-z0-9._:-]{1,128})")')


@dataclass(frozen=True, slots=True)
class TornTail:
    """An incomplete last line: a writer died mid-append."""

    offset: int
    length: int
    saved_to: Path | None = None
    """Where the torn bytes were kept when the log was repaired."""


@dataclass(frozen=True, slots=True)
class CorruptLine:
    """A line that is not a valid entry; skipped, never silently."""

    offset: int
    line: int | None
    """1-based line number, known when the log was read from its start."""
    reason: str
    lost_id: str | None = None
    """The id the damaged line seems to have carried (salvaged from its bytes), if any."""
    lost_parent: str | None = None
    """Its parent id, when `lost_id` was salvaged too (None: a root, or not found)."""

    def where(self) -> str:
        return f"line {self.line} (byte {self.offset})" if self.line is not None else f"byte {self.offset}"


@dataclass(frozen=True, slots=True)
class Canonical:
    """A prefix of the log made of canonical lines (each the exact encoding of one entry), and its CRC-32.

    Recorded in the metadata as lines are written (each one checked as it is), so a full load can
    take these bytes without re-encoding them once their CRC-32 matches.
    """

    size: int = 0
    crc32: int = 0
    linked: int = 0
    """The part of the prefix (at most `size`) whose entries each name no parent or the id of an entry on
    an earlier line: every writer knows this of what it appends (the leaf it appends to is an entry of
    the log), and a full load that found no broken link does too. Tied to the bytes by the same CRC-32."""
    distinct: int = 0
    """The part of the prefix (at most `size`) whose entries' ids are all different, `max_id` the greatest
    of them: a writer knows it of an id greater than `max_id` (ids are made in increasing order) or of
    one its whole loaded log lacks, and of a whole log it loaded and found no duplicate id in."""
    max_id: str = ""


NO_CANONICAL: Final = Canonical()


@dataclass(frozen=True, slots=True)
class _Run:
    """Lines the fast path took whole: each is the encoding of its entry and a newline."""

    start: int
    end: int
    entries: list[LogEntry]
    count: int
    """The run's entries are `entries[:count]` (the list may grow after them; they never change)."""


class Offsets(Sequence[int]):
    """The byte offset of each entry's line, in file order.

    Runs of canonical lines are kept as where they start and end plus their entries, and the offset
    of each line is worked out only when asked for, from the lengths of the entries' encodings: a
    full load finds no line starts one by one. The last offset, and any near either end of a run,
    take a few encodings; the others work the whole list out once.
    """

    __slots__ = ("_flat", "_len", "_pieces")

    def __init__(self, offsets: list[int] | None = None) -> None:
        self._pieces: list[list[int] | _Run] = []
        self._flat: list[int] | None = offsets if offsets is not None else []
        """Every offset, once worked out (or when there never was a run)."""
        self._len = len(self._flat)

    @classmethod
    def run(cls, start: int, end: int, entries: list[LogEntry]) -> Offsets:
        out = cls()
        out._add(_Run(start, end, entries, len(entries)))
        return out

    def _add(self, piece: list[int] | _Run) -> None:
        size = len(piece) if isinstance(piece, list) else piece.count
        if not size:
            return
        if self._flat is not None and isinstance(piece, list):
            self._flat.extend(piece)
        else:
            if self._flat is not None:
                if self._flat:
                    self._pieces.append(self._flat)
                self._flat = None
            self._pieces.append(list(piece) if isinstance(piece, list) else piece)
        self._len += size

    def extend(self, other: Offsets) -> None:
        if other._flat is not None:
            self._add(other._flat)
        else:
            for piece in other._pieces:
                self._add(piece)

    def append(self, offset: int) -> None:
        if self._flat is not None:
            self._flat.append(offset)
        elif isinstance(self._pieces[-1], list):
            self._pieces[-1].append(offset)
        else:
            self._pieces.append([offset])
        self._len += 1

    def resolved(self) -> list[int]:
        """Every offset (worked out once)."""
        if self._flat is None:
            flat: list[int] = []
            for piece in self._pieces:
                flat.extend(piece if isinstance(piece, list) else _run_offsets(piece))
            self._flat, self._pieces = flat, []
        return self._flat

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...
    def __getitem__(self, index: int | slice) -> int | list[int]:
        if self._flat is not None or isinstance(index, slice):
            return self.resolved()[index]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError(index)
        first = 0
        for piece in self._pieces:
            size = len(piece) if isinstance(piece, list) else piece.count
            if index < first + size:
                return piece[index - first] if isinstance(piece, list) else _offset_in_run(piece, index - first)
            first += size
        raise IndexError(index)  # never: the pieces hold `_len` offsets

    def __iter__(self) -> Iterator[int]:
        return iter(self.resolved())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Offsets):
            return self.resolved() == other.resolved()
        if isinstance(other, list):
            return self.resolved() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __repr__(self) -> str:
        return f"Offsets({self.resolved()!r})"


_NEAR_END: Final = 4_096
"""An offset this close to the end of its run is worked out back from the end, one encoding per line."""


def _offset_in_run(run: _Run, index: int) -> int:
    if run.count - index <= _NEAR_END:
        pos = run.end
        for entry in run.entries[index : run.count]:
            pos -= len(encode_entry(entry)) + 1
        return pos
    if index <= _NEAR_END:
        pos = run.start
        for entry in run.entries[:index]:
            pos += len(encode_entry(entry)) + 1
        return pos
    return _run_offsets(run)[index]


def _run_offsets(run: _Run) -> list[int]:
    entries = run.entries if run.count == len(run.entries) else run.entries[: run.count]
    lengths = map(add, map(len, map(_entry_encoder.encode, entries)), repeat(1))
    offsets = list(accumulate(lengths, initial=run.start))
    offsets.pop()  # the end of the run
    return offsets


@dataclass(slots=True)
class LogScan:
    entries: list[LogEntry]
    offsets: Offsets
    """Byte offset of each entry's line, parallel to `entries`."""
    corrupt: list[CorruptLine]
    torn: TornTail | None
    end: int
    """Offset just after the last entry: after the last complete line, or after a last entry that only
    lacks its newline; a torn tail that is not an entry starts here (a repair truncates to it)."""
    bom: bool = False
    """The chunk started the log with a UTF-8 byte order mark (skipped)."""
    lines: list[int | None] | None = None
    """1-based line number of each entry, when known (only filled by the line-by-line path)."""
    canonical: Canonical | None = None
    """The canonical prefix of the log after this scan: from a scan of the whole log, the longest one it
    proved; from a scan of a tail, the given one carried to the end of the tail, when the tail is
    canonical and follows it; else None (nothing learnt)."""


CHUNK_BYTES: Final = 4 << 20
"""The log is decoded in chunks of about this size; damage sends only its own chunk to the slow path."""


Log = bytes | mmap.mmap
"""Log bytes: read into memory, or mapped (a long log is mapped while its writer reads it)."""


def scan_log(data: Log, *, base_offset: int, first_line: int | None, canonical: Canonical = NO_CANONICAL) -> LogScan:
    """Decode log bytes that start at `base_offset` (pure). `first_line` is its 1-based line number, if known.

    `canonical` is the canonical prefix the metadata records: lines it covers are taken without
    being re-encoded when the CRC-32 of their bytes matches (a scan of the whole log only).
    """
    start = 0
    bom = False
    if base_offset == 0 and data[: len(BOM)] == BOM:
        start, bom = len(BOM), True
    complete = data.rfind(b"\n") + 1  # the part made of whole lines; anything after is a torn tail
    if complete <= start:
        complete = start
    with memoryview(data) as view:
        trusted, head = _trusted_lines(data, view, start, complete, base_offset, canonical)
        if head is None:
            parts = _scan_parts(data, view, start, complete, base_offset, first_line, trusted)
        else:
            rest = _scan_parts(data, view, start, complete, base_offset, first_line, trusted, begin=trusted)
            parts = [(head, start), *rest]
        torn: TornTail | None = None
        log_end = base_offset + complete
        if complete < len(data):
            tail = _scan_lines(data[complete:], 0, base_offset + complete, _line_at(data, start, complete, first_line))
            parts.append((tail, complete))
            torn, log_end = tail.torn, tail.end
        found = _canonical_after(view, parts, start, complete, base_offset, canonical, trusted)
    if len(parts) == 1 and parts[0][0].lines is None:  # the common case: one clean chunk
        only = parts[0][0]
        return LogScan(only.entries, only.offsets, [], None, base_offset + complete, bom, canonical=found)
    slow = any(part.lines is not None for part, _ in parts)
    out = LogScan([], Offsets(), [], torn, log_end, bom, canonical=found)
    out.lines = [] if slow else None
    for part, at in parts:
        out.entries.extend(part.entries)
        out.offsets.extend(part.offsets)
        out.corrupt.extend(part.corrupt)
        if out.lines is not None:
            first = _line_at(data, start, at, first_line) if part.lines is None else None
            out.lines.extend(part.lines if part.lines is not None else _line_numbers(part.entries, first))
    return out


def _line_at(data: Log, start: int, pos: int, first_line: int | None) -> int | None:
    """The line number at `pos`, counted only when one is needed (damage)."""
    if first_line is None:
        return None
    if isinstance(data, bytes):
        return first_line + data.count(b"\n", start, pos)
    return first_line + data[start:pos].count(b"\n")


def _trusted_lines(
    data: Log, view: memoryview, start: int, complete: int, base_offset: int, canonical: Canonical
) -> tuple[int, LogScan | None]:
    """The lines the canonical record covers, found and decoded in one typed call.

    Returns where they end in `data` (0: nowhere, the CRC-32 does not match), and those lines
    decoded (None: they are not all entries this version knows).

    The lines are decoded while their CRC-32 is worked out beside the decode (zlib lets go of the
    interpreter lock), and the decode is kept only once the CRC-32 matches.
    """
    size = canonical.size
    if base_offset != 0 or size <= start or size > complete or data[size - 1 : size] != b"\n":
        return 0, None
    with view[:size] as covered, view[start:size] as lines:
        crc = _Crc32(covered)
        if crc.done and crc.result() != canonical.crc32:
            return 0, None
        entries: list[LogEntry] | None = None
        try:
            entries = cast("list[LogEntry]", _entry_decoder.decode_lines(lines))
        except msgspec.DecodeError:  # a type of a newer version (its chunk is read line by line)
            pass
        finally:
            matched = crc.result() == canonical.crc32
    if not matched:
        return 0, None
    if entries is None:
        return size, None
    return size, LogScan(entries, Offsets.run(start, size, entries), [], None, size)


CRC_THREAD_BYTES: Final = 1 << 20
"""A canonical prefix at least this long has its CRC-32 worked out on another thread, beside the decode."""


class _Crc32:
    """The CRC-32 of `data`, worked out on another thread when it is long; `result` waits for it."""

    __slots__ = ("_thread", "_value")

    def __init__(self, data: memoryview) -> None:
        self._value: list[int] = []
        self._thread: threading.Thread | None = None
        if len(data) < CRC_THREAD_BYTES:
            self._value.append(zlib.crc32(data))
            return
        self._thread = threading.Thread(target=lambda: self._value.append(zlib.crc32(data)), daemon=True)
        self._thread.start()

    @property
    def done(self) -> bool:
        return self._thread is None

    def result(self) -> int:
        """The CRC-32 (the thread has ended once this returns: the bytes are no longer in use)."""
        if self._thread is not None:
            self._thread.join()
        return self._value[0]


def _scan_parts(
    data: Log,
    view: memoryview,
    start: int,
    complete: int,
    base_offset: int,
    first_line: int | None,
    trusted: int,
    *,
    begin: int | None = None,
) -> list[tuple[LogScan, int]]:
    """Each chunk of whole lines from `begin` decoded, and where it starts.

    `begin` defaults to `start`, where line `first_line` starts; a chunk is decoded fast, or line by
    line where it is not canonical.
    """
    parts: list[tuple[LogScan, int]] = []
    pos = start if begin is None else begin
    while pos < complete:
        stop = trusted if pos < trusted else complete  # a chunk never straddles the end of the trusted lines
        end = data.find(b"\n", min(pos + CHUNK_BYTES, stop - 1)) + 1
        part = _scan_fast(data, view, pos, end, base_offset, trusted=end <= trusted)
        if part is None:  # damage or a line not written by this code: line by line, problems named
            part = _scan_lines(data[pos:end], 0, base_offset + pos, _line_at(data, start, pos, first_line))
        parts.append((part, pos))
        pos = end
    return parts


def _canonical_after(
    view: memoryview,
    parts: list[tuple[LogScan, int]],
    start: int,
    complete: int,
    base_offset: int,
    canonical: Canonical,
    trusted: int,
) -> Canonical | None:
    """The canonical prefix of the log as this scan leaves it (see `LogScan.canonical`)."""
    if base_offset == 0:  # the whole log: the fast chunks from its first byte on
        end = 0
        if start == 0:  # a byte order mark is no line
            for part, at in parts:
                if part.lines is not None or at != end:
                    break
                end = part.end
        if end == 0:
            return NO_CANONICAL
        if 0 < trusted <= end:  # the CRC-32 of the trusted lines is known: go on from there
            with view[trusted:end] as rest:
                return dataclasses.replace(canonical, size=end, crc32=zlib.crc32(rest, canonical.crc32))
        with view[:end] as lines:
            return Canonical(end, zlib.crc32(lines))
    # a tail: carry the record to its end when every chunk of whole lines was canonical
    if not base_offset <= canonical.size <= base_offset + complete:
        return None
    if any(part.lines is not None for part, at in parts if at < complete):
        return None
    at = canonical.size - base_offset
    if at > 0 and view[at - 1] != ord("\n"):
        return None
    with view[at:complete] as rest:
        return dataclasses.replace(canonical, size=base_offset + complete, crc32=zlib.crc32(rest, canonical.crc32))


def _line_numbers(entries: list[LogEntry], first: int | None) -> list[int | None]:
    """Line numbers of entries decoded by the fast path (one entry per line)."""
    if first is None:
        return [None] * len(entries)
    return list(range(first, first + len(entries)))


def _scan_fast(data: Log, view: memoryview, start: int, end: int, base_offset: int, *, trusted: bool) -> LogScan | None:
    """The whole lines `data[start:end]` in one typed decode, or None when they are not canonical.

    The chunk is read in place (no copy of it is made). Lines a matching canonical record covers
    (`trusted`) are known to be canonical; others are re-encoded and compared.
    """
    with view[start:end] as chunk:
        try:
            entries = cast("list[LogEntry]", _entry_decoder.decode_lines(chunk))  # no copy: a known-types list
        except msgspec.DecodeError:
            return None
    if not trusted:
        # the same bytes back, line for line: canonical lines (no duplicate keys, no blank or merged lines)
        encoded = _entry_encoder.encode_lines(entries)
        if len(encoded) != end - start:
            return None
        same = data.startswith(encoded, start) if isinstance(data, bytes) else data[start:end] == encoded
        if not same:
            return None
    return LogScan(entries, Offsets.run(base_offset + start, base_offset + end, entries), [], None, base_offset + end)


def is_canonical_line(line: bytes) -> bool:
    """Whether `line` (no newline) is exactly the encoding of the one entry it decodes to: what the fast path takes."""
    try:
        entry = _entry_decoder.decode(line)
    except msgspec.DecodeError:
        return False
    return _entry_encoder.encode(entry) == line


def _scan_lines(data: bytes, start: int, base_offset: int, first_line: int | None) -> LogScan:
    entries: list[LogEntry] = []
    offsets: list[int] = []
    lines: list[int | None] = []
    corrupt: list[CorruptLine] = []
    torn: TornTail | None = None
    whole_entry = False
    pos = start
    line_no = first_line
    size = len(data)
    while pos < size:
        nl = data.find(b"\n", pos)
        complete = nl != -1
        end = nl if complete else size
        line = data[pos:end]
        if line.strip():
            try:
                entry = _decode_checked(line)
            except EntryDecodeError as exc:
                if complete:
                    lost_id, lost_parent = _salvage(line)
                    corrupt.append(CorruptLine(base_offset + pos, line_no, str(exc), lost_id, lost_parent))
                else:
                    torn = TornTail(base_offset + pos, size - pos)
            else:
                entries.append(entry)
                offsets.append(base_offset + pos)
                lines.append(line_no)
                if not complete:  # a whole entry whose newline never made it: valid, keep it, count it
                    torn = TornTail(base_offset + pos, size - pos)
                    whole_entry = True
        if not complete:
            break
        pos = nl + 1
        if line_no is not None:
            line_no += 1
    # a torn entry that decoded whole is part of the log (it is counted), so the log ends after it
    end_offset = torn.offset if torn is not None and not whole_entry else base_offset + size
    return LogScan(entries, Offsets(offsets), corrupt, torn, end_offset, lines=lines)


def _decode_checked(line: bytes) -> LogEntry:
    """Decode one line, refusing duplicate keys (JSON allows them; the last would silently win)."""
    entry = decode_entry(line)
    if not entry.id:
        raise EntryDecodeError("the entry has no id")
    if not isinstance(entry, UnknownEntry) and encode_entry(entry) == line:
        return entry  # canonical: no room for a duplicate key
    try:
        msgspec.json.decode(line)  # all of it valid JSON, the fields a typed decode skipped too
    except msgspec.DecodeError as exc:
        raise EntryDecodeError(f"invalid JSON: {exc}") from None
    try:
        json.loads(line, object_pairs_hook=_no_duplicates)
    except _DuplicateKeyError as exc:
        raise EntryDecodeError(f"duplicate key {exc.key!r} in an object") from None
    except (ValueError, RecursionError):
        pass  # msgspec accepted it; the stdlib's stricter edges (huge numbers) are not our concern
    return entry


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(key)


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(key)
        out[key] = value
    return out


def _salvage(line: bytes) -> tuple[str | None, str | None]:
    """The id and parent id a damaged line seems to carry, for re-linking its children."""
    found_id = _SALVAGE_ID.search(line)
    found_parent = _SALVAGE_PARENT.search(line)
    if found_id is None or found_parent is None:
        return None, None
    parent = found_parent.group(1)
    return found_id.group(1).decode(), parent.decode() if parent is not None else None


@dataclass(frozen=True, slots=True)
class DuplicateId:
    """A second entry with an id already used earlier in the log: reported and skipped (the first is kept)."""

    entry_id: str
    offset: int
    line: int | None
    first_offset: int

    def where(self) -> str:
        return f"line {self.line} (byte {self.offset})" if self.line is not None else f"byte {self.offset}"
