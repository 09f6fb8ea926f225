"""The one-writer-per-session lock, across processes (I/O).

Described in docs/session-log.md ("The writer lock").
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import time
import weakref
from pathlib import Path
from typing import Final

from lamina.errors import SessionCorruptError, SessionIOError, SessionLockedError, SessionNotFoundError
from lamina.session._jsonl._file_layer import LINK_REFUSED, OS_FILES, FileLayer, is_same_file
from lamina.session._session_files import NOFOLLOW

LOCK_NAME: Final = ".lock"
_NAME_WAIT_SECONDS: Final = 1.0
_RETRY_SECONDS: Final = 0.01
_PROC_LOCKS: Final = Path("/proc/locks")

_held: Final[weakref.WeakSet[WriterLock]] = weakref.WeakSet()
"""Every lock this process holds (the at-fork handler lets go of them in a child)."""


class WriterLock:
    """An acquired write lock on one session folder; release with `release()`."""

    def __init__(self, folder: Path, *, wait: float = 0.0, files: FileLayer = OS_FILES) -> None:
        """Take the lock; with `wait` > 0, wait up to that many seconds for the holder to let go.

        Raises:
            SessionLockedError: another writer holds it (named), after `wait` seconds.
            SessionNotFoundError: the session folder is gone (deleted before or while the lock was taken).
            SessionCorruptError: the lock file is a symbolic link (never followed).
            SessionIOError: the lock file cannot be opened or written.
        """
        self.path = folder / LOCK_NAME
        self._files = files
        self._fd: int | None = None
        deadline = time.monotonic() + wait
        while True:
            fd = self._open(folder)
            try:
                taken = self._take(fd, folder, deadline)
            except BaseException:
                self._close(fd)
                raise
            if taken:
                break
            self._close(fd)  # the file locked was moved or replaced: lock the one at the path now
        try:
            since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            holder = f"pid {os.getpid()} on {socket.gethostname()} since {since}".encode()
            # name first, then cut what a longer previous name left: the file is never empty while held
            os.pwrite(fd, holder, 0)
            os.ftruncate(fd, len(holder))
        except BaseException as exc:
            self._close(fd)
            if isinstance(exc, OSError):
                raise SessionIOError(self.path, "take the lock", exc) from None
            raise
        self._fd = fd
        _held.add(self)

    def _open(self, folder: Path) -> int:
        try:
            return self._files.open(self.path, os.O_RDWR | os.O_CREAT | NOFOLLOW, 0o644)
        except FileNotFoundError:
            raise SessionNotFoundError(folder.name, folder.parent) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise SessionCorruptError(self.path, LINK_REFUSED) from None
            raise SessionIOError(self.path, "open the lock file", exc) from None

    def _take(self, fd: int, folder: Path, deadline: float) -> bool:
        """Lock `fd` (waiting until `deadline`); False when the file locked is no longer at the path."""
        unnamed_until: float | None = None
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _named_holder(fd)
                now = time.monotonic()
                if holder is None:  # not written yet, or the holder let go as we looked: try again
                    unnamed_until = unnamed_until if unnamed_until is not None else now + _NAME_WAIT_SECONDS
                    if now < unnamed_until:
                        time.sleep(_RETRY_SECONDS)
                        continue
                    holder = _unnamed_holder(fd, self.path)
                if now >= deadline:
                    raise SessionLockedError(folder, holder) from None
                time.sleep(0.05)
                continue
            if is_same_file(fd, self.path):
                return True
            if not folder.is_dir():
                raise SessionNotFoundError(folder.name, folder.parent)
            return False

    def _close(self, fd: int) -> None:
        """Close `fd` through the layer; if the layer fails, close it anyway (a leaked one would keep the lock).

        The descriptor is closed directly only while it is still open on this lock file (the layer may
        have closed it before failing, and the number been reused since).
        """
        try:
            self._files.close(fd)
        except OSError:
            with contextlib.suppress(OSError):  # closed already: nothing is held through it
                if is_same_file(fd, self.path):
                    os.close(fd)

    @property
    def held(self) -> bool:
        """Whether this process still holds the lock (false after `release`, and in a forked child)."""
        return self._fd is not None

    def verify(self) -> None:
        """Check that the locked file is still the one at the session's path.

        Raises:
            SessionIOError: the lock is gone, or its file was removed or replaced (the folder was
                deleted, moved or restored from a copy): another writer may now hold the session.
        """
        fd = self._fd
        if fd is None:
            reason = "the write lock is not held (released, or this process is a fork of the writer)"
            raise SessionIOError(self.path, "keep the write lock", OSError(errno.ENOLCK, reason))
        if not is_same_file(fd, self.path):
            reason = "the lock file was removed or replaced while the session was open (folder deleted or restored?)"
            raise SessionIOError(self.path, "keep the write lock", OSError(errno.ESTALE, reason))

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        _held.discard(self)
        try:
            os.ftruncate(fd, 0)  # a released lock names nobody
            fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError:
            pass  # closing the descriptor below drops the lock anyway
        finally:
            self._close(fd)

    def _forget_in_child(self) -> None:
        """In a forked child: close this process's copy of the descriptor, never unlocking (the parent holds it)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):  # nothing to close: the child holds nothing either way
                os.close(fd)


