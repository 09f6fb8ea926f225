"""Folder watches for the context-file cache: inotify on Linux, through `inotify_simple` (I/O: kernel).

A `FolderWatch` is told about every folder a scan lists, just before the listing, so no change
after the listing can slip through. It watches for entries added, removed or renamed (not for
writes: the few files a scan read are checked by their stamps). `changed(relevant)` reads the
queued events without blocking: the kernel queues an event before the call that caused it returns,
so a change made before `changed` is called is always seen. Where inotify is missing or a limit is
reached (watches, instances, a queue overflow), the watch reports itself unusable or changed and
the cache falls back to its stamps, or walks again.
"""

from __future__ import annotations

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
_ALWAYS: Final = _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_Q_OVERFLOW | _IN_IGNORED
"""Events that mean the watch no longer covers what was listed: a watched folder went away, or events were lost."""


class FolderWatch:
    """An inotify instance watching the folders of one scan for entries added, removed or renamed."""

    def __init__(self, handle: Any) -> None:
        self._handle: Any = handle
        self._finalizer = weakref.finalize(self, handle.close)
        self.usable = True
        """False once a folder could not be watched (a limit was reached): the stamps must decide."""
        self._changed = False

    @classmethod
    def open(cls) -> FolderWatch | None:
        """A new watch, or None where inotify is not available (not Linux, no module, no instance left)."""
        if _inotify is None:
            return None
        try:
            return cls(_inotify.INotify())
        except OSError:
            return None

    def add(self, folder: str) -> None:
        """Watch `folder` from now on; a failure makes the watch unusable (and frees it)."""
        if not self.usable:
            return
        try:
            self._handle.add_watch(folder, _MASK)
        except OSError:
            self.usable = False
            self.close()

    def changed(self, relevant: Callable[[str, bool], bool]) -> bool:
        """Whether an event since the watches were added matters: `relevant(name, is_folder)`, or a lost watch.

        Once true, it stays true. Not thread-safe (the cache calls it under its lock).
        """
        if self._changed:
            return True
        try:
            events = self._handle.read(timeout=0)
            for event in events:
                if event.mask & _ALWAYS or relevant(event.name, bool(event.mask & _IN_ISDIR)):
                    self._changed = True
                    break
        except (OSError, ValueError):  # closed or broken: trust nothing
            self._changed = True
        return self._changed

    def close(self) -> None:
        """Free the inotify instance (also done when the watch is collected)."""
        self._finalizer()
