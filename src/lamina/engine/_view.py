"""The live provider view: the entries a request sends, kept in memory as they are recorded."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

from lamina.session import LogEntry


class HistorySlice(Sequence[LogEntry]):
    """A fixed-length, read-only view of the engine's append-only provider view (O(1) to take)."""

    __slots__ = ("_items", "_length")

    def __init__(self, items: list[LogEntry], length: int) -> None:
        self._items = items
        self._length = length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> LogEntry: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[LogEntry]: ...
    def __getitem__(self, index: int | slice) -> LogEntry | Sequence[LogEntry]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._length)
            if start == 0 and step == 1:  # a prefix: another view, no copy
                return HistorySlice(self._items, max(stop, 0))
            return self._items[start:stop:step]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(index)
        return self._items[index]

    def __iter__(self) -> Iterator[LogEntry]:
        items = self._items
        for i in range(self._length):
            yield items[i]
