"""Project context files: `AGENTS.md` / `CLAUDE.md` found under a working directory (I/O: disk, clock).

`find_context_files(root)` walks the tree breadth-first with `os.scandir` and returns a
`ContextFileScan`: the files it read, the paths it had to skip (with a reason) and how many files
the cap left out. `ContextFileFinder` caches scans per working directory; `nearest_context_files`
picks the files that govern one path.

What the walk matches and skips:

- Names match in any letter case (`agents.md`, `Claude.MD`).
- Folders never entered: every dot-folder (`.git`, `.hg`, `.svn`, `.venv`, `.cache`, `.next`, …),
  the names in `SKIPPED_DIR_NAMES` (`node_modules`, `build`, `dist`, `out`, `target`,
  `__pycache__`, `venv`, `site-packages`, …), any folder holding a `pyvenv.cfg` (a virtual
  environment under any name, such as `env`), and whatever `.gitignore` files ignore. A
  `.gitignore` applies to its own folder's subtree, deeper files override shallower ones and `!`
  re-includes, as in git. When the root sits inside a git work tree, the `.gitignore` files between
  the work tree's top and the root, and `.git/info/exclude`, apply too, unless they ignore the
  root itself; the user's global `core.excludesFile` does not. The root itself is always
  scanned, whatever its name.
- Symlinks: a symlinked *folder* is never followed (as git and ripgrep do), so a link to a parent
  cannot loop and a link to `/` cannot drag the whole disk in; every folder entered is also
  recorded by `(st_dev, st_ino)` so a bind mount inside itself is entered once. A symlinked
  *context file* (`CLAUDE.md -> AGENTS.md` is common) is read through the link.
- Skipped with a reason, never raised: folders that cannot be listed, files that are broken
  symlinks, symlink loops, not regular files (a FIFO is never opened for a blocking read),
  unreadable, binary (a NUL byte), not UTF-8, or larger than `huge_bytes`.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from lamina.errors import UsageError
from lamina.workspace._ignore import IgnoreRules as _Ignore
from lamina.workspace._ignore import SkippedPath as SkippedPath
from lamina.workspace._ignore import describe_os_error as _describe
from lamina.workspace._ignore import is_ignored as _ignored
from lamina.workspace._ignore import load_ignore as _load_ignore
from lamina.workspace._ignore import rules_above as _rules_above

#: File names (compared case-insensitively) that hold project instructions for agents.
CONTEXT_FILE_NAMES: Final = frozenset({"agents.md", "claude.md"})
#: Folder names never entered (dot-folders are skipped in general, so they need no entry here).
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
DEFAULT_TTL_SECONDS: Final = 300.0
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
    progress: Callable[[int], None] | None = None,
) -> ContextFileScan:
    """Find and read the project context files under `root`, without any cache.

    Args:
        root: The working directory; resolved before scanning.
        max_files: Read at most this many files; the rest are counted in `omitted_over_cap`.
        max_bytes: Keep at most this many bytes of each file's text.
        huge_bytes: Skip files larger than this instead of truncating them.
        progress: Called with the number of folders listed so far, every `PROGRESS_EVERY_DIRS`.

    Raises:
        UsageError: A cap is negative (`max_files`) or not positive (`max_bytes`, `huge_bytes`).
    """
    _check_caps(max_files, max_bytes, huge_bytes)
    top = Path(root).resolve()
    skipped: list[SkippedPath] = []
    candidates, scanned_dirs = _walk(str(top), skipped, progress)
    candidates.sort()
    files: list[ContextFile] = []
    omitted = 0
    for depth, relative, path in candidates:
        if len(files) >= max_files:
            omitted += 1
            continue
        found = _read(Path(path), relative, depth, max_bytes=max_bytes, huge_bytes=huge_bytes)
        if isinstance(found, ContextFile):
            files.append(found)
        else:
            skipped.append(found)
    skipped.sort(key=lambda s: s.relative)
    return ContextFileScan(
        root=top, files=tuple(files), skipped=tuple(skipped), omitted_over_cap=omitted, scanned_dirs=scanned_dirs
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
    """Scans working directories and caches each scan for a while, with cheap invalidation.

    A cached scan is reused while it is younger than `ttl_seconds` and every listed file still has
    the same `mtime_ns` and size (one `stat` each, no walk). A listed file that changed or vanished
    forces a fresh scan; so does a different working directory, each being cached under its own
    resolved path (the `max_roots` most recently used are kept). A context file *added* (or a
    `.gitignore` edited) while a scan is cached shows up once the TTL runs out, or at once after
    `refresh()`. Safe to share between threads.
    """

    def __init__(
        self,
        *,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        max_files: int = DEFAULT_MAX_FILES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        huge_bytes: int = DEFAULT_HUGE_BYTES,
        max_roots: int = 16,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Set the caps passed to `find_context_files`, the cache's TTL and size, and its clock.

        Raises:
            UsageError: A cap is out of range (see `find_context_files`) or `max_roots` is below 1.
        """
        _check_caps(max_files, max_bytes, huge_bytes)
        if max_roots < 1:
            raise UsageError(f"max_roots must be 1 or more, got {max_roots}")
        self._ttl = ttl_seconds
        self._max_files = max_files
        self._max_bytes = max_bytes
        self._huge_bytes = huge_bytes
        self._max_roots = max_roots
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: OrderedDict[Path, tuple[float, ContextFileScan]] = OrderedDict()

    def find(self, cwd: str | os.PathLike[str], *, progress: Callable[[int], None] | None = None) -> ContextFileScan:
        """The scan of `cwd`: the cached one while still valid, else a fresh one."""
        key = Path(cwd).resolve()
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
        if cached is not None:
            stamp, scan = cached
            if self._clock() - stamp < self._ttl and _unchanged(scan):
                return scan
        return self.refresh(key, progress=progress)

    def refresh(self, cwd: str | os.PathLike[str], *, progress: Callable[[int], None] | None = None) -> ContextFileScan:
        """Scan `cwd` now, whatever the cache holds, and cache the result."""
        key = Path(cwd).resolve()
        scan = find_context_files(
            key, max_files=self._max_files, max_bytes=self._max_bytes, huge_bytes=self._huge_bytes, progress=progress
        )
        with self._lock:
            self._cache[key] = (self._clock(), scan)
            self._cache.move_to_end(key)
            while len(self._cache) > self._max_roots:
                self._cache.popitem(last=False)
        return scan

    def clear(self) -> None:
        """Forget every cached scan."""
        with self._lock:
            self._cache.clear()

    def nearest(self, cwd: str | os.PathLike[str], path: str | os.PathLike[str]) -> tuple[ContextFile, ...]:
        """`nearest_context_files` on the (possibly cached) scan of `cwd`."""
        return nearest_context_files(self.find(cwd), path)


