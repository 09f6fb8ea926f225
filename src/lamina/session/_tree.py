"""The session tree: paths from the root, the provider view, and links mended after damage (pure).

Described in docs/session-log.md ("The session tree").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Final, Literal

from lamina.errors import MissingEntryError
from lamina.session._entries import CompactionBoundary, LogEntry, UnknownEntry

Links = Mapping[str, "str | None"]
"""Effective parents that differ from the `parent_id` written in the log."""


_ID: Final = attrgetter("id")
_PARENT: Final = attrgetter("parent_id")


def parent_of(entry: LogEntry, links: Links | None) -> str | None:
    """The effective parent of `entry`: its mended link if it has one, else its `parent_id`."""
    if links and entry.id in links:
        return links[entry.id]
    return entry.parent_id


def path_to(entries: Mapping[str, LogEntry], entry_id: str | None, links: Links | None = None) -> list[LogEntry]:
    """The entries from the root to `entry_id`, inclusive (empty for `None`)."""
    path: list[LogEntry] = []
    seen: set[str] = set()
    current = entry_id
    while current is not None:
        if current in seen:  # only unmended links can loop; stop rather than hang
            break
        seen.add(current)
        entry = entries.get(current)
        if entry is None:
            raise MissingEntryError(current)
        path.append(entry)
        current = parent_of(entry, links)
    path.reverse()
    return path


@dataclass(frozen=True, slots=True)
class ProviderView:
    """What the model is sent from history: a compaction summary (if any) and the entries after it."""

    boundary: CompactionBoundary | None
    """The latest compaction on the path; its summary replaces everything before the kept entries."""
    entries: tuple[LogEntry, ...]
    """Kept and newer entries in order; unknown entry types are already skipped."""


def provider_view(path: list[LogEntry]) -> ProviderView:
    """The provider view of a root-to-leaf path."""
    boundary_index = None
    for index in range(len(path) - 1, -1, -1):
        if isinstance(path[index], CompactionBoundary):
            boundary_index = index
            break
    if boundary_index is None:
        return ProviderView(None, tuple(e for e in path if not isinstance(e, UnknownEntry)))
    boundary = path[boundary_index]
    assert isinstance(boundary, CompactionBoundary)
    start = boundary_index + 1
    if boundary.first_kept_id is not None:
        for index in range(boundary_index - 1, -1, -1):
            if path[index].id == boundary.first_kept_id:
                start = index
                break
    kept = (e for i, e in enumerate(path[start:], start) if i != boundary_index)
    return ProviderView(boundary, tuple(e for e in kept if not isinstance(e, UnknownEntry)))


def view_start_id(entries: Mapping[str, LogEntry], leaf_id: str | None, links: Links | None = None) -> str | None:
    """The id of the first entry the provider view of `leaf_id` needs, walking back only as far as needed.

    Raises `MissingEntryError` when `entries` does not reach that far back.
    """
    current = leaf_id
    wanted: str | None = None  # first_kept_id of the boundary found on the way
    oldest: str | None = None
    steps = 0
    while current is not None:
        entry = entries.get(current)
        if entry is None:
            raise MissingEntryError(current)
        steps += 1
        if steps > len(entries):  # a loop through unmended links: stop rather than hang
            return oldest
        oldest = entry.id
        if wanted is not None and entry.id == wanted:
            return entry.id
        if wanted is None and isinstance(entry, CompactionBoundary):
            if entry.first_kept_id is None:
                return entry.id
            wanted = entry.first_kept_id
        current = parent_of(entry, links)
    return oldest


# -- mending links ----------------------------------------------------------------------------

LinkProblem = Literal["missing_parent", "lost_parent", "cycle", "later_parent"]


@dataclass(frozen=True, slots=True)
class Relink:
    """An entry whose written parent could not be used, and the ancestor it now hangs from."""

    entry_id: str
    index: int
    """Position of the entry in file order."""
    written_parent: str
    new_parent: str | None
    problem: LinkProblem
    """`lost_parent`: the parent's line was damaged; `missing_parent`: no such entry anywhere;
    `cycle`: the parent chain loops back to the entry; `later_parent`: the parent comes later in the file."""

    def describe(self) -> str:
        why = {
            "missing_parent": "names a parent that is not in the log",
            "lost_parent": "names a parent whose line is damaged",
            "cycle": "names a parent that leads back to itself (a cycle)",
            "later_parent": "names a parent that comes later in the log",
        }[self.problem]
        to = f"re-linked to {self.new_parent}" if self.new_parent is not None else "now a root"
        return f"entry {self.entry_id} {why} ({self.written_parent}); {to}"


@dataclass(frozen=True, slots=True)
class LostLine:
    """A damaged line, placed in file order: what `mend_links` knows of the entry it held."""

    before: int
    """Index (in file order) of the first surviving entry after the damaged line."""
    lost_id: str | None
    lost_parent: str | None


def find_broken_links(order: Sequence[LogEntry], ids: list[str] | None = None) -> list[int]:
    """Indices of entries whose parent is not an earlier entry of `order` (one pass, no lookups by walk).

    `ids` is the ids of `order`, when the caller has them already.
    """
    if ids is None:
        ids = list(map(_ID, order))
    parents = list(map(_PARENT, order))
    if parents[1:] == ids[:-1]:  # a chain without branches (the common case), compared in C
        return [0] if parents and parents[0] is not None else []
    seen: set[str] = set()
    add = seen.add
    broken: list[int] = []
    for index, entry in enumerate(order):
        parent = entry.parent_id
        if parent is not None and parent not in seen:
            broken.append(index)
        add(entry.id)
    return broken


def mend_links(
    order: Sequence[LogEntry], lost: Sequence[LostLine] = (), *, ids: list[str] | None = None
) -> list[Relink]:
    """Re-link every entry of a whole log whose parent is not an earlier entry (pure).

    `order` is every surviving entry in file order, duplicates already removed. An entry whose parent
    was on a damaged line hangs from that line's salvaged parent (followed through further damaged
    lines) when it survives; otherwise, and for missing or later parents, from the nearest surviving
    entry before it in the file, which in a log without branches is exactly its lost ancestor.
    """
    broken = find_broken_links(order, ids)
    if not broken:
        return []
    position = {entry.id: index for index, entry in enumerate(order)}
    lost_parents = {line.lost_id: line.lost_parent for line in lost if line.lost_id is not None}
    relinks: list[Relink] = []
    for index in broken:
        entry = order[index]
        written = entry.parent_id
        assert written is not None
        new_parent: str | None = order[index - 1].id if index > 0 else None
        problem: LinkProblem
        if written in position:
            problem = "cycle" if _leads_back(order, position, written, entry.id) else "later_parent"
        elif written in lost_parents:
            problem = "lost_parent"
            ancestor = _surviving_ancestor(written, lost_parents)
            if ancestor is None or (ancestor in position and position[ancestor] < index):
                new_parent = ancestor
        elif any(line.before <= index for line in lost):
            problem = "lost_parent"
        else:
            problem = "missing_parent"
        relinks.append(Relink(entry.id, index, written, new_parent, problem))
    return relinks


def _leads_back(order: Sequence[LogEntry], position: Mapping[str, int], start: str, target: str) -> bool:
    current: str | None = start
    for _ in range(len(order)):
        if current is None or current not in position:
            return False
        if current == target:
            return True
        current = order[position[current]].parent_id
    return True


def _surviving_ancestor(lost_id: str, lost_parents: Mapping[str, str | None]) -> str | None:
    current: str | None = lost_id
    seen: set[str] = set()
    while current is not None and current in lost_parents and current not in seen:
        seen.add(current)
        current = lost_parents[current]
    return current if current not in seen else None
