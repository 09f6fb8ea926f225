"""The store's one door to the disk for writes (I/O).

Every byte and every directory change the session store makes goes through a `FileLayer`: the log
appends, `meta.json` replacements, torn-tail files, repairs, session folders and the lock file.
Reads go straight to the OS. The layer exists so that a test double can stand in for the disk and
"lose power": keep written-but-unsynced bytes and directory changes apart and drop them, the way
SQLite's test VFS and LazyFS check durability (a SIGKILL cannot, since the kernel keeps the page
cache).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol


class FileLayer(Protocol):
    """The write operations of the session store. Every method raises `OSError` on failure."""

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int: ...
    def write(self, fd: int, data: bytes) -> None:
        """Write all of `data` (a short write is retried; an error may leave part of it written)."""
        ...

    def fsync(self, fd: int) -> None: ...
    def close(self, fd: int) -> None: ...
    def ftruncate(self, fd: int, size: int) -> None: ...
    def replace(self, src: Path, dst: Path) -> None: ...
    def link(self, src: Path, dst: Path) -> None: ...
    def mkdir(self, path: Path) -> None: ...
    def fsync_dir(self, path: Path) -> None: ...


class OsFiles:
    """The real disk."""

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags, mode)

    def write(self, fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def close(self, fd: int) -> None:
        os.close(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def replace(self, src: Path, dst: Path) -> None:
        os.replace(src, dst)

    def link(self, src: Path, dst: Path) -> None:
        os.link(src, dst)

    def mkdir(self, path: Path) -> None:
        os.mkdir(path)

    def fsync_dir(self, path: Path) -> None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


OS_FILES: OsFiles = OsFiles()
"""The layer every store uses unless a test gives it another."""


def write_new_file(files: FileLayer, path: Path, data: bytes) -> None:
    """Create `path` (it must not exist), write `data` and fsync it; the folder is not fsynced here."""
    fd = files.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        files.write(fd, data)
        files.fsync(fd)
    finally:
        files.close(fd)