def _check_caps(max_files: int, max_bytes: int, huge_bytes: int) -> None:
    if max_files < 0:
        raise UsageError(f"max_files must be 0 or more, got {max_files}")
    if max_bytes <= 0 or huge_bytes <= 0:
        raise UsageError(f"max_bytes and huge_bytes must be positive, got {max_bytes} and {huge_bytes}")


def _unchanged(scan: ContextFileScan) -> bool:
    for f in scan.files:
        try:
            st = os.stat(f.path)
        except OSError:
            return False
        if st.st_mtime_ns != f.mtime_ns or st.st_size != f.size:
            return False
    return True


def _relative_to(path: Path, root: Path) -> str | None:
    try:
        relative = path.relative_to(root).as_posix()
    except ValueError:
        return None
    return "" if relative == "." else relative


# --- the walk -------------------------------------------------------------------------------------


def _walk(
    root: str, skipped: list[SkippedPath], progress: Callable[[int], None] | None
) -> tuple[list[tuple[int, str, str]], int]:
    """Breadth-first walk; returns `(depth, relative, path)` of every context file, and folders listed."""
    candidates: list[tuple[int, str, str]] = []
    visited: set[tuple[int, int]] = set()
    queue: deque[tuple[str, str, int, tuple[_Ignore, ...]]] = deque([(root, "", 0, _rules_above(root, skipped))])
    scanned = 0
    while queue:
        folder, relative, depth, chain = queue.popleft()
        try:
            listing = _list(folder)
        except OSError as exc:
            skipped.append(SkippedPath(Path(folder), relative or ".", f"cannot list folder: {_describe(exc)}"))
            continue
        if listing.key is not None:
            if listing.key in visited:
                skipped.append(SkippedPath(Path(folder), relative, "folder already scanned (mount loop)"))
                continue
            visited.add(listing.key)
        scanned += 1
        if progress is not None and scanned % PROGRESS_EVERY_DIRS == 0:
            progress(scanned)
        if listing.venv and depth > 0:
            continue  # a virtual environment, whatever its folder's name
        base = relative + "/" if relative else ""
        prefix = folder if folder.endswith(os.sep) else folder + os.sep
        if listing.gitignore:
            path = prefix + ".gitignore"
            rules = _load_ignore(path, strip=len(base), prefix="", relative=base + ".gitignore", skipped=skipped)
            if rules is not None:
                chain = (*chain, rules)
        for name in listing.found:
            child = base + name
            if not (chain and _ignored(chain, child)):
                candidates.append((depth, child, prefix + name))
        for name in listing.folders:
            child = base + name
            if not (chain and _ignored(chain, child + "/")):
                queue.append((prefix + name, child, depth + 1, chain))
    return candidates, scanned


@dataclass(slots=True)
class _Listing:
    """What one folder holds, as far as the walk cares."""

    key: tuple[int, int] | None
    """`(st_dev, st_ino)`, or None where the platform reports no inode numbers."""
    folders: list[str] = field(default_factory=list)
    """Sub-folders worth entering by name (not dot-folders, not `SKIPPED_DIR_NAMES`, not symlinks)."""
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
    out = _Listing(key=(st.st_dev, st.st_ino) if st.st_ino else None)
    with listing:
        for entry in listing:
            name = entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)  # from the entry's type: no stat
            except OSError:
                is_dir = False
            if is_dir:
                if name[0] != "." and name not in SKIPPED_DIR_NAMES:
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


def _read(path: Path, relative: str, depth: int, *, max_bytes: int, huge_bytes: int) -> ContextFile | SkippedPath:
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
