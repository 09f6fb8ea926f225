"""Whether a workspace path lies inside the allowed folders, and opening it so that it cannot be raced (I/O: disk).

`outside_roots` is discovery's check (context files, memory, skills, sources): a file read only when
its real path is inside a root. `locate` is the tools': it walks a path one name at a time from held
descriptors (`openat` with `O_NOFOLLOW`), reading each link itself, so the file a tool opens or
replaces is the one it checked, and a link re-pointed meanwhile cannot lead it out. See docs/security.md.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final

from lamina._atomic import DISK, DiskSteps, atomic_write
from lamina.errors import UsageError

BY_DESCRIPTOR: Final = {os.open, os.readlink, os.mkdir, os.stat, os.rename, os.unlink} <= os.supports_dir_fd
"""Whether paths are resolved by descriptor here (POSIX); elsewhere `locate` checks the real path, then opens it."""
MAX_LINKS: Final = 40
"""Links followed in one path before it is refused as a loop (the kernel's own limit)."""
_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
_FOLDER_FLAGS: Final = (getattr(os, "O_PATH", 0) or os.O_RDONLY) | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC
# Non-blocking so that a FIFO cannot hang the open; the tools refuse anything but a regular file.
READ_FLAGS: Final = os.O_RDONLY | _CLOEXEC | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
"""Flags `Located.open` uses unless told otherwise (`O_NOFOLLOW` is always added)."""
# What open(O_NOFOLLOW) answers for a link: ELOOP (Linux, macOS), EMLINK (FreeBSD), ENOTDIR with O_DIRECTORY.
_LINK_ERRNOS: Final = frozenset({errno.ELOOP, errno.EMLINK, errno.ENOTDIR})


def outside_roots(path: str | os.PathLike[str], roots: Iterable[str | os.PathLike[str]]) -> str | None:
    """Why `path` may not be read (its real path lies outside every root), or None when it is inside one."""
    real = os.path.realpath(path)
    for root in roots:
        top = os.path.realpath(root)
        if real == top or real.startswith(top.rstrip(os.sep) + os.sep):
            return None
    try:
        shown = os.readlink(path) if os.path.islink(path) else real
    except OSError:
        shown = real
    return f"resolves outside the working directory (to {shown})"


class PathEscapeError(UsageError, PermissionError):
    """A path leads outside the allowed folders, or no longer leads where it was checked (a link changed).

    Also a `PermissionError` (`errno` EACCES, `strerror` the reason, `filename` the real path), so a
    caller handling `OSError` handles it too.
    """

    def __init__(self, path: str, reason: str) -> None:
        """Name the path and why it may not be used.

        Args:
            path: The real path the walk reached.
            reason: Why it may not be used (outside the roots, or changed since the check).
        """
        super().__init__(errno.EACCES, reason, path)


@dataclass(slots=True)
class _Step:
    """One folder on the way: its name, its descriptor, and whether this walk opened it (and closes it)."""

    name: str
    fd: int
    owned: bool


class Located:
    """A path resolved by `locate`: its folder held open by descriptor, and its last name.

    Use it in a `with` block (or `close` it): it holds a descriptor for each folder on the way.
    """

    def __init__(self, steps: list[_Step], name: str, real: str, *, by_name: bool = False) -> None:
        self._steps = steps
        self._by_name = by_name
        self.name = name
        """The last name, looked up in the held folder; `.` when the path is that folder."""
        self.real = real
        """The real path: every link on the way resolved, as the roots were checked against."""

    def identity(self) -> tuple[int, int]:
        """`(st_dev, st_ino)` of what the location names (a link not followed), to tell it from another.

        Raises:
            OSError: Nothing has that name.
        """
        name, folder = self._at()
        st = os.fstat(folder) if name == "." and folder is not None else os.stat(name, dir_fd=folder)
        return st.st_dev, st.st_ino

    def _at(self) -> tuple[str, int | None]:
        """The name to use and the folder descriptor to use it in (None: the real path, by name)."""
        if self._by_name:
            return self.real, None
        if not self._steps:
            raise ValueError(f"{self.real}: the location is closed")
        return self.name, self._steps[-1].fd

    def open(self, flags: int = READ_FLAGS) -> int:
        """Open the located file (never through a link) and return the descriptor, which the caller closes.

        Raises:
            PathEscapeError: The last name became a link since it was located.
            OSError: The file cannot be opened (missing, not permitted, ...).
        """
        name, folder = self._at()
        try:
            return os.open(name, flags | (_NOFOLLOW if folder is not None else 0), dir_fd=folder)
        except OSError as exc:
            if folder is not None and exc.errno in _LINK_ERRNOS and _link(name, folder) is not None:
                raise PathEscapeError(self.real, "it became a link after it was checked") from None
            raise

    def lstat(self) -> os.stat_result | None:
        """The located name's own status (a link is not followed), or None when nothing has that name."""
        name, folder = self._at()
        try:
            return os.stat(name, dir_fd=folder, follow_symlinks=folder is None)
        except FileNotFoundError:
            return None

    def replace(self, data: bytes) -> int | None:
        """Make `data` the file's content: a temporary file in the held folder, renamed over the name.

        An existing file keeps its permission bits; a crash never leaves it half written.

        Returns:
            The previous file's size, or None when the file is new.

        Raises:
            IsADirectoryError: The name is a folder.
            PathEscapeError: The name became a link after it was located.
            OSError: The file cannot be written.
        """
        name, folder = self._at()
        before = self.lstat()
        if self.name == "." or (before is not None and stat.S_ISDIR(before.st_mode)):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), self.real)
        if folder is not None and before is not None and stat.S_ISLNK(before.st_mode):
            raise PathEscapeError(self.real, "it became a link after it was checked")
        kept = stat.S_IMODE(before.st_mode) if before is not None and stat.S_ISREG(before.st_mode) else None

        def write(fd: int) -> None:
            DISK.write(fd, data)
            if kept is not None:
                os.fchmod(fd, kept)

        # 0o666 lets the umask decide a new file's mode, as for any other program creating a file.
        atomic_write(Path(name), write, mode=0o666, steps=DiskSteps(folder))
        return None if before is None else before.st_size

    def close(self) -> None:
        """Close the descriptors this location opened."""
        steps, self._steps = self._steps, []
        for step in steps:
            if step.owned:
                with contextlib.suppress(OSError):
                    os.close(step.fd)

    def __enter__(self) -> Located:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def locate(
    path: str | os.PathLike[str],
    roots: Sequence[str | os.PathLike[str]],
    *,
    expect: str | os.PathLike[str] | None = None,
    folder: bool = False,
    make_folders: bool = False,
    start: Located | None = None,
) -> Located:
    """Resolve `path` one name at a time from descriptors, following links only as this function reads them.

    Every folder on the way is opened with `O_NOFOLLOW` relative to the one before; a link is read
    (`readlinkat`) and its target walked the same way (an absolute one from `/`), `..` goes back to
    the folder held before. The kernel never follows a link, so a link re-pointed during the walk
    cannot send it anywhere but where its reading says; the result must lie inside `roots`.

    Args:
        path: An absolute path, or one relative to `start`.
        roots: The folders the result must lie in (resolved, real paths).
        expect: The real path a check found earlier: a different one now means a link changed since.
        folder: The path names a folder, which is held open itself (for `start`, or to list it).
        make_folders: Create missing folders on the way (inside `roots` only).
        start: A folder located earlier (with `folder=True`) that a relative `path` starts from;
            it must stay open while the result is used.

    Returns:
        The location; close it after use.

    Raises:
        PathEscapeError: The path leads outside `roots`, or elsewhere than `expect`.
        OSError: A name on the way is missing, not a folder, not permitted, or links loop.
    """
    text = os.fspath(path)
    tops = tuple(os.fspath(root) for root in roots)
    if not BY_DESCRIPTOR:
        return _located_by_name(text if start is None else os.path.join(start.real, text), tops, expect, make_folders)
    if start is None:
        if not os.path.isabs(text):
            raise ValueError(f"locate needs an absolute path or a start folder, got {text!r}")
        steps = [_Step("", os.open("/", _FOLDER_FLAGS), owned=True)]
    else:
        if start.name != ".":
            raise ValueError("start must be a folder located with folder=True")
        steps = [_Step(step.name, step.fd, owned=False) for step in start._steps]
    try:
        name = _walk(steps, deque(text.split("/")), tops, folder=folder, make_folders=make_folders)
        real = _real(steps, name)
        _check(real, tops, expect)
    except BaseException:
        Located(steps, ".", "/").close()
        raise
    return Located(steps, name, real)


