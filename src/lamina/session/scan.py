"""Decoding log bytes into entries, with torn and corrupt lines reported, never skipped silently (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lamina.session.entries import EntryDecodeError, LogEntry, decode_entry


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


@dataclass(slots=True)
class LogScan:
    entries: list[tuple[int, LogEntry]]
    corrupt: list[CorruptLine]
    torn: TornTail | None
    end: int
    """Offset just after the last complete line (where a repair would truncate to)."""


def scan_log(data: bytes, *, base_offset: int, first_line: int | None) -> LogScan:
    """Decode log bytes that start at `base_offset` (pure). `first_line` is its 1-based line number, if known."""
    entries: list[tuple[int, LogEntry]] = []
    corrupt: list[CorruptLine] = []
    torn: TornTail | None = None
    pos = 0
    line_no = first_line
    size = len(data)
    while pos < size:
        nl = data.find(b"\n", pos)
        complete = nl != -1
        end = nl if complete else size
        line = data[pos:end]
        if line.strip():
            try:
                entry = decode_entry(line)
            except EntryDecodeError as exc:
                if complete:
                    corrupt.append(CorruptLine(base_offset + pos, line_no, str(exc)))
                else:
                    torn = TornTail(base_offset + pos, size - pos)
            else:
                entries.append((base_offset + pos, entry))
                if not complete:  # a whole entry whose newline never made it: valid, keep it
                    torn = TornTail(base_offset + pos, size - pos)
        if not complete:
            break
        pos = nl + 1
        if line_no is not None:
            line_no += 1
    end_offset = base_offset + (torn.offset if torn else size)
    return LogScan(entries, corrupt, torn, end_offset)
