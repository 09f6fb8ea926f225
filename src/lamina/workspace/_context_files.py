"""Project context files: `AGENTS.md` / `CLAUDE.md` found under a working directory (I/O: disk, clock, git).

`find_context_files(root)` walks the tree breadth-first with `os.scandir` and returns a
`ContextFileScan`: the files it read, the paths it had to skip (with a reason) and how many files
the cap left out. `ContextFileFinder` keeps each scan while nothing it depends on changed;
`nearest_context_files` picks the files that govern one path.

What the walk matches and skips:

- Names match in any letter case (`agents.md`, `Claude.MD`).
- Ignore rules exactly as git applies them (`lamina.workspace._ignore`): nested `.gitignore`
  files, and inside a git work tree the `.gitignore` files above the root, `.git/info/exclude`
  and the global excludes file, unless they ignore the root itself. A line git cannot use is
  left out and reported in `skipped` with its file and line; the scan goes on.
- Folders skipped by name, unless git tracks a file in them: every dot-folder (`.venv`, `.cache`,
  `.next`, …), the names in `SKIPPED_DIR_NAMES` (`node_modules`, `build`, `dist`, `out`,
  `target`, `__pycache__`, `venv`, `site-packages`, …) and any folder holding a `pyvenv.cfg` (a
  virtual environment under any name). Inside a git work tree one `git ls-files` over those
  folders tells which hold tracked files (a tracked `build/` with its own `AGENTS.md` is source,
  not output); without git they are skipped. Version-control folders (`.git`, `.hg`, …) are
  never entered. The root itself is always scanned, whatever its name.
- Symlinks: a symlinked *folder* is never followed (as git and ripgrep do), so a link to a parent
  cannot loop and a link to `/` cannot drag the whole disk in; every folder entered is also
  recorded by `(st_dev, st_ino)` so a bind mount inside itself is entered once. A symlinked
  *context file* is read only when it resolves inside the root or an allowed root
  (`CLAUDE.md -> AGENTS.md` is common; `AGENTS.md -> ../secret.txt` and
  `CLAUDE.md -> /proc/self/status` are skipped).
- Skipped with a reason, never raised: folders that cannot be listed, files that are broken
  symlinks, symlink loops, links resolving outside, not regular files (a FIFO is never opened
  for a blocking read), unreadable, binary (a NUL byte), not UTF-8, or larger than `huge_bytes`.

Each file's text is capped at `max_bytes` (default 10 KB), cut on a character boundary and
followed by a line starting with `TRUNCATION_MARK`. Files are ordered shallowest first, then by
relative path; at most `max_files` (default 30) are read, and `omitted_over_cap` counts the rest.
"""

from __future__ import annotations

import codecs
import errno
import os
import stat
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from lamina.errors import UsageError
from lamina.workspace._confine import outside_roots as _outside_roots
from lamina.workspace._ignore import IgnoreRules as _Ignore
from lamina.workspace._ignore import SkippedPath as SkippedPath
from lamina.workspace._ignore import describe_os_error as _describe
from lamina.workspace._ignore import is_ignored as _ignored
from lamina.workspace._ignore import load_ignore as _load_ignore
from lamina.workspace._ignore import rules_above as _rules_above
from lamina.workspace._ignore import tracked_folders as _tracked_folders
from lamina.workspace._ignore import work_tree_top as _work_tree_top
from lamina.workspace._watch import FolderWatch

#: File names (compared case-insensitively) that hold project instructions for agents.
CONTEXT_FILE_NAMES: Final = frozenset({"agents.md", "claude.md"})
#: Folder names skipped unless git tracks a file in them (dot-folders too, so they need no entry here).
SKIPPED_DIR_NAMES: Final = frozenset(
    {
        # dependencies and virtual environments
        "node_modules",
        "bower_components",
        "jspm_packages",
        "site-packages",
        "venv",
        # build outputs
        "build",
        "dist",
        "out",
        "target",
        "_build",
        # caches
        "__pycache__",
    }
)
DEFAULT_MAX_FILES: Final = 30
DEFAULT_MAX_BYTES: Final = 10_240
#: Files larger than this are skipped as "too large" rather than truncated: likely generated.
DEFAULT_HUGE_BYTES: Final = 1_048_576
#: Start of the line appended to a truncated file's text.
TRUNCATION_MARK: Final = "[… truncated:"
#: `progress` callbacks fire each time this many more folders have been listed.
PROGRESS_EVERY_DIRS: Final = 1000

