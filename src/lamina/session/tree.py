"""The session tree: paths from the root and the provider view (pure).

A session log is a tree of entries linked by `parent_id`. The path to an entry is its ancestry
from the root. The provider view is what the model is sent: the path from the leaf back to the
latest compaction boundary on it, as the boundary's summary plus the entries it kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lamina.session.entries import CompactionBoundary, LogEntry, UnknownEntry


class MissingEntryError(KeyError):
    """A path walked to a `parent_id` that is not among the given entries."""

    def __init__(self, entry_id: str) -> None:
        self.entry_id = entry_id
        super().__init__(entry_id)


def path_to(entries: Mapping[str, LogEntry], entry_id: str | None) -> list[LogEntry]:
    """The entries from the root to `entry_id`, inclusive (empty for `None`)."""
    path: list[LogEntry] = []
    seen: set[str] = set()
    current = entry_id
    while current is not None:
        if current in seen:  # a cycle can only come from a hand-edited log; stop rather than loop
            break
        seen.add(current)
        entry = entries.get(current)
        if entry is None:
            raise MissingEntryError(current)
        path.append(entry)
        current = entry.parent_id
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


def view_start_id(entries: Mapping[str, LogEntry], leaf_id: str | None) -> str | None:
    """The id of the first entry the provider view of `leaf_id` needs, walking back only as far as needed.

    Raises `MissingEntryError` when `entries` does not reach that far back.
    """
    current = leaf_id
    wanted: str | None = None  # first_kept_id of the boundary found on the way
    oldest: str | None = None
    while current is not None:
        entry = entries.get(current)
        if entry is None:
            raise MissingEntryError(current)
        oldest = entry.id
        if wanted is not None and entry.id == wanted:
            return entry.id
        if wanted is None and isinstance(entry, CompactionBoundary):
            if entry.first_kept_id is None:
                return entry.id
            wanted = entry.first_kept_id
        current = entry.parent_id
    return oldest
