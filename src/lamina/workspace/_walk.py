"""The one folder walk over a project, with git's ignore rules and the name-based skips (I/O: disk, git).

`walk_folders(root, policy)` lists every folder below `root` that the rules let it enter, with the
files the `WalkPolicy` asks for; the context-file scan and the Glob and Grep tools both walk with it.
The decisions (what a listing keeps, which sub-folders wait for git) are pure functions; listing a
folder, reading a `.gitignore` and asking git are the I/O at the edge. See docs/workspace.md.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from lamina.workspace._ignore import (
    IgnoreRules,
    SkippedPath,
    describe_os_error,
    is_ignored,
    load_ignore,
    rules_above,
    tracked_folders,
    work_tree_top,
)

#: Folders never entered, tracked or not: version control's own.
VCS_DIR_NAMES: Final = frozenset({".git", ".hg", ".svn", ".bzr", ".jj", "_darcs", "CVS"})

# Non-blocking so that a FIFO swapped in after a stat cannot hang the open.
_OPEN_FLAGS: Final = (
    os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
)
_DIR_FLAGS: Final = _OPEN_FLAGS | getattr(os, "O_DIRECTORY", 0)
_SCANDIR_FD: Final = os.scandir in os.supports_fd


@dataclass(frozen=True, slots=True)
class WalkPolicy:
    """Which folders a walk enters at once and which files it lists."""

    file_names: frozenset[str] | None = None
    """Lower-case names of the files to list, matched in any letter case; None lists every file."""
    regular_files_only: bool = False
    """List only regular files (through links): never pipes, sockets, devices or broken links."""
    held_names: frozenset[str] = frozenset()
    """Folder names entered only where git tracks a file in them."""
    hold_dot_folders: bool = False
    """Hold every dot-folder the same way."""
    breadth_first: bool = False
    """Shallowest folders first; else depth first, each folder's files before its sub-folders."""
    name_lengths: frozenset[int] = field(init=False, default=frozenset())
    """The lengths of `file_names`: most names are passed over on their length alone."""

    def __post_init__(self) -> None:
        """Derive `name_lengths` from `file_names`."""
        lengths = frozenset(len(name) for name in self.file_names or ())
        object.__setattr__(self, "name_lengths", lengths)

    def wants(self, name: str) -> bool:
        """Whether a file called `name` is one to list (its type aside)."""
        names = self.file_names
        return names is None or (len(name) in self.name_lengths and name.lower() in names)

    def holds(self, name: str) -> bool:
        """Whether a sub-folder called `name` waits for git to say it holds tracked files."""
        return name in self.held_names or (self.hold_dot_folders and name[0] == ".")


@dataclass(slots=True)
class FolderListing:
    """What one folder holds, as far as a walk cares."""

    key: tuple[int, int] | None
    """`(st_dev, st_ino)`, or None where the platform reports no inode numbers."""
    ctime_ns: int
    """The folder's change time, read before its entries."""
    folders: list[str] = field(default_factory=list)
    """Sub-folders (not symlinks, not version-control folders), sorted."""
    folder_keys: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Each sub-folder's `(st_dev, st_ino)` as listed: the walk enters it only if it is still that folder."""
    files: list[str] = field(default_factory=list)
    """The files the policy lists, sorted."""
    symlinks: set[str] = field(default_factory=set)
    """Which of `files` are symlinks."""
    gitignore: bool = False
    """Whether the folder has a `.gitignore` file (through a link too)."""
    venv: bool = False
    """Whether the folder holds a `pyvenv.cfg`: a virtual environment, whatever its name."""


@dataclass(frozen=True, slots=True)
class WalkedFile:
    """One file a walk lists."""

    relative: str
    """POSIX path relative to the walk's root."""
    path: str
    """Absolute path (through the root as given: symlinks not resolved)."""
    symlink: bool


@dataclass(frozen=True, slots=True)
class WalkedFolder:
    """One folder a walk listed: entered, or held back as a virtual environment."""

    path: str
    relative: str
    """POSIX path relative to the walk's root; `` for the root."""
    depth: int
    """Folders between the root and this one: 0 for the root."""
    listing: FolderListing
    files: tuple[WalkedFile, ...]
    """The listed files no ignore rule ignores; none for a held folder."""
    held: bool = False
    """A virtual environment not entered (yet): entered later only if git tracks files in it."""


@dataclass(frozen=True, slots=True)
class _Queued:
    path: str
    relative: str
    depth: int
    chain: tuple[IgnoreRules, ...]
    key: tuple[int, int] | None = None
    """What the folder was when its parent was listed; a different folder found there is not entered."""