# Non-blocking so that a FIFO swapped in after the stat cannot hang the open.
_OPEN_FLAGS: Final = (
    os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
)
_DIR_FLAGS: Final = _OPEN_FLAGS | getattr(os, "O_DIRECTORY", 0)
_SCANDIR_FD: Final = os.scandir in os.supports_fd
#: Folders never entered, tracked or not: version control's own.
_VCS_DIR_NAMES: Final = frozenset({".git", ".hg", ".svn", ".bzr", ".jj", "_darcs", "CVS"})
#: A stamp this close to the scan's start (or later) may hide a change made in the same clock tick.
_RACY_NS: Final = 50_000_000


@dataclass(frozen=True, slots=True)
class ContextFile:
    """One project context file that was read."""

    path: Path
    """Absolute path, as found under the root (a symlink is kept, not resolved)."""
    relative: str
    """POSIX path relative to the scan root, e.g. `packages/a/AGENTS.md`."""
    depth: int
    """Number of folders between the root and the file: 0 for a file in the root."""
    text: str
    """The file's text, at most `max_bytes` of it, then a `TRUNCATION_MARK` line if cut."""
    size: int
    """The whole file's size in bytes, even when `text` was truncated."""
    truncated: bool
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class ContextFileScan:
    """The result of one walk over a working directory."""

    root: Path
    """The resolved root that was scanned."""
    files: tuple[ContextFile, ...]
    """Shallowest first, then by relative path."""
    skipped: tuple[SkippedPath, ...]
    omitted_over_cap: int
    """Context files found but not read because `max_files` were already listed."""
    scanned_dirs: int
    """Folders listed, the root included."""


def find_context_files(
    root: str | os.PathLike[str],
    *,
    max_files: int = DEFAULT_MAX_FILES,
    max_bytes: int = DEFAULT_MAX_BYTES,
    huge_bytes: int = DEFAULT_HUGE_BYTES,
    allowed_roots: Sequence[str | os.PathLike[str]] = (),
    progress: Callable[[int], None] | None = None,
) -> ContextFileScan:
    """Find and read the project context files under `root`, without any cache.

    Args:
        root: The working directory; resolved before scanning.
        max_files: Read at most this many files; the rest are counted in `omitted_over_cap`.
        max_bytes: Keep at most this many bytes of each file's text.
        huge_bytes: Skip files larger than this instead of truncating them.
        allowed_roots: Folders besides `root` that a linked context file may point into.
        progress: Called with the number of folders listed so far, every `PROGRESS_EVERY_DIRS`.

    Raises:
        UsageError: A cap is negative (`max_files`) or not positive (`max_bytes`, `huge_bytes`).
    """
    _check_caps(max_files, max_bytes, huge_bytes)
    scan, _ = _scan(Path(root).resolve(), _Caps(max_files, max_bytes, huge_bytes, tuple(allowed_roots)), progress)
    return scan


@dataclass(frozen=True, slots=True)
class _Caps:
    max_files: int
    max_bytes: int
    huge_bytes: int
    allowed_roots: tuple[str | os.PathLike[str], ...]
    watch: bool = False


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

    def __init__(self, walk: _WalkResult, walk_skipped: tuple[SkippedPath, ...], watch: FolderWatch | None) -> None:
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
        threshold = started - _RACY_NS
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
            listing = _list(self.folders[index])
        except OSError:
            return False
        if listing.ctime_ns >= started - _RACY_NS or _view(listing) != self.walk.views[index]:
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


def _relevant(name: str, is_folder: bool) -> bool:
    """Whether an entry added, removed or renamed under this name can change a scan (as `_view` sees it)."""
    return is_folder or name.lower() in CONTEXT_FILE_NAMES or name in (".gitignore", "pyvenv.cfg")


