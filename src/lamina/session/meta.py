"""The metadata file of a session: small, bounded, replaced atomically (I/O).

`meta.json` never holds unbounded text. It is replaced by writing a temporary file, fsyncing it,
`os.replace`-ing it over the old one and fsyncing the folder: a crash at any instant leaves the old
file or the new one, never neither (no unlink-then-rename).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import msgspec

from lamina.errors import SessionCorruptError

META_NAME: Final = "meta.json"


class ForkOrigin(msgspec.Struct, frozen=True):
    """Where a forked session came from."""

    session_id: str
    entry_id: str


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
    leaf_offset: int = 0
    """Log size when `leaf_id` was recorded; a longer log means later appends moved the leaf."""
    resume_offset: int = 0
    """Byte offset of the first entry the provider view needs (the latest boundary's first kept entry)."""
    log_size: int = 0
    entry_count: int = 0


_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(SessionMeta)


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_meta(folder: Path, meta: SessionMeta) -> None:
    """Replace `meta.json` atomically: temporary file, fsync, `os.replace`, fsync of the folder."""
    target = folder / META_NAME
    tmp = folder / f".{META_NAME}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, _encoder.encode(meta))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)
    fsync_dir(folder)


def read_meta(folder: Path) -> SessionMeta:
    """Read `meta.json`; raises `SessionCorruptError` naming the file when it is missing or invalid."""
    path = folder / META_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SessionCorruptError(path, "metadata file is missing") from None
    try:
        return _decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise SessionCorruptError(path, f"invalid metadata: {exc}") from None
