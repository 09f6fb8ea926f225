"""The loaded index of an open session and the reads of `SessionLog` over it (pure: no I/O here).

A session of any store holds the entries it has loaded in append order, its leaf, and the mended
parents of entries whose written parent was lost (`_links`). `SessionCore` answers every read of
`SessionLog` from that index; a backend provides loading (`load_all`, and whatever fills the
index at open), its header (`_header`), its folder of files (`_files_root`) and the writes, and
keeps the index with `_remember` and `_forget_last`.
"""

from __future__ import annotations

import dataclasses
from abc import abstractmethod
from operator import attrgetter
from pathlib import Path
from typing import Final

import msgspec

from lamina.errors import LaminaError, MissingEntryError, UsageError
from lamina.session._closing import Closing
from lamina.session._entries import LogEntry, UnknownEntry
from lamina.session._protocol import SessionSummary
from lamina.session._tree import ProviderView, parent_of, path_to, provider_view, view_start_id

_ENTRY_ID: Final = attrgetter("id")


class SessionCore(Closing):
    """The reads of an open session over its loaded index; subclasses load and write."""

    def __init__(self) -> None:
        self._entry_list: list[LogEntry] = []
        """The loaded entries in append order."""
        self._by_id: dict[str, LogEntry] | None = {}
        """Id -> entry of the loaded entries; None until first needed after a load (see `_entries`)."""
        self._order_list: list[str] | None = []
        """Ids of `_entry_list`, in the same order; None until first needed after a load."""
        self._links: dict[str, str | None] = {}
        """Mended parents of entries whose written parent is lost, missing, later or in a cycle."""
        self._leaf: str | None = None
        self._count = 0
        """Entries in the whole session (loaded or not), unflushed appends included."""

    # -- what a backend provides -------------------------------------------------------------

    @property
    def id(self) -> str:
        """The session's id (its header's)."""
        return self._header().id

    @abstractmethod
    def _header(self) -> SessionSummary:
        """The session's metadata (its entry count is replaced by `_count`)."""

    @property
    @abstractmethod
    def _files_root(self) -> Path:
        """The folder holding the session's `attachments/`, `data/` and `plans/`."""

    @abstractmethod
    def load_all(self) -> None:
        """Load the whole history into the index (a no-op when it is all loaded)."""

    def _unreachable(self, exc: MissingEntryError) -> LaminaError:
        """The error for a path that still misses an entry once everything is loaded."""
        return exc

    def _leaf_view_start(self) -> str | None:
        """The first entry the leaf's provider view needs (raises `MissingEntryError` if not loaded)."""
        return view_start_id(self._entries, self._leaf, self._links)

    # -- the index ---------------------------------------------------------------------------

    @property
    def _entries(self) -> dict[str, LogEntry]:
        """Id -> entry of the loaded entries, built on first use after a load."""
        if self._by_id is None:
            self._by_id = dict(zip(self._order, self._entry_list, strict=True))
        return self._by_id

    @property
    def _order(self) -> list[str]:
        """Ids of the loaded entries in append order, built on first use after a load."""
        if self._order_list is None:
            self._order_list = list(map(_ENTRY_ID, self._entry_list))
        return self._order_list

    def _remember(self, entry: LogEntry) -> None:
        """Add a newly written entry to the end of the index (it does not move the leaf)."""
        if self._by_id is not None:  # else built from the lists when first needed
            self._by_id[entry.id] = entry
        if self._order_list is not None:
            self._order_list.append(entry.id)
        self._entry_list.append(entry)

    def _forget_last(self) -> None:
        """Take the last entry back out of the index (a write that did not happen)."""
        entry = self._entry_list.pop()
        if self._by_id is not None:
            del self._by_id[entry.id]
        if self._order_list is not None:
            self._order_list.pop()

    def _last_id(self) -> str | None:
        return self._entry_list[-1].id if self._entry_list else None

    def _effective(self, entry: LogEntry) -> LogEntry:
        """`entry` with its mended parent, when its written one was lost."""
        if entry.id not in self._links:
            return entry
        return with_parent(entry, self._links[entry.id])

    def _in_order(self) -> list[LogEntry]:
        if self._links:
            return [self._effective(e) for e in self._entry_list]
        return list(self._entry_list)

    # -- the reads of `SessionLog` -----------------------------------------------------------

    @property
    def leaf_id(self) -> str | None:
        return self._leaf

    @property
    def info(self) -> SessionSummary:
        """The session's metadata as `sessions list` shows it (the entry count includes unflushed appends)."""
        return dataclasses.replace(self._header(), entry_count=self._count)

    @property
    def attachments_dir(self) -> Path:
        return self._files_root / "attachments"

    @property
    def data_dir(self) -> Path:
        return self._files_root / "data"

    @property
    def plans_dir(self) -> Path:
        return self._files_root / "plans"

    def get(self, entry_id: str) -> LogEntry:
        """The entry with this id (loading the whole history if it is older than what is loaded)."""
        if entry_id not in self._entries:
            self.load_all()
        try:
            return self._effective(self._entries[entry_id])
        except KeyError:
            raise UsageError(f"no entry {entry_id!r} in session {self.id}") from None

    def children(self, entry_id: str) -> list[LogEntry]:
        """The entries whose parent is `entry_id`, in append order (loading the whole history if it is older)."""
        self.get(entry_id)
        start = self._order.index(entry_id) + 1
        return [self._effective(e) for e in self._entry_list[start:] if parent_of(e, self._links) == entry_id]

    def entries(self) -> list[LogEntry]:
        """Every entry of the session in append order (the full history a UI scrolls through)."""
        self.load_all()
        return self._in_order()

    def entries_loaded(self) -> list[LogEntry]:
        """The entries in memory, in append order (after a resume: from the boundary on)."""
        return self._in_order()

    def loaded_count(self) -> int:
        """How many entries are in memory (a resume loads only the tail)."""
        return len(self._entry_list)

    def path(self, entry_id: str | None = None) -> list[LogEntry]:
        """The entries from the root to `entry_id` (default: the leaf)."""
        target = self._leaf if entry_id is None else entry_id
        if target is not None and target not in self._entries:
            self.load_all()
            if target not in self._entries:
                raise UsageError(f"no entry {target!r} in session {self.id}")
        try:
            path = path_to(self._entries, target, self._links)
        except MissingEntryError:
            self.load_all()
            try:
                path = path_to(self._entries, target, self._links)
            except MissingEntryError as exc:  # mending makes this unreachable; never a raw KeyError
                raise self._unreachable(exc) from None
        return [self._effective(e) for e in path] if self._links else path

    def view(self, entry_id: str | None = None) -> ProviderView:
        """The provider view of the current leaf, or of the path to `entry_id` (walking back only as needed)."""
        if entry_id is not None:
            self.get(entry_id)
        return provider_view(self._view_path(entry_id))

    def _view_path(self, entry_id: str | None) -> list[LogEntry]:
        leaf = self._leaf if entry_id is None else entry_id
        try:
            start = self._leaf_view_start() if entry_id is None else view_start_id(self._entries, leaf, self._links)
        except MissingEntryError:
            return self.path(leaf)
        if start is not None and start not in self._entries:  # a backend's remembered start, not loaded
            return self.path(leaf)
        path: list[LogEntry] = []
        current = leaf
        for _ in range(len(self._entries)):
            if current is None:
                break
            entry = self._entries[current]
            path.append(entry)
            if entry.id == start:
                break
            current = parent_of(entry, self._links)
        path.reverse()
        return [self._effective(e) for e in path] if self._links else path


def with_parent(entry: LogEntry, parent_id: str | None) -> LogEntry:
    """`entry` hanging from `parent_id` (an unknown entry's raw bytes are rewritten to match)."""
    if isinstance(entry, UnknownEntry):
        try:
            raw = msgspec.json.decode(entry.raw)
        except msgspec.DecodeError:  # never for a line the scan accepted; keep its bytes as they are
            return msgspec.structs.replace(entry, parent_id=parent_id)
        if isinstance(raw, dict):
            raw["parent_id"] = parent_id
            return msgspec.structs.replace(entry, parent_id=parent_id, raw=msgspec.json.encode(raw))
    return msgspec.structs.replace(entry, parent_id=parent_id)
