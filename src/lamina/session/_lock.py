"""The one-writer-per-session lock, across processes (I/O).

An exclusive `flock` on `<session>/.lock`; the holder writes who it is into the file so that a
second writer's error can name it. The kernel drops the lock when the holder dies, so a crashed
writer never leaves a session locked (a name left in the file of a dead holder is a stale lock
file, which `lamina sessions check` reports and the next writer overwrites).

The holder's name is written right after the lock is taken, so a writer that fails to take it
can find the file still empty for a moment: it waits briefly for the name rather than reporting
an unknown holder.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path
from typing import Final

from lamina.errors import SessionIOError, SessionLockedError
from lamina.session._files import OS_FILES, FileLayer

LOCK_NAME: Final = ".lock"
_NAME_WAIT_SECONDS: Final = 1.0


class WriterLock:
    """An acquired write lock on one session folder; release with `release()`."""

    def __init__(self, folder: Path, *, wait: float = 0.0, files: FileLayer = OS_FILES) -> None:
        """Take the lock; with `wait` > 0, wait up to that many seconds for the holder to let go."""
        self.path = folder / LOCK_NAME
        self._files = files
        try:
            fd = files.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise SessionIOError(self.path, "open the lock file", exc) from None
        try:
            self._take(fd, folder, wait)
            since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            holder = f"pid {os.getpid()} on {socket.gethostname()} since {since}".encode()
            # name first, then cut what a longer previous name left: the file is never empty while held
            os.pwrite(fd, holder, 0)
            os.ftruncate(fd, len(holder))
        except BaseException as exc:
            files.close(fd)
            if isinstance(exc, OSError):
                raise SessionIOError(self.path, "take the lock", exc) from None
            raise
        self._fd: int | None = fd

    @staticmethod
    def _take(fd: int, folder: Path, wait: float) -> None:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise SessionLockedError(folder, _read_holder(fd)) from None
                time.sleep(0.05)

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)  # a released lock names nobody
            fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError:
            pass  # closing the descriptor below drops the lock anyway
        finally:
            self._files.close(fd)


def _read_holder(fd: int) -> str:
    """The holder's name; it may be a moment late (written just after the lock was taken)."""
    deadline = time.monotonic() + _NAME_WAIT_SECONDS
    while True:
        text = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
        if text or time.monotonic() >= deadline:
            return text or "another writer (holder unknown)"
        time.sleep(0.01)


def lock_state(folder: Path) -> tuple[bool, str]:
    """Whether a writer holds the session now, and the name in the lock file (for `check`).

    Tries the lock without waiting and lets go at once; never writes the file.
    """
    path = folder / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False, ""
    try:
        name = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True, name
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False, name
    finally:
        os.close(fd)