_View = tuple[tuple[str, ...], tuple[str, ...], bool, bool]
"""A folder's sub-folders, context files, and whether it has a `.gitignore` and a `pyvenv.cfg`."""


def _view(listing: _Listing) -> _View:
    return (tuple(sorted(listing.folders)), tuple(sorted(listing.found)), listing.gitignore, listing.venv)


_Stamp = tuple[int, int, int, int]


def _stamp(path: str) -> _Stamp:
    """`(mtime, ctime, size, inode)` of `path` through links, or `(-errno, 0, 0, 0)` when it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return (-(exc.errno or 1), 0, 0, 0)
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def _scan(top: Path, caps: _Caps, progress: Callable[[int], None] | None) -> tuple[ContextFileScan, _Stamps]:
    """Walk `top` and read its context files."""
    skipped: list[SkippedPath] = []
    watch = FolderWatch.open(_relevant) if caps.watch else None
    walk = _walk(str(top), skipped, progress, watch)
    walk.candidates.sort()
    stamps = _Stamps(walk, tuple(skipped), watch)
    return _read_all(top, caps, stamps), stamps


def _read_all(top: Path, caps: _Caps, stamps: _Stamps) -> ContextFileScan:
    """Read the context files a walk found (again, after one changed); stamps what was read."""
    roots = (top, *caps.allowed_roots)
    files: list[ContextFile] = []
    skipped = list(stamps.walk_skipped)
    read: list[str] = []
    omitted = 0
    for depth, relative, path in stamps.walk.candidates:
        if len(files) >= caps.max_files:
            omitted += 1
            continue
        found = _read(Path(path), relative, depth, max_bytes=caps.max_bytes, huge_bytes=caps.huge_bytes, roots=roots)
        read.append(path)
        if isinstance(found, ContextFile):
            files.append(found)
        else:
            skipped.append(found)
    skipped.sort(key=lambda s: (s.relative, s.line or 0))
    stamps.set_read(read)
    return ContextFileScan(
        root=top, files=tuple(files), skipped=tuple(skipped), omitted_over_cap=omitted, scanned_dirs=stamps.walk.scanned
    )


def nearest_context_files(scan: ContextFileScan, path: str | os.PathLike[str]) -> tuple[ContextFile, ...]:
    """The context files that govern `path`: those in its folder and in each ancestor up to the root.

    They come shallowest first (the root's file, then each deeper folder's), so a reader that
    applies them in order lets the deeper, more specific file override the shallower one. Files in
    one folder (`AGENTS.md` and `CLAUDE.md`) keep the scan's order. A file the cap left out of the
    scan is not returned.

    Args:
        scan: A scan of the root that `path` lies under.
        path: A file or folder, absolute or relative to `scan.root`; it need not exist. An
            existing folder is governed by its own files; anything else by its parent folder's.

    Returns:
        The governing files, or `()` when `path` is outside the root.
    """
    target = Path(path)
    if not target.is_absolute():
        target = scan.root / target
    folder = target if target.is_dir() else target.parent
    relative = _relative_to(Path(os.path.abspath(folder)), scan.root)
    if relative is None:
        relative = _relative_to(folder.resolve(), scan.root)
    if relative is None:
        return ()
    governing = {""}
    parts = [p for p in relative.split("/") if p]
    for i in range(1, len(parts) + 1):
        governing.add("/".join(parts[:i]))
    return tuple(f for f in scan.files if f.relative.rpartition("/")[0] in governing)


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
        _check_caps(max_files, max_bytes, huge_bytes)
        if max_roots < 1:
            raise UsageError(f"max_roots must be 1 or more, got {max_roots}")
        self._caps = _Caps(max_files, max_bytes, huge_bytes, tuple(allowed_roots), watch)
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
                    scan = _read_all(key, self._caps, stamps)
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


def _check_caps(max_files: int, max_bytes: int, huge_bytes: int) -> None:
    if max_files < 0:
        raise UsageError(f"max_files must be 0 or more, got {max_files}")
    if max_bytes <= 0 or huge_bytes <= 0:
        raise UsageError(f"max_bytes and huge_bytes must be positive, got {max_bytes} and {huge_bytes}")


def _relative_to(path: Path, root: Path) -> str | None:
    try:
        relative = path.relative_to(root).as_posix()
    except ValueError:
        return None
    return "" if relative == "." else relative


# --- the walk -------------------------------------------------------------------------------------


@dataclass(slots=True)
class _WalkResult:
    candidates: list[tuple[int, str, str]] = field(default_factory=list)
    """`(depth, relative, path)` of every context file found."""
    scanned: int = 0
    folders: list[str] = field(default_factory=list)
    folder_ctimes: list[int] = field(default_factory=list)
    views: list[_View] = field(default_factory=list)
    watched: list[str] = field(default_factory=list)
    """Files (present or not) whose change could change the walk: rule files, git's index and config."""


