"""Project context files: `AGENTS.md` / `CLAUDE.md` found under a working directory (I/O: disk, git).

`find_context_files(root)` walks the tree breadth-first (`walk_folders`) and returns a `ContextFileScan`:
the files it read, the paths it had to skip (with a reason) and how many files the cap left out;
`nearest_context_files` picks the files that govern one path. `ContextFileFinder` (`_context_finder`)
caches scans. What the walk matches, skips and reads: docs/workspace.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from lamina.errors import UsageError
from lamina.workspace._context_read import TRUNCATION_MARK as TRUNCATION_MARK
from lamina.workspace._context_read import ContextFile as ContextFile
from lamina.workspace._context_read import read_context_file
from lamina.workspace._ignore import SkippedPath as SkippedPath
from lamina.workspace._walk import FolderListing, WalkPolicy, walk_folders

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
#: `progress` callbacks fire each time this many more folders have been listed.
PROGRESS_EVERY_DIRS: Final = 1000

#: How the scan walks: breadth-first, context files of any type (the read sorts them out), dot-folders
#: and the names above held until git says it tracks files in them.
CONTEXT_POLICY: Final = WalkPolicy(
    file_names=CONTEXT_FILE_NAMES, held_names=SKIPPED_DIR_NAMES, hold_dot_folders=True, breadth_first=True
)


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
    check_caps(max_files, max_bytes, huge_bytes)
    top = Path(root).resolve()
    skipped: list[SkippedPath] = []
    walk = walk_context_files(str(top), skipped, progress)
    scan, _ = read_found(top, Caps(max_files, max_bytes, huge_bytes, tuple(allowed_roots)), walk, skipped)
    return scan


@dataclass(frozen=True, slots=True)
class Caps:
    """The limits of one scan, and the folders a linked context file may point into."""

    max_files: int
    max_bytes: int
    huge_bytes: int
    allowed_roots: tuple[str | os.PathLike[str], ...]
    watch: bool = False


def check_caps(max_files: int, max_bytes: int, huge_bytes: int) -> None:
    """Refuse caps out of range.

    Raises:
        UsageError: `max_files` is negative, or `max_bytes` or `huge_bytes` is not positive.
    """
    if max_files < 0:
        raise UsageError(f"max_files must be 0 or more, got {max_files}")
    if max_bytes <= 0 or huge_bytes <= 0:
        raise UsageError(f"max_bytes and huge_bytes must be positive, got {max_bytes} and {huge_bytes}")


FolderView = tuple[tuple[str, ...], tuple[str, ...], bool, bool]
"""A folder's sub-folders, context files, and whether it has a `.gitignore` and a `pyvenv.cfg`."""


def folder_view(listing: FolderListing) -> FolderView:
    """What the scan takes from one folder's listing (pure): equal views walk the same."""
    return (tuple(listing.folders), tuple(listing.files), listing.gitignore, listing.venv)


@dataclass(slots=True)
class ContextWalk:
    """What the walk over a root found, and what it depends on."""

    candidates: list[tuple[int, str, str]] = field(default_factory=list)
    """`(depth, relative, path)` of every context file found, sorted."""
    scanned: int = 0
    folders: list[str] = field(default_factory=list)
    folder_ctimes: list[int] = field(default_factory=list)
    views: list[FolderView] = field(default_factory=list)
    watched: list[str] = field(default_factory=list)
    """Files (present or not) whose change could change the walk: rule files, git's index and config."""


def walk_context_files(
    root: str,
    skipped: list[SkippedPath],
    progress: Callable[[int], None] | None,
    before_listing: Callable[[str], object] | None = None,
) -> ContextWalk:
    """Breadth-first walk over `root`: context files, folders listed (with their stamps), files depended on (I/O).

    Args:
        root: The resolved root.
        skipped: What the walk could not use is added here.
        progress: Called with the number of folders listed so far, every `PROGRESS_EVERY_DIRS`.
        before_listing: Called with each folder just before it is listed (a folder watch's `add`).

    Returns:
        The walk's findings.
    """
    out = ContextWalk()
    for folder in walk_folders(
        root, CONTEXT_POLICY, skipped=skipped, inputs=out.watched, before_listing=before_listing
    ):
        # A held virtual environment is stamped too, so that a `pyvenv.cfg` removed is noticed.
        out.folders.append(folder.path)
        out.folder_ctimes.append(folder.listing.ctime_ns)
        out.views.append(folder_view(folder.listing))
        if folder.held:
            continue
        out.scanned += 1
        if progress is not None and out.scanned % PROGRESS_EVERY_DIRS == 0:
            progress(out.scanned)
        out.candidates.extend((folder.depth, file.relative, file.path) for file in folder.files)
    out.candidates.sort()
    return out


def read_found(
    top: Path, caps: Caps, walk: ContextWalk, walk_skipped: Sequence[SkippedPath]
) -> tuple[ContextFileScan, list[str]]:
    """Read the context files a walk found (again, after one changed) (I/O: disk).

    Args:
        top: The resolved root.
        caps: The scan's limits.
        walk: The walk's findings.
        walk_skipped: What the walk itself skipped.

    Returns:
        The scan, and the paths read (to stamp).
    """
    roots = (top, *caps.allowed_roots)
    files: list[ContextFile] = []
    skipped = list(walk_skipped)
    read: list[str] = []
    omitted = 0
    for depth, relative, path in walk.candidates:
        if len(files) >= caps.max_files:
            omitted += 1
            continue
        found = read_context_file(
            Path(path), relative, depth, max_bytes=caps.max_bytes, huge_bytes=caps.huge_bytes, roots=roots
        )
        read.append(path)
        if isinstance(found, ContextFile):
            files.append(found)
        else:
            skipped.append(found)
    skipped.sort(key=lambda s: (s.relative, s.line or 0))
    scan = ContextFileScan(
        root=top, files=tuple(files), skipped=tuple(skipped), omitted_over_cap=omitted, scanned_dirs=walk.scanned
    )
    return scan, read


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


def _relative_to(path: Path, root: Path) -> str | None:
    try:
        relative = path.relative_to(root).as_posix()
    except ValueError:
        return None
    return "" if relative == "." else relative
