"""The store's one door to the disk for writes (I/O).

Described in docs/session-log.md ("The file layer").
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
from pathlib import Path
from typing import Final, Protocol

from lamina.session._session_files import NOFOLLOW

LINK_REFUSED: Final = "is a symbolic link (the store never follows links in a session folder)"
"""The reason given when a session file is a symbolic link."""


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
    def remove_tree(self, path: Path) -> None:
        """Remove a folder and everything in it (what is already gone is no error); the parent is not fsynced."""
        ...


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

    def remove_tree(self, path: Path) -> None:
        if sys.version_info >= (3, 12):
            shutil.rmtree(path, onexc=_gone_is_fine)
        else:
            shutil.rmtree(path, onerror=lambda function, name, info: _gone_is_fine(function, name, info[1]))


def _gone_is_fine(function: object, path: str, exc: BaseException) -> None:
    """`rmtree`'s error hook: an entry someone else removed first is no error (two deletes may race)."""
    if not isinstance(exc, FileNotFoundError):
        raise exc


OS_FILES: OsFiles = OsFiles()
"""The layer every store uses unless a test gives it another."""


def write_new_file(files: FileLayer, path: Path, data: bytes) -> None:
    """Create `path` (it must not exist), write `data` and fsync it; the folder is not fsynced here."""
    fd = files.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o644)
    try:
        files.write(fd, data)
        files.fsync(fd)
    finally:
        files.close(fd)


def is_link_refusal(exc: OSError) -> bool:
    """Whether `exc` is an open refused because the path is a symbolic link."""
    return exc.errno == errno.ELOOP


def is_same_file(fd: int, path: Path) -> bool:
    """Whether the file open as `fd` is still the one at `path` (same device and inode; a link is not followed)."""
    try:
        here = os.lstat(path)
        there = os.fstat(fd)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)