_Queued = tuple[str, str, int, tuple[_Ignore, ...]]


def _walk(
    root: str, skipped: list[SkippedPath], progress: Callable[[int], None] | None, watch: FolderWatch | None = None
) -> _WalkResult:
    """Breadth-first walk over `root`: context files, folders listed (with their stamps), files depended on."""
    out = _WalkResult()
    visited: set[tuple[int, int]] = set()
    queue: deque[_Queued] = deque([(root, "", 0, _rules_above(root, skipped, out.watched))])
    held: list[_Queued] = []  # folders skipped by name (or as a virtual environment), entered if git tracks files there
    entered: set[str] = set()  # held folders git tracks files in: entered whatever they look like
    top = _work_tree_top(root)
    while True:
        while queue:
            _visit(queue.popleft(), queue, held, visited, skipped, out, progress, watch, entered)
        if not held or top is None:
            break
        out.watched.append(os.path.join(top, ".git", "index"))
        tracked = _tracked_folders(root, [relative for _, relative, _, _ in held])
        for item in held:
            if item[1] in tracked:
                entered.add(item[0])
                queue.append(item)
        held = []
    return out


def _visit(
    item: _Queued,
    queue: deque[_Queued],
    held: list[_Queued],
    visited: set[tuple[int, int]],
    skipped: list[SkippedPath],
    out: _WalkResult,
    progress: Callable[[int], None] | None,
    watch: FolderWatch | None,
    entered: set[str],
) -> None:
    folder, relative, depth, chain = item
    if watch is not None:
        watch.add(folder)  # before the listing: a change after it cannot slip through
    try:
        listing = _list(folder)
    except OSError as exc:
        skipped.append(SkippedPath(Path(folder), relative or ".", f"cannot list folder: {_describe(exc)}"))
        return
    if listing.venv and depth > 0 and folder not in entered:
        # A virtual environment, whatever its folder's name: held like the named folders. Stamped,
        # so that a `pyvenv.cfg` removed is noticed; not marked visited, so it can be entered later.
        out.folders.append(folder)
        out.folder_ctimes.append(listing.ctime_ns)
        out.views.append(_view(listing))
        held.append(item)
        return
    if listing.key is not None:
        if listing.key in visited:
            skipped.append(SkippedPath(Path(folder), relative, "folder already scanned (mount loop)"))
            return
        visited.add(listing.key)
    out.scanned += 1
    out.folders.append(folder)
    out.folder_ctimes.append(listing.ctime_ns)
    out.views.append(_view(listing))
    if progress is not None and out.scanned % PROGRESS_EVERY_DIRS == 0:
        progress(out.scanned)
    base = relative + "/" if relative else ""
    prefix = folder if folder.endswith(os.sep) else folder + os.sep
    if listing.gitignore:
        path = prefix + ".gitignore"
        out.watched.append(path)
        rules = _load_ignore(path, strip=len(base), prefix="", relative=base + ".gitignore", skipped=skipped)
        if rules is not None:
            chain = (*chain, rules)
    for name in listing.found:
        child = base + name
        if not (chain and _ignored(chain, child)):
            out.candidates.append((depth, child, prefix + name))
    for name in listing.folders:
        child = base + name
        if not (chain and _ignored(chain, child + "/")):
            queued = (prefix + name, child, depth + 1, chain)
            if name[0] == "." or name in SKIPPED_DIR_NAMES:
                held.append(queued)
            else:
                queue.append(queued)


