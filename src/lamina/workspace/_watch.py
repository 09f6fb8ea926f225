"""Folder watches for the context-file cache: inotify on Linux, through `inotify_simple` (I/O: kernel).

A `FolderWatch` is told about every folder a scan lists, just before the listing, and watches for
entries added, removed or renamed; `changed` reads the queued events without blocking. One
inotify instance serves the whole process. Where inotify is missing or a limit is reached, the
cache falls back to its stamps. See docs/workspace.md, "Folder watches".
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import weakref
from collections.abc import Callable
from typing import Any, Final

_inotify: Any
try:
    import inotify_simple  # type: ignore[import-untyped,unused-ignore]

    _inotify = inotify_simple
except ImportError:  # not Linux, or the package is missing: stamps alone
    _inotify = None

_IN_CREATE: Final = 0x100
_IN_DELETE: Final = 0x200
_IN_MOVED_FROM: Final = 0x40
_IN_MOVED_TO: Final = 0x80
_IN_DELETE_SELF: Final = 0x400
_IN_MOVE_SELF: Final = 0x800
_IN_Q_OVERFLOW: Final = 0x4000
_IN_IGNORED: Final = 0x8000
_IN_ISDIR: Final = 0x40000000
_MASK: Final = _IN_CREATE | _IN_DELETE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_DELETE_SELF | _IN_MOVE_SELF
_GONE: Final = _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_IGNORED
"""Events that mean a watched folder went away (its watch is dropped by the kernel)."""
_DRAIN_EVERY: Final = 4096
"""Watches removed between two reads of the queue (the kernel keeps 16,384 events by default)."""


class _Hub:
    """The process's inotify instance and which watches want which folder's events."""

    def __init__(self, handle: Any) -> None:
        self.handle: Any = handle
        self.lock = threading.Lock()
        self.subscribers: dict[int, weakref.WeakSet[FolderWatch]] = {}
        self.orphans: list[int] = []
        """Watches of collected `FolderWatch`es whose finaliser found the lock taken, released at the next drain."""

    def collected(self, wds: list[int]) -> None:
        """A `FolderWatch` was collected: release its `wds`, never blocking.

        The garbage collector runs finalisers wherever an allocation happens, also inside this hub's
        own locked code, so waiting for the (non-reentrant) lock there would deadlock the thread:
        the watches wait for the next drain.
        """
        self.orphans.extend(wds)
        if self.lock.acquire(blocking=False):
            try:
                self._release_orphans()
            finally:
                self.lock.release()

    def _release_orphans(self) -> None:
        orphans, self.orphans = self.orphans, []
        if orphans:
            self._release(orphans, None)

    def add(self, folder: str, watch: FolderWatch) -> int:
        with self.lock:
            wd: int = self.handle.add_watch(folder, _MASK)
            self.subscribers.setdefault(wd, weakref.WeakSet()).add(watch)
            return wd

    def drain(self) -> None:
        """Read every queued event and mark the watches it concerns as changed."""
        with self.lock:
            self._release_orphans()
            self._drain()

    def _drain(self) -> None:
        try:
            events = self.handle.read(timeout=0)
        except (OSError, ValueError):  # the instance broke: no watch can be trusted
            self._all_changed()
            return
        for event in events:
            if event.mask & _IN_Q_OVERFLOW:  # events were lost: any folder may have changed
                self._all_changed()
                continue
            concerned = self.subscribers.get(event.wd)
            if not concerned:
                continue  # a folder no scan watches any more
            gone = bool(event.mask & _GONE)
            for watch in concerned:
                if gone or watch.relevant(event.name, bool(event.mask & _IN_ISDIR)):
                    watch._changed = True
            if event.mask & _IN_IGNORED:
                del self.subscribers[event.wd]

    def _all_changed(self) -> None:
        for watches in self.subscribers.values():
            for watch in watches:
                watch._changed = True

    def release(self, wds: list[int], watch: FolderWatch | None = None) -> None:
        """`watch` no longer needs `wds` (None: it was collected); a folder no watch needs is no longer watched.

        Each watch removed queues an event of its own: the queue is read every few thousand, so
        that the removals cannot overflow it and cost every other scan a walk.
        """
        with self.lock:
            self._release(wds, watch)

    def _release(self, wds: list[int], watch: FolderWatch | None) -> None:
        removed = 0
        for wd in wds:
            watches = self.subscribers.get(wd)
            if watches is None:
                continue
            if watch is not None:
                watches.discard(watch)
            if not watches:
                del self.subscribers[wd]
                with contextlib.suppress(OSError, ValueError):  # the folder is gone (or the instance closed)
                    self.handle.rm_watch(wd)
                removed += 1
                if removed % _DRAIN_EVERY == 0:
                    self._drain()
        if removed:
            self._drain()

    def close(self) -> None:
        with self.lock:
            self.handle.close()


_hub: _Hub | None = None
_hub_failed = False
_hub_lock = threading.Lock()


def _the_hub() -> _Hub | None:
    global _hub, _hub_failed
    with _hub_lock:
        if _hub is None and not _hub_failed and _inotify is not None:
            try:
                _hub = _Hub(_inotify.INotify())
            except OSError:
                _hub_failed = True  # no instance left: stamps for the rest of the process
            else:
                atexit.register(_hub.close)
        return _hub


class FolderWatch:
    """The folders of one scan, watched for entries added, removed or renamed."""

    def __init__(self, hub: _Hub, relevant: Callable[[str, bool], bool]) -> None:
        self._hub = hub
        self.relevant = relevant
        """Whether an entry added, removed or renamed under a name (`is_folder` too) can change the scan."""
        self._wds: list[int] = []
        self.usable = True
        """False once a folder could not be watched (a limit was reached): the stamps must decide."""
        self._changed = False
        self._finalizer = weakref.finalize(self, hub.collected, self._wds)
        self._finalizer.atexit = False  # the instance itself is closed at exit

    @classmethod
    def open(cls, relevant: Callable[[str, bool], bool]) -> FolderWatch | None:
        """A new watch, or None where inotify is not available (not Linux, no module, no instance left)."""
        hub = _the_hub()
        return cls(hub, relevant) if hub is not None else None

    def add(self, folder: str) -> None:
        """Watch `folder` from now on; a failure makes the watch unusable (and frees it)."""
        if not self.usable:
            return
        try:
            self._wds.append(self._hub.add(folder, self))
        except OSError:
            self.usable = False
            self.close()

    def changed(self) -> bool:
        """Whether an event since the watches were added matters (see `relevant`), or a watch was lost.

        Once true, it stays true. The events read are handed to every watch of the process.
        """
        if not self._changed:
            self._hub.drain()
        return self._changed

    def close(self) -> None:
        """Stop watching the folders no other scan watches (also done when the watch is collected)."""
        self._changed = True
        self._hub.release(self._wds, self)
        self._finalizer.detach()