def _walk(steps: list[_Step], pending: deque[str], roots: tuple[str, ...], *, folder: bool, make_folders: bool) -> str:
    """Walk `pending` from the last of `steps`, holding each folder; the last name, or `.` for a folder."""
    links = 0
    while pending:
        part = pending.popleft()
        if part in ("", "."):
            continue
        if part == "..":
            if len(steps) > 1:
                _drop(steps)
            continue
        at = steps[-1].fd
        if not folder and not any(rest not in ("", ".") for rest in pending):
            target = _link(part, at)
            if target is None:
                return part if not pending else _last_folder(steps, part)
        else:
            try:
                steps.append(_Step(part, os.open(part, _FOLDER_FLAGS | _NOFOLLOW, dir_fd=at), owned=True))
                continue
            except FileNotFoundError:
                if not make_folders:
                    raise
                _make_folder(steps, part, roots)
                pending.appendleft(part)  # counted below: a folder removed as fast as it is made cannot loop
                target = None
            except OSError as exc:
                target = _link(part, at) if exc.errno in _LINK_ERRNOS else None
                if target is None:
                    raise
        links += 1
        if links > MAX_LINKS:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), part)
        if target is None:
            continue
        if target.startswith("/"):
            while len(steps) > 1:
                _drop(steps)
        pending.extendleft(reversed(target.split("/")))
    return "."


