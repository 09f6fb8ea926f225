"""The metadata file of a session: small, bounded, replaced atomically (I/O).

`meta.json` never holds unbounded text. It is replaced by writing a temporary file, fsyncing it,
`os.replace`-ing it over the old one and fsyncing the folder: a crash or power loss at any instant
leaves the old file or the new one, never neither (no unlink-then-rename). The metadata is only a
cache of facts the log holds; an open reconciles it with the log and rebuilds it when it disagrees.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Final

import msgspec

from lamina._atomic import atomic_write
from lamina.errors import SessionCorruptError, SessionIOError
from lamina.session._jsonl._file_layer import LINK_REFUSED, OS_FILES, FileLayer, is_link_refusal
from lamina.session._protocol import ForkOrigin
from lamina.session._scan import Canonical
from lamina.session._session_files import open_for_reading

META_NAME: Final = "meta.json"
META_MAX_BYTES: Final = 64 * 1024
"""A metadata file larger than this is not ours: it is reported, not read."""
META_REFRESH_SECONDS: Final = 5.0
"""Longest time a flush leaves `meta.json` behind the log (branches and compactions are written at once)."""

_Offset = Annotated[int, msgspec.Meta(ge=0)]
_Crc32 = Annotated[int, msgspec.Meta(ge=0, le=0xFFFFFFFF)]


class SessionMeta(msgspec.Struct, frozen=True, kw_only=True):
    """The small metadata file of a session. Every field is bounded in size."""

    format: int = 1
    id: str
    created_at: float
    updated_at: float
    cwd: str = ""
    title: str = ""
    forked_from: ForkOrigin | None = None
    leaf_id: str | None = None
    leaf_offset: _Offset = 0
    """Log size when `leaf_id` was recorded; a longer log means later appends moved the leaf."""
    resume_offset: _Offset = 0
    """Byte offset of the first entry the provider view needs (the latest boundary's first kept entry)."""
    log_size: _Offset = 0
    entry_count: _Offset = 0
    canonical_size: _Offset = 0
    """Length of the log's prefix whose lines were each checked canonical as they were written (or by a
    full load): each line exactly the encoding of the one entry it holds. 0: none recorded."""
    canonical_crc32: _Crc32 = 0
    """CRC-32 of that prefix: a full load takes those lines without re-encoding them when their bytes match it."""
    canonical_linked: _Offset = 0
    """Length of the part of that prefix whose entries each name no parent or an entry on an earlier line
    (known as they were appended, or from a full load): a full load that finds no duplicate id takes
    their links as they are, without looking for broken ones."""
    canonical_distinct: _Offset = 0
    """Length of the part of that prefix whose entries' ids are all different (known as they were
    appended, or from a full load): a full load takes them without looking for duplicates."""
    canonical_max_id: Annotated[str, msgspec.Meta(max_length=256)] = ""
    """The greatest id in that part: an id made later (ids are made in increasing order) is new."""


_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(SessionMeta)


def fsync_dir(folder: Path, files: FileLayer = OS_FILES) -> None:
    """Make the folder's entries (created, renamed files) durable."""
    files.fsync_dir(folder)


def write_meta(folder: Path, meta: SessionMeta, files: FileLayer = OS_FILES) -> None:
    """Replace `meta.json` atomically: temporary file, fsync, `os.replace`, fsync of the folder.

    Raises `SessionIOError` naming the file when the disk refuses (the old file is then intact).
    """
    target = folder / META_NAME
    try:
        atomic_write(target, _encoder.encode(meta), steps=files)
    except OSError as exc:
        raise SessionIOError(target, "replace the metadata", exc) from None


def read_meta(folder: Path) -> SessionMeta:
    """Read `meta.json`; raises `SessionCorruptError` naming the file when it is missing, unreadable or invalid."""
    path = folder / META_NAME
    try:
        with open_for_reading(path) as f:
            raw = f.read(META_MAX_BYTES + 1)
    except FileNotFoundError:
        raise SessionCorruptError(path, "metadata file is missing") from None
    except IsADirectoryError:
        raise SessionCorruptError(path, "metadata file is a folder") from None
    except OSError as exc:
        if is_link_refusal(exc):
            raise SessionCorruptError(path, LINK_REFUSED) from None
        raise SessionCorruptError(path, f"metadata file cannot be read: {exc.strerror or exc}") from None
    if len(raw) > META_MAX_BYTES:
        raise SessionCorruptError(path, f"metadata file is larger than {META_MAX_BYTES} bytes")
    try:
        return _decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise SessionCorruptError(path, f"invalid metadata: {exc}") from None


def canonical_of(meta: SessionMeta) -> Canonical:
    """The canonical record `meta` holds (a part that claims more than its prefix is dropped)."""
    size = meta.canonical_size
    linked = meta.canonical_linked if meta.canonical_linked <= size else 0
    distinct = meta.canonical_distinct if meta.canonical_distinct <= size else 0
    return Canonical(size, meta.canonical_crc32, linked, distinct, meta.canonical_max_id if distinct else "")


def unrecorded(meta: SessionMeta) -> SessionMeta:
    """`meta` with no record of the log (size, count, leaf, canonical prefix): the next open counts afresh."""
    return msgspec.structs.replace(
        meta,
        leaf_id=None,
        leaf_offset=0,
        resume_offset=0,
        log_size=0,
        entry_count=0,
        canonical_size=0,
        canonical_crc32=0,
        canonical_linked=0,
        canonical_distinct=0,
        canonical_max_id="",
    )


@dataclass(frozen=True, slots=True)
class LogFacts:
    """What the metadata records of the log: its leaf, end, entry count, canonical prefix and resume offset."""

    leaf: str | None
    size: int
    count: int
    canonical: Canonical
    resume_offset: int


class MetaKeeper:
    """A session's metadata as its writer keeps it: what it says, whether it is behind the log, when to replace it."""

    def __init__(self, meta: SessionMeta, *, write: Callable[[SessionMeta], None], clock: Callable[[], float]) -> None:
        self.meta = meta
        self._write = write
        self._clock = clock
        self.dirty = False
        """The log moved past what the file says."""
        self.urgent = False
        """The next flush replaces the file (after a branch, a compaction, a new title, a repair)."""
        self._written_at = time.monotonic()

    def due(self) -> bool:
        """The file is behind, and urgently or for `META_REFRESH_SECONDS`: a flush replaces it now."""
        return self.dirty and (self.urgent or time.monotonic() - self._written_at >= META_REFRESH_SECONDS)

    def differs(self, facts: LogFacts) -> bool:
        """What the metadata says of the log's end, leaf, count or resume offset is not `facts`."""
        meta = self.meta
        return (
            meta.log_size != facts.size
            or meta.leaf_id != facts.leaf
            or meta.leaf_offset != facts.size
            or meta.entry_count != facts.count
            or meta.resume_offset != facts.resume_offset
        )

    def save(self, facts: LogFacts) -> str | None:
        """Replace the file with the metadata of `facts`; returns why it could not be (the next open reconciles)."""
        canonical = facts.canonical
        self.meta = msgspec.structs.replace(
            self.meta,
            resume_offset=facts.resume_offset,
            updated_at=self._clock(),
            leaf_id=facts.leaf,
            leaf_offset=facts.size,
            log_size=facts.size,
            entry_count=facts.count,
            canonical_size=canonical.size,
            canonical_crc32=canonical.crc32,
            canonical_linked=canonical.linked,
            canonical_distinct=canonical.distinct,
            canonical_max_id=canonical.max_id,
        )
        try:
            self._write(self.meta)
        except SessionIOError as exc:
            return f"metadata could not be written: {exc}"
        self.dirty = self.urgent = False
        self._written_at = time.monotonic()
        return None
