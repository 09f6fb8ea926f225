"""`ContextFileFinder`: context-file scans cached while nothing they depend on changed (I/O: disk, clock, git).

Each cached scan keeps the stamps of what it saw (`_Stamps`): folders by watch or change time,
rule files, git's index and configuration, the context files read. A check tells whether the
scan is fresh, needs its files read again, or a new walk. See docs/workspace.md.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, Literal

from lamina.errors import UsageError
from lamina.workspace._context_files import (
    CONTEXT_FILE_NAMES,
    CONTEXT_POLICY,
    DEFAULT_HUGE_BYTES,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_FILES,
    Caps,
    ContextFile,
    ContextFileScan,
    ContextWalk,
    check_caps,
    folder_view,
    nearest_context_files,
    read_found,
    walk_context_files,
)
from lamina.workspace._ignore import SkippedPath
from lamina.workspace._walk import list_folder
from lamina.workspace._watch import FolderWatch

#: A stamp this close to the scan's start (or later) may hide a change made in the same clock tick.
RACY_NS: Final = 50_000_000


class ContextFileFinder:
    """Scans working directories and keeps each scan while nothing it depends on changed.

    Every `find` checks the cached scan of that folder with `stat` calls alone, no walk: the change time of every
    folder listed (an entry added, removed or renamed changes it), and the stamp (modification and change time,
    size, inode) of every context file, skipped path and rule file it read or looked for. On Linux the folders are
    watched instead (inotify, added just before each folder is listed): the check reads the queued events without
    blocking and costs no `stat` per folder. Either way, only what the walk uses counts: a new source file leaves
    the scan standing (a stamped folder whose change time moved is listed again, alone); a new folder, context file
    or rule file makes the next `find` walk the tree again. A new, removed or edited context file anywhere, a
    changed `.gitignore`, a skipped file made usable, a rewrite that restores the modification time: each is seen by
    the next `find`. A scan whose stamps were taken in the same clock tick as a change could be is not trusted and
    is redone on the next `find`. When a rescan finds exactly what the cached scan holds, the cached object is
    returned, so callers can compare by identity. Each working directory is cached under its resolved path (the
    `max_roots` most recently used are kept). Safe to share between threads.
    """

    def __init__(
        self,
        *,
        max_files: int = DEFAULT_MAX_FILES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        huge_bytes: int = DEFAULT_HUGE_BYTES,
        allowed_roots: Sequence[str | os.PathLike[str]] = (),
        max_roots: int = 16,
        watch: bool = True,
    ) -> None:
        """Set the caps passed to `find_context_files`, the allowed roots and the cache's size.

        With `watch` (and inotify available), each cached scan keeps a watch on the folders it
        listed, so the check costs no `stat` per folder; without, folders are checked by stamps.

        Raises:
            UsageError: A cap is out of range (see `find_context_files`) or `max_roots` is below 1.
        """
        check_caps(max_files, max_bytes, huge_bytes)
        if max_roots < 1:
            raise UsageError(f"max_roots must be 1 or more, got {max_roots}")
        self._caps = Caps(max_files, max_bytes, huge_bytes, tuple(allowed_roots), watch)
        self._max_roots = max_roots
        self._lock = threading.Lock()
        self._cache: OrderedDict[Path, tuple[ContextFileScan, _Stamps]] = OrderedDict()
        self._racy: dict[Path, _Verdict] = {}
        """Per cached scan, what its stamps taken in the same clock tick as a change could be need: a redo."""
        self.walks = 0
        """How many times a folder was walked (a cached scan found fresh costs no walk)."""
        self.reads = 0
        """How many times only the context files were read again (one changed; the folders did not)."""

    def find(self, cwd: str | os.PathLike[str], *, progress: Callable[[int], None] | None = None) -> ContextFileScan:
        """The scan of `cwd` as the workspace is now: the cached one when nothing changed, else a fresh one."""
        key = Path(cwd).resolve()
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                scan, stamps = cached
                verdict = _worst(stamps.check(), self._racy.get(key, "walk"))
                if verdict == "fresh":
                    return scan
                if verdict == "reread":
                    # Only context files changed: read them again, keep the walk and its watches.
                    self.reads += 1
                    started = time.time_ns()
                    scan = _read_again(key, self._caps, stamps)
                    return self._keep(key, scan, stamps, racy=stamps.racy(started, reads_only=True))
        return self.refresh(key, progress=progress)

    def is_fresh(self, cwd: str | os.PathLike[str]) -> bool:
        """Whether the cached scan of `cwd` still holds (False when there is none): the check `find` makes."""
        key = Path(cwd).resolve()
        with self._lock:
            cached = self._cache.get(key)
            if cached is None:
                return False
            return _worst(cached[1].check(), self._racy.get(key, "walk")) == "fresh"

    def refresh(self, cwd: str | os.PathLike[str], *, progress: Callable[[int], None] | None = None) -> ContextFileScan:
        """Scan `cwd` now, whatever the cache holds, and cache the result."""
        key = Path(cwd).resolve()
        started = time.time_ns()
        scan, stamps = _scan(key, self._caps, progress)
        with self._lock:
            self.walks += 1
            previous = self._cache.get(key)
            if previous is not None:
                previous[1].close()
            return self._keep(key, scan, stamps, racy=stamps.racy(started))

    def _keep(self, key: Path, scan: ContextFileScan, stamps: _Stamps, *, racy: _Verdict) -> ContextFileScan:
        """Cache `scan` (the cached object itself when equal) and what its racy stamps will need. Holds the lock."""
        previous = self._cache.get(key)
        if previous is not None and _same_scan(previous[0], scan):
            scan = previous[0]
        self._cache[key] = (scan, stamps)
        self._racy[key] = racy
        self._cache.move_to_end(key)
        while len(self._cache) > self._max_roots:
            evicted, (_, old) = self._cache.popitem(last=False)
            self._racy.pop(evicted, None)
            old.close()
        return scan

    def clear(self) -> None:
        """Forget every cached scan (and free its folder watches)."""
        with self._lock:
            for _, stamps in self._cache.values():
                stamps.close()
            self._cache.clear()

    def close(self) -> None:
        """Free every folder watch; the finder still works (its next `find` walks again)."""
        self.clear()

    def nearest(self, cwd: str | os.PathLike[str], path: str | os.PathLike[str]) -> tuple[ContextFile, ...]:
        """`nearest_context_files` on the (possibly cached) scan of `cwd`."""
        return nearest_context_files(self.find(cwd), path)


def _same_scan(a: ContextFileScan, b: ContextFileScan) -> bool:
    same = a.files == b.files and a.skipped == b.skipped
    return same and (a.omitted_over_cap, a.scanned_dirs) == (b.omitted_over_cap, b.scanned_dirs)


_Verdict = Literal["fresh", "reread", "walk"]


class _Stamps:
    """What a scan saw, to tell later with `stat` calls alone (or folder watches) what a new scan needs.

    Folders are checked by their watch, or else by change time, which every entry added, removed or
    renamed in them moves on. A stamped folder whose change time moved is listed again (that folder
    alone): when what the walk cares about in it is the same (its sub-folders, its context files,
    whether it has a `.gitignore` or a `pyvenv.cfg`), a file was merely created or renamed there (a
    source file, an editor's temporary file) and the new change time is kept. Files are checked by
    their stamps: a changed rule file (or git's index or configuration) means a new walk; a changed
    context file or skipped file only means reading the files again.
    """

    __slots__ = (
        "folder_ctimes",
        "folders",
        "read_files",
        "read_stamps",
        "walk",
        "walk_files",
        "walk_skipped",
        "walk_stamps",
        "watch",
    )

    def __init__(self, walk: ContextWalk, walk_skipped: tuple[SkippedPath, ...], watch: FolderWatch | None) -> None:
        self.walk = walk
        self.walk_skipped = walk_skipped
        """What the walk itself skipped (unlistable folders, ignore-file lines left out)."""
        self.folders = walk.folders
        self.folder_ctimes = walk.folder_ctimes
        self.watch = watch if watch is not None and watch.usable else None
        """Watches on every folder listed, when available: they replace the folders' change times."""
        walk_inputs = list(dict.fromkeys([*walk.watched, *(str(s.path) for s in walk_skipped)]))
        self.walk_files = tuple(walk_inputs)
        """Rule files (present or not), git's index and configuration, paths the walk skipped."""
        self.walk_stamps = tuple(_stamp(path) for path in walk_inputs)
        self.read_files: tuple[str, ...] = ()
        """Context files read or skipped when read."""
        self.read_stamps: tuple[_Stamp, ...] = ()

    def set_read(self, paths: list[str]) -> None:
        unique = tuple(dict.fromkeys(paths))
        self.read_files, self.read_stamps = unique, tuple(_stamp(path) for path in unique)

    def racy(self, started: int, *, reads_only: bool = False) -> _Verdict:
        """What it takes to rule out a change hidden in the same clock tick as a stamp taken after `started`.

        `fresh` when no stamp is that recent. With `reads_only`, only the stamps of the files read count
        (the folders and rule files were not looked at again).
        """
        threshold = started - RACY_NS
        if not reads_only:
            if any(max(s[0], s[1]) >= threshold for s in self.walk_stamps):
                return "walk"
            if self.watch is None and any(ctime >= threshold for ctime in self.folder_ctimes):
                return "walk"
        if any(max(s[0], s[1]) >= threshold for s in self.read_stamps):
            return "reread"
        return "fresh"

    def check(self) -> _Verdict:
        """What it takes to see the workspace as it is now. Not thread-safe (the finder holds its lock)."""
        if not self._folders_unchanged():
            return "walk"
        if any(_stamp(path) != stamp for path, stamp in zip(self.walk_files, self.walk_stamps, strict=True)):
            return "walk"
        if any(_stamp(path) != stamp for path, stamp in zip(self.read_files, self.read_stamps, strict=True)):
            return "reread"
        return "fresh"

    def _folders_unchanged(self) -> bool:
        if self.watch is not None:
            return not self.watch.changed()
        try:
            # One C-level loop over the folders (never links: the walk does not follow them).
            ctimes = [st.st_ctime_ns for st in map(os.lstat, self.folders)]
        except OSError:
            return False
        if ctimes != self.folder_ctimes:
            for index, (now, then) in enumerate(zip(ctimes, self.folder_ctimes, strict=True)):
                if now != then and not self._same_view(index):
                    return False
        return True

    def _same_view(self, index: int) -> bool:
        """List folder `index` again; keep its new change time if the walk would take the same from it."""
        started = time.time_ns()
        try:
            listing = list_folder(self.folders[index], CONTEXT_POLICY)
        except OSError:
            return False
        if listing.ctime_ns >= started - RACY_NS or folder_view(listing) != self.walk.views[index]:
            return False  # changed, or changed so recently that a second change could hide
        self.folder_ctimes[index] = listing.ctime_ns
        return True

    def close(self) -> None:
        """Free the folder watches, if any."""
        if self.watch is not None:
            self.watch.close()


_ORDER: Final = {"fresh": 0, "reread": 1, "walk": 2}


def _worst(a: _Verdict, b: _Verdict) -> _Verdict:
    return a if _ORDER[a] >= _ORDER[b] else b


_Stamp = tuple[int, int, int, int]


def _stamp(path: str) -> _Stamp:
    """`(mtime, ctime, size, inode)` of `path` through links, or `(-errno, 0, 0, 0)` when it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return (-(exc.errno or 1), 0, 0, 0)
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def _scan(top: Path, caps: Caps, progress: Callable[[int], None] | None) -> tuple[ContextFileScan, _Stamps]:
    """Walk `top` and read its context files, stamping what both saw."""
    skipped: list[SkippedPath] = []
    watch = FolderWatch.open(_relevant) if caps.watch else None
    walk = walk_context_files(str(top), skipped, progress, watch.add if watch is not None else None)
    stamps = _Stamps(walk, tuple(skipped), watch)
    return _read_again(top, caps, stamps), stamps


def _read_again(top: Path, caps: Caps, stamps: _Stamps) -> ContextFileScan:
    """Read the context files the stamped walk found; stamps what was read."""
    scan, read = read_found(top, caps, stamps.walk, stamps.walk_skipped)
    stamps.set_read(read)
    return scan


def _relevant(name: str, is_folder: bool) -> bool:
    """Whether an entry added, removed or renamed under this name can change a scan (as `_view` sees it)."""
    return is_folder or name.lower() in CONTEXT_FILE_NAMES or name in (".gitignore", "pyvenv.cfg")