def list_folder(folder: str, policy: WalkPolicy) -> FolderListing:
    """List `folder` in one pass (I/O); most entries cost an `is_dir()` and a length check.

    Args:
        folder: The folder's absolute path.
        policy: Which files to list.

    Returns:
        The folder's identity, change time, sub-folders, listed files and markers.

    Raises:
        OSError: The folder cannot be opened or listed.
    """
    if not _SCANDIR_FD:
        st = os.stat(folder)
        with os.scandir(folder) as listing:
            return _read_entries(listing, st, policy)
    # Opening the folder once gives both its identity (fstat on the descriptor, no second path
    # lookup) and its listing. The descriptor stays open while the entries are read: an entry's
    # `is_file()` through a link stats relative to it.
    fd = os.open(folder, _DIR_FLAGS)
    try:
        st = os.fstat(fd)
        with os.scandir(fd) as listing:  # works on its own duplicate of fd
            return _read_entries(listing, st, policy)
    finally:
        os.close(fd)


def _read_entries(listing: Iterator[os.DirEntry[str]], st: os.stat_result, policy: WalkPolicy) -> FolderListing:
    out = FolderListing(key=(st.st_dev, st.st_ino) if st.st_ino else None, ctime_ns=st.st_ctime_ns)
    for entry in listing:
        name = entry.name
        try:
            is_dir = entry.is_dir(follow_symlinks=False)  # from the entry's type: no stat
        except OSError:
            is_dir = False
        if is_dir:
            if name not in VCS_DIR_NAMES:
                out.folders.append(name)
                if (key := _entry_key(entry)) is not None:
                    out.folder_keys[name] = key
            continue
        if name == ".gitignore":
            out.gitignore = _is_file(entry)
        elif name == "pyvenv.cfg":
            out.venv = True
        if policy.wants(name) and (not policy.regular_files_only or _is_file(entry)):
            out.files.append(name)
            if entry.is_symlink():
                out.symlinks.add(name)
    out.folders.sort()
    out.files.sort()
    return out


def _entry_key(entry: os.DirEntry[str]) -> tuple[int, int] | None:
    """The entry's `(st_dev, st_ino)` (a link not followed; a mount point as mounted), or None if unknown."""
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if st.st_ino else None


def _is_file(entry: os.DirEntry[str]) -> bool:
    # Regular files only, through a link too: a FIFO would block a reader forever.
    try:
        return entry.is_file()
    except OSError:
        return False


def walk_folders(
    root: str,
    policy: WalkPolicy,
    *,
    skipped: list[SkippedPath],
    inputs: list[str] | None = None,
    before_listing: Callable[[str], object] | None = None,
    root_key: tuple[int, int] | None = None,
) -> Iterator[WalkedFolder]:
    """Every folder below `root` a project walk enters, with its files, in the policy's order (I/O).

    `root` itself is always walked, even if ignored or held by name: naming it was a choice.
    Symlinked folders are never followed; a folder met twice (a bind mount inside itself) is
    entered once; a folder that is no longer the one its parent listed (a link swapped in since) is
    not entered. Held folders are entered once the rest is walked, if git tracks a file in them.

    Args:
        root: The walk's root folder (absolute).
        policy: Which folders wait for git and which files are listed.
        skipped: Folders that cannot be listed, mount loops and unusable rule-file lines are added here.
        inputs: When given, every path whose change could change the walk is added here (rule
            files, present or not, git's configuration and index).
        before_listing: Called with each folder just before it is listed (to watch it first).
        root_key: The root's `(st_dev, st_ino)` where the caller checked it: another folder found at
            `root` (a link swapped in since) is not walked.

    Yields:
        Each folder listed, held virtual environments included.
    """
    pending = deque([_Queued(root, "", 0, rules_above(root, skipped, inputs), root_key)])
    held: list[_Queued] = []
    entered: set[str] = set()  # held folders git tracks files in: entered whatever they look like
    visited: set[tuple[int, int]] = set()
    while True:
        while pending:
            item = pending.popleft() if policy.breadth_first else pending.pop()
            if before_listing is not None:
                before_listing(item.path)
            found = _enter(item, policy, held, visited, entered, skipped, inputs)
            if found is None:
                continue
            yield found[0]
            pending.extend(found[1] if policy.breadth_first else reversed(found[1]))
        again = _tracked(root, held, inputs)
        if not again:
            return
        entered.update(item.path for item in again)
        pending.extend(again if policy.breadth_first else reversed(again))
        held = []