def _last_folder(steps: list[_Step], part: str) -> str:
    """A last name followed by `/` or `/.`: it must be a folder (held like the others)."""
    steps.append(_Step(part, os.open(part, _FOLDER_FLAGS | _NOFOLLOW, dir_fd=steps[-1].fd), owned=True))
    return "."


def _link(name: str, folder: int) -> str | None:
    """The target of the link `name` in `folder`, or None when `name` is no link (or does not exist).

    Raises:
        OSError: The name cannot be looked at (not permitted, ...).
    """
    try:
        return os.readlink(name, dir_fd=folder)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.ENOENT):
            return None
        raise


def _make_folder(steps: list[_Step], name: str, roots: tuple[str, ...]) -> None:
    """Create the folder `name` in the last held folder, if its real path is inside `roots`."""
    real = _real(steps, name)
    _check(real, roots, None)
    with contextlib.suppress(FileExistsError):  # made meanwhile: the walk opens whatever is there now
        os.mkdir(name, 0o777, dir_fd=steps[-1].fd)


def _drop(steps: list[_Step]) -> None:
    step = steps.pop()
    if step.owned:
        os.close(step.fd)


def _real(steps: list[_Step], name: str) -> str:
    folder = "/" + "/".join(step.name for step in steps[1:])
    return folder if name == "." else folder.rstrip("/") + "/" + name


def _check(real: str, roots: tuple[str, ...], expect: str | os.PathLike[str] | None) -> None:
    if not any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots):
        raise PathEscapeError(real, f"it resolves outside the allowed folders (to {real})")
    if expect is not None and real != os.fspath(expect):
        raise PathEscapeError(real, f"it changed after it was checked: it now resolves to {real}")


def _located_by_name(path: str, roots: tuple[str, ...], expect: str | os.PathLike[str] | None, make: bool) -> Located:
    """Where descriptors cannot walk a path (Windows): the real path checked, then used by name."""
    real = os.path.realpath(path)
    _check(real, roots, expect)
    if make:
        os.makedirs(os.path.dirname(real), exist_ok=True)
    return Located([], os.path.basename(real), real, by_name=True)
