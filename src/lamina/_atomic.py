"""Lamina's one atomic write (I/O: disk): a whole new file under a name, or the old one, never half of either.

A unique temporary name in the target's folder (so two writers never share one), the bytes, an
fsync of the file, `os.replace` over the name, an fsync of the folder. The steps go through a
`WriteSteps` (the session store passes its file layer; the Write tool a held folder), so a test
can stop a writer between any two of them. See docs/session-log.md ("The file layer").
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Final, Protocol

NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_CREATE: Final = (
    os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
)


class WriteSteps(Protocol):
    """The disk operations an atomic write is made of; each raises `OSError` on failure."""

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int: ...
    def write(self, fd: int, data: bytes) -> None: ...
    def fsync(self, fd: int) -> None: ...
    def close(self, fd: int) -> None: ...
    def replace(self, src: Path, dst: Path) -> None: ...
    def fsync_dir(self, path: Path) -> None: ...


class DiskSteps:
    """The real disk; with `folder`, every path is a name inside that held folder (a descriptor)."""

    def __init__(self, folder: int | None = None) -> None:
        self.folder = folder

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags, mode, dir_fd=self.folder)

    def write(self, fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def close(self, fd: int) -> None:
        os.close(fd)

    def replace(self, src: Path, dst: Path) -> None:
        os.replace(src, dst, src_dir_fd=self.folder, dst_dir_fd=self.folder)

    def fsync_dir(self, path: Path) -> None:
        # a held folder may be an O_PATH descriptor, which cannot be fsynced: open it for reading
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0), dir_fd=self.folder)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def unlink(self, path: Path) -> None:
        os.unlink(path, dir_fd=self.folder)


DISK: Final = DiskSteps()
"""The steps every caller uses unless it holds a folder or a test gives it others."""


def temporary_name(path: Path) -> Path:
    """A name beside `path` no other writer picks: `.NAME.<random>.tmp`."""
    return path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")


def atomic_write(
    path: Path,
    data: bytes | Callable[[int], object],
    *,
    mode: int = 0o644,
    durable: bool = True,
    steps: WriteSteps = DISK,
) -> None:
    """Make `data` the whole content of `path`, atomically.

    Args:
        path: The file to replace or create (its folder must exist).
        data: The bytes, or a function that writes them to the open descriptor it is given.
        mode: The new file's permission bits (before the umask).
        durable: Fsync the file and its folder (False: atomic, but a power loss may undo it).
        steps: The disk operations (the real disk by default).

    Raises:
        OSError: A step failed; `path` is then as it was and the temporary file is gone.
    """
    temporary = temporary_name(path)
    fd = steps.open(temporary, _CREATE, mode)
    try:
        try:
            if isinstance(data, bytes):
                steps.write(fd, data)
            else:
                data(fd)
            if durable:
                steps.fsync(fd)
        finally:
            steps.close(fd)
        steps.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            if isinstance(steps, DiskSteps):
                steps.unlink(temporary)
            else:
                os.unlink(temporary)
        raise
    if durable:
        steps.fsync_dir(path.parent)
