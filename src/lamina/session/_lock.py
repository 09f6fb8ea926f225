"""The one-writer-per-session lock, across processes (I/O).

An exclusive `flock` on `<session>/.lock`; the holder writes who it is into the file so that a
second writer's error can name it. The kernel drops the lock when the holder dies, so a crashed
writer never leaves a session locked.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path

from lamina.errors import SessionLockedError


class WriterLock:
    """An acquired write lock on one session folder; release with `release()`."""

    def __init__(self, folder: Path, *, wait: float = 0.0) -> None:
        """Take the lock; with `wait` > 0, wait up to that many seconds for the holder to let go."""
        self.path = folder / ".lock"
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = _read_holder(fd)
                    os.close(fd)
                    raise SessionLockedError(folder, holder) from None
                time.sleep(0.05)
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        holder = f"pid {os.getpid()} on {socket.gethostname()} since {since}"
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder.encode(), 0)
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _read_holder(fd: int) -> str:
    text = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
    return text or "another writer (holder unknown)"