def _forget_locks_in_child() -> None:
    for lock in list(_held):
        lock._forget_in_child()
    _held.clear()


os.register_at_fork(after_in_child=_forget_locks_in_child)


def _named_holder(fd: int) -> str | None:
    """The name in the lock file, when there is one and the kernel does not name another process here."""
    text = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
    if not text:
        return None
    kernel = _kernel_holder(fd)
    return text if kernel is None or _names(text, kernel) else None


def _unnamed_holder(fd: int, path: Path) -> str:
    """Who holds a lock whose file names nobody (or a dead holder): the kernel's holder when it is known."""
    kernel = _kernel_holder(fd)
    if kernel is not None:
        return f"pid {kernel} on {socket.gethostname()} (its name is not written yet)"
    text = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
    return text or f"a writer that has not written its name into {path} yet"


def _names(text: str, pid: int) -> bool:
    """Whether the name `text` is that of process `pid` here (a name from another host cannot be checked)."""
    parts = text.split()
    if len(parts) < 4 or parts[0] != "pid" or parts[2] != "on":
        return True
    if parts[3] != socket.gethostname():
        return True
    return parts[1] == str(pid)


def _kernel_holder(fd: int) -> int | None:
    """The pid the kernel's lock table names as holding a `flock` on `fd`'s file (None: not known here)."""
    st = os.fstat(fd)
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        table = _PROC_LOCKS.read_text()
    except OSError:
        return None
    for line in table.splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF"; waiters have "->" after the number
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == key and fields[4].isdigit():
            pid = int(fields[4])
            return pid if pid > 0 else None
    return None


def held_now(folder: Path) -> bool:
    """Whether a writer holds the session now, seen without touching the lock where the kernel's table shows it.

    The table (`/proc/locks`) is read, so a writer opening the session at that moment is never
    refused; where there is none, the lock is tried as `lock_state` tries it.
    """
    try:
        fd = os.open(folder / LOCK_NAME, os.O_RDONLY | NOFOLLOW)
    except OSError:  # missing, or a link: no lock of ours
        return False
    try:
        st = os.fstat(fd)
        key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
        table = _PROC_LOCKS.read_text()
    except OSError:
        return lock_state(folder)[0]
    finally:
        os.close(fd)
    # "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF"; a waiter's line has "->" after the number
    return any(len(f) >= 6 and f[1] == "FLOCK" and f[5] == key for f in (line.split() for line in table.splitlines()))


def lock_state(folder: Path) -> tuple[bool, str]:
    """Whether a writer holds the session now, and the name in the lock file (for `check`).

    Tries the lock without waiting and lets go at once; never writes the file, never follows a link.
    """
    path = folder / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY | NOFOLLOW)
    except OSError:  # missing, or a link: no lock of ours
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