def _tracked(root: str, held: list[_Queued], inputs: list[str] | None) -> list[_Queued]:
    """The held folders that git tracks files in, in the order they were held (I/O: git)."""
    if not held:
        return []
    top = work_tree_top(root)
    if top is None:
        return []
    if inputs is not None:
        inputs.append(os.path.join(top, ".git", "index"))
    tracked = tracked_folders(root, [item.relative for item in held])
    return [item for item in held if item.relative in tracked]


def _enter(
    item: _Queued,
    policy: WalkPolicy,
    held: list[_Queued],
    visited: set[tuple[int, int]],
    entered: set[str],
    skipped: list[SkippedPath],
    inputs: list[str] | None,
) -> tuple[WalkedFolder, list[_Queued]] | None:
    """List one folder: what the walk yields for it and the sub-folders to walk next (None: neither)."""
    try:
        listing = list_folder(item.path, policy)
    except OSError as exc:
        reason = f"cannot list folder: {describe_os_error(exc)}"
        skipped.append(SkippedPath(Path(item.path), item.relative or ".", reason))
        return None
    if item.key is not None and listing.key is not None and listing.key != item.key:
        reason = "the folder changed while it was walked (another put in its place)"
        skipped.append(SkippedPath(Path(item.path), item.relative or ".", reason))
        return None
    if listing.venv and item.depth > 0 and item.path not in entered:
        # A virtual environment, whatever its folder's name: held like the named folders. Not
        # marked visited, so it can be entered later.
        held.append(item)
        return WalkedFolder(item.path, item.relative, item.depth, listing, (), held=True), []
    if listing.key is not None:
        if listing.key in visited:
            skipped.append(SkippedPath(Path(item.path), item.relative, "folder already scanned (mount loop)"))
            return None
        visited.add(listing.key)
    base = item.relative + "/" if item.relative else ""
    prefix = item.path if item.path.endswith(os.sep) else item.path + os.sep
    chain = item.chain
    if listing.gitignore:
        chain = _with_rule_file(chain, prefix + ".gitignore", base, skipped, inputs)
    files = kept_files(listing, chain, base, prefix)
    walk_now, wait = split_folders(listing, chain, policy, base)
    keys = listing.folder_keys
    held.extend(_Queued(prefix + name, base + name, item.depth + 1, chain, keys.get(name)) for name in wait)
    nxt = [_Queued(prefix + name, base + name, item.depth + 1, chain, keys.get(name)) for name in walk_now]
    return WalkedFolder(item.path, item.relative, item.depth, listing, files), nxt


def _with_rule_file(
    chain: tuple[IgnoreRules, ...], path: str, base: str, skipped: list[SkippedPath], inputs: list[str] | None
) -> tuple[IgnoreRules, ...]:
    """`chain` with the rules of the folder's own `.gitignore` at `path` appended (I/O: disk)."""
    if inputs is not None:
        inputs.append(path)
    rules = load_ignore(path, strip=len(base), prefix="", relative=base + ".gitignore", skipped=skipped)
    return chain if rules is None else (*chain, rules)


def kept_files(
    listing: FolderListing, chain: tuple[IgnoreRules, ...], base: str, prefix: str
) -> tuple[WalkedFile, ...]:
    """The listed files `chain` does not ignore (pure).

    Args:
        listing: The folder's listing.
        chain: The ignore rules that apply in the folder, its own `.gitignore` last.
        base: The folder's root-relative POSIX path with a trailing `/` (`` for the root).
        prefix: The folder's path with a trailing separator.

    Returns:
        The files, in the listing's order.
    """
    return tuple(
        WalkedFile(base + name, prefix + name, name in listing.symlinks)
        for name in listing.files
        if not (chain and is_ignored(chain, base + name))
    )


def split_folders(
    listing: FolderListing, chain: tuple[IgnoreRules, ...], policy: WalkPolicy, base: str
) -> tuple[list[str], list[str]]:
    """The sub-folders to walk now and those that wait for git, ignored ones left out (pure).

    Args:
        listing: The folder's listing.
        chain: The ignore rules that apply in the folder.
        policy: Which names wait for git.
        base: The folder's root-relative POSIX path with a trailing `/` (`` for the root).

    Returns:
        The names to walk now and the names held, each in the listing's order.
    """
    now: list[str] = []
    wait: list[str] = []
    for name in listing.folders:
        if chain and is_ignored(chain, base + name + "/"):
            continue
        (wait if policy.holds(name) else now).append(name)
    return now, wait