@dataclass(slots=True)
class _Listing:
    """What one folder holds, as far as the walk cares."""

    key: tuple[int, int] | None
    """`(st_dev, st_ino)`, or None where the platform reports no inode numbers."""
    ctime_ns: int
    """The folder's change time, read before its entries."""
    folders: list[str] = field(default_factory=list)
    """Sub-folders (not symlinks, not version-control folders)."""
    found: list[str] = field(default_factory=list)
    """Context file names (any type: regular files, symlinks, FIFOs…; `_read` sorts them out)."""
    gitignore: bool = False
    venv: bool = False


def _list(folder: str) -> _Listing:
    """List `folder` in one pass; most entries are plain files that cost an `is_dir()` and a length check."""
    if _SCANDIR_FD:
        # Opening the folder once gives both its identity (fstat on the descriptor, no second path
        # lookup) and its listing.
        fd = os.open(folder, _DIR_FLAGS)
        try:
            st = os.fstat(fd)
            listing = os.scandir(fd)  # works on its own duplicate of fd
        finally:
            os.close(fd)
    else:
        st = os.stat(folder)
        listing = os.scandir(folder)
    out = _Listing(key=(st.st_dev, st.st_ino) if st.st_ino else None, ctime_ns=st.st_ctime_ns)
    with listing:
        for entry in listing:
            name = entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)  # from the entry's type: no stat
            except OSError:
                is_dir = False
            if is_dir:
                if name not in _VCS_DIR_NAMES:
                    out.folders.append(name)
            elif 8 < len(name) < 11:  # agents.md, claude.md, .gitignore, pyvenv.cfg
                if name.lower() in CONTEXT_FILE_NAMES:
                    out.found.append(name)
                elif name == ".gitignore":
                    out.gitignore = entry.is_file()
                elif name == "pyvenv.cfg":
                    out.venv = True
    return out


# --- reading one file -----------------------------------------------------------------------------


def _read(
    path: Path, relative: str, depth: int, *, max_bytes: int, huge_bytes: int, roots: Iterable[str | os.PathLike[str]]
) -> ContextFile | SkippedPath:
    def skip(reason: str) -> SkippedPath:
        return SkippedPath(path, relative, reason)

    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return skip("symlink loop")
        if isinstance(exc, FileNotFoundError):
            return skip("broken symlink" if os.path.islink(path) else "disappeared during the scan")
        return skip(f"cannot stat: {_describe(exc)}")
    if os.path.islink(path):
        outside = _outside_roots(path, roots)
        if outside is not None:
            return skip(outside)
    if not stat.S_ISREG(st.st_mode):
        return skip("not a regular file")
    if st.st_size > huge_bytes:
        return skip(f"too large ({st.st_size:,} bytes; the limit is {huge_bytes:,})")
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        return skip(f"cannot open: {_describe(exc)}")
    try:
        st = os.fstat(fd)  # the file actually opened, in case it was swapped since the stat
        if not stat.S_ISREG(st.st_mode):
            return skip("not a regular file")
        chunks: list[bytes] = []
        wanted = max_bytes + 1  # one byte more tells whether the file is longer than the cap
        while wanted > 0:
            chunk = os.read(fd, wanted)
            if not chunk:
                break
            chunks.append(chunk)
            wanted -= len(chunk)
    except OSError as exc:
        return skip(f"cannot read: {_describe(exc)}")
    finally:
        os.close(fd)
    data = b"".join(chunks)
    truncated = len(data) > max_bytes
    data = data[:max_bytes]
    if b"\x00" in data:
        return skip("binary (contains a NUL byte)")
    try:
        # Not final when truncated: a character cut in half at the cap is dropped, not an error.
        text = codecs.getincrementaldecoder("utf-8-sig")().decode(data, final=not truncated)
    except UnicodeDecodeError as exc:
        return skip(f"not UTF-8 (invalid byte at offset {exc.start})")
    size = st.st_size
    if truncated:
        text += f"\n\n{TRUNCATION_MARK} showing {max_bytes:,} of {size:,} bytes; read the file for the rest]"
    return ContextFile(
        path=path, relative=relative, depth=depth, text=text, size=size, truncated=truncated, mtime_ns=st.st_mtime_ns
    )
