"""Decoding log bytes into entries, with torn and corrupt lines reported, never skipped silently (pure).

The fast path decodes a whole chunk of the log in one typed msgspec call (`decode_lines`) and
accepts it only when re-encoding the entries gives back exactly the same bytes: the log is then
canonical (written by this code: no duplicate keys, no unknown fields, no odd spacing) and every
line is one entry. Anything else (a torn tail, a corrupt line, an entry of a newer type or
version, a hand-edited line) sends its chunk to decoding line by line, which reports each problem
with its line number and byte offset.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final, cast

import msgspec

from lamina.errors import EntryDecodeError
from lamina.session.entries import Entry, LogEntry, UnknownEntry, decode_entry, encode_entry

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


@dataclass(slots=True)
class LogScan:
    entries: list[LogEntry]
    offsets: list[int]
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


CHUNK_BYTES: Final = 4 << 20
"""The log is decoded in chunks of about this size; damage sends only its own chunk to the slow path."""


def scan_log(data: bytes, *, base_offset: int, first_line: int | None) -> LogScan:
    """Decode log bytes that start at `base_offset` (pure). `first_line` is its 1-based line number, if known."""
    start = 0
    bom = False
    if base_offset == 0 and data.startswith(BOM):
        start, bom = len(BOM), True
    complete = data.rfind(b"\n") + 1  # the part made of whole lines; anything after is a torn tail
    if complete <= start:
        complete = start
    parts: list[tuple[LogScan, int]] = []  # each decoded chunk and where it starts in `data`

    def line_at(pos: int) -> int | None:  # counted only when a line number is needed (damage)
        return None if first_line is None else first_line + data.count(b"\n", start, pos)

    pos = start
    while pos < complete:
        end = data.find(b"\n", min(pos + CHUNK_BYTES, complete - 1)) + 1
        part = _scan_fast(data, pos, end, base_offset)
        if part is None:  # damage or a line not written by this code: line by line, problems named
            part = _scan_lines(data[pos:end], 0, base_offset + pos, line_at(pos))
        parts.append((part, pos))
        pos = end
    torn: TornTail | None = None
    log_end = base_offset + complete
    if complete < len(data):
        tail = _scan_lines(data, complete, base_offset, line_at(complete))
        parts.append((tail, complete))
        torn, log_end = tail.torn, tail.end
    if len(parts) == 1 and parts[0][0].lines is None:  # the common case: one clean chunk
        only = parts[0][0]
        return LogScan(only.entries, only.offsets, [], None, base_offset + complete, bom)
    slow = any(part.lines is not None for part, _ in parts)
    out = LogScan([], [], [], torn, log_end, bom)
    out.lines = [] if slow else None
    for part, at in parts:
        out.entries.extend(part.entries)
        out.offsets.extend(part.offsets)
        out.corrupt.extend(part.corrupt)
        if out.lines is not None:
            out.lines.extend(part.lines if part.lines is not None else _line_numbers(part.entries, line_at(at)))
    return out


def _line_numbers(entries: list[LogEntry], first: int | None) -> list[int | None]:
    """Line numbers of entries decoded by the fast path (one entry per line)."""
    if first is None:
        return [None] * len(entries)
    return list(range(first, first + len(entries)))


def _scan_fast(data: bytes, start: int, end: int, base_offset: int) -> LogScan | None:
    """The whole lines `data[start:end]` in one typed decode, or None when they are not canonical.

    The chunk is read in place (no copy of it is made): decoded through a view, compared at its offset.
    """
    with memoryview(data) as whole, whole[start:end] as chunk:
        try:
            entries = cast("list[LogEntry]", _entry_decoder.decode_lines(chunk))  # no copy: a known-types list
        except msgspec.DecodeError:
            return None
    # the same bytes back, line for line: canonical lines (no duplicate keys, no blank or merged lines)
    encoded = _entry_encoder.encode_lines(entries)
    if len(encoded) != end - start or not data.startswith(encoded, start):
        return None
    offsets = [base_offset + start]
    pos = start
    find = data.find
    append = offsets.append
    for _ in range(len(entries) - 1):
        pos = find(b"\n", pos) + 1
        append(base_offset + pos)
    return LogScan(entries, offsets, [], None, base_offset + end)


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
    return LogScan(entries, offsets, corrupt, torn, end_offset, lines=lines)


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
