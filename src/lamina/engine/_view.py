"""The live provider view: the entries a request sends, what the path folds to, and the prune tally (pure)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import overload

from lamina.compaction import (
    PrunePolicy,
    apply_prunes,
    choose_prune,
    entry_tokens,
    prunable_tokens,
    prune_floor,
    server_cleared,
    show_server_clearing,
)
from lamina.engine._outbox import Outbox
from lamina.engine._session_book import resets_seen
from lamina.engine._state import PathState, fold_path
from lamina.pricing import ContextEditing, Outlook
from lamina.session import LogEntry, ProviderView, ToolCall, ToolOutputPruned, ToolResult, TurnRecord, UserMessage
from lamina.tokens import TokenEstimator


class HistorySlice(Sequence[LogEntry]):
    """A fixed-length, read-only view of the engine's append-only provider view (O(1) to take)."""

    __slots__ = ("_items", "_length")

    def __init__(self, items: list[LogEntry], length: int) -> None:
        """A view of the first `length` items of `items`, which may grow after it is made.

        Args:
            items: The live list of entries.
            length: How many of them this slice shows.
        """
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


class LiveView:
    """The provider view of the current path, kept as entries are recorded, with what its tails showed.

    Also keeps what the path's entries fold to (its state: skills, plan; its outbox), and the prune
    tally: the policy, where what a prune may take starts, and how many tokens it may take from
    there, kept up as results are recorded, so a turn need not walk a long view.
    """

    def __init__(self, view: ProviderView, estimator: TokenEstimator) -> None:
        """The live view of a provider view, its prunes applied and its tokens counted.

        Args:
            view: The provider view the log gives for the current path.
            estimator: Counts each entry's tokens.
        """
        self._estimator = estimator
        self.entries: list[LogEntry] = apply_prunes(view.entries)
        self.boundary = view.boundary
        self.summary = view.boundary.summary if view.boundary else None
        self.cleared = server_cleared(self.entries)
        """The calls whose results the server's context editing clears (sent whole, never offered to a prune again)."""
        self.tokens = self._seen_tokens()
        self._prune_tally: tuple[PrunePolicy, int, int] | None = None
        self.last_seen: dict[str, str] = {}
        self.stable_seen_digest: str | None = None
        self.turn_since_boundary = False
        self.path = PathState()
        """The current path's state: the skills in use and the latest plan (`_state.fold_path`)."""
        self.outbox = Outbox()
        """The one-shots queued on the current path and not delivered on it."""
        # After a compaction the next tail states the whole session state again: entries kept from
        # before the boundary were sent under an older prefix and beside tails the summary replaced,
        # so only what follows the boundary counts as seen.
        self.fresh_from = 0
        if view.boundary is not None:
            boundary_id = view.boundary.id
            after = (i for i, e in enumerate(self.entries) if e.parent_id == boundary_id)
            self.fresh_from = next(after, len(self.entries))
            self._fold(view.boundary)  # its snapshot restates the path's state
        for entry in self.entries[self.fresh_from :]:
            self._track(entry)

    def slice(self, length: int | None = None) -> HistorySlice:
        """The first `length` entries (all by default), read-only and O(1) to take."""
        return HistorySlice(self.entries, len(self.entries) if length is None else length)

    def append(self, entry: LogEntry) -> None:
        """Add a recorded entry that is neither a boundary nor a prune."""
        self.entries.append(entry)
        self.tokens += entry_tokens(entry, estimator=self._estimator)
        if isinstance(entry, ToolResult) and self._prune_tally is not None:
            policy, floor, tokens = self._prune_tally
            call = self._call_in_turn(entry.call_id)
            tokens += prunable_tokens(entry, call, policy, estimator=self._estimator)
            self._prune_tally = (policy, floor, tokens)
        self._track(entry)

    def prune(self, entry: ToolOutputPruned) -> None:
        """Apply a recorded prune: a new list, so the turns prepared before keep the view they were sent with."""
        self.entries = apply_prunes([*self.entries, entry])
        self.cleared = server_cleared(self.entries)
        self.tokens = self._seen_tokens()
        self._prune_tally = None

    def _seen_tokens(self) -> int:
        """The view's tokens as the model reads them (the server's cleared results as its placeholder)."""
        seen = show_server_clearing(self.entries) if self.cleared else self.entries
        return sum(entry_tokens(e, estimator=self._estimator) for e in seen)

    def _fold(self, entry: LogEntry) -> None:
        self.path = fold_path(self.path, entry)
        self.outbox.observe(entry)

    def _track(self, entry: LogEntry) -> None:
        """Fold an entry into the path, and note what a turn's tail showed (for entries after the latest boundary)."""
        self._fold(entry)
        if isinstance(entry, TurnRecord):
            for part in entry.volatile:
                self.last_seen[part.key] = part.text
            self.stable_seen_digest = entry.stable_digest
            self.turn_since_boundary = True
        elif resets_seen(entry):
            # a fresh or compacted provider session has seen none of the tails: the next one states everything
            self.last_seen = {}
            self.stable_seen_digest = None

    def chosen_prune(
        self,
        policy: PrunePolicy | None,
        outlook: Callable[[], Outlook] | None = None,
        editing: ContextEditing = "lamina",
    ) -> ToolOutputPruned | None:
        """The prune `policy` would make now, looking only at what is left to take (O(1) while too little is).

        `outlook` gives what the cost model prices it from (a priced policy keeps only what pays);
        `editing`, whether the server's clearing is priced beside Lamina's prune (`choose_prune`).
        """
        if policy is None:
            return None
        if self._prune_tally is None or self._prune_tally[0] != policy:
            floor = prune_floor(self.entries)
            calls: dict[str, ToolCall] = {e.call_id: e for e in self.entries[floor:] if isinstance(e, ToolCall)}
            tokens = sum(
                prunable_tokens(e, calls.get(e.call_id), policy, estimator=self._estimator)
                for e in self.entries[floor:]
                if isinstance(e, ToolResult) and e.call_id not in self.cleared
            )
            self._prune_tally = (policy, floor, tokens)
        _, floor, tokens = self._prune_tally
        priced = outlook() if outlook is not None and policy.priced else None
        if tokens < policy.floor_tokens(priced):
            return None
        return choose_prune(
            self.entries, policy, estimator=self._estimator, start=floor, outlook=priced, editing=editing
        )

    def _call_in_turn(self, call_id: str) -> ToolCall | None:
        """The call `call_id` answers, looked for back to the start of the turn (where a tool loop's calls are)."""
        for entry in reversed(self.entries):
            if isinstance(entry, ToolCall) and entry.call_id == call_id:
                return entry
            if isinstance(entry, UserMessage):
                return None
        return None

    def window_start(self) -> int:
        """Where the provider's current context window starts.

        After the latest compaction, and after the latest reset of the provider's own context
        (nothing before it counts as seen).
        """
        start = self.fresh_from
        for i in range(len(self.entries) - 1, start - 1, -1):
            if resets_seen(self.entries[i]):
                return i + 1
        return start

    def last_seen_before(self, index: int) -> dict[str, str]:
        """The volatile parts the window's tails showed before the entry at `index`."""
        seen: dict[str, str] = {}
        for entry in self.entries[self.window_start() : index]:
            if isinstance(entry, TurnRecord):
                for part in entry.volatile:
                    seen[part.key] = part.text
        return seen

    def window_calls(self) -> tuple[tuple[ToolCall, ToolResult], ...]:
        """The tool calls of the current context window with their results, in order."""
        calls: dict[str, ToolCall] = {}
        pairs: list[tuple[ToolCall, ToolResult]] = []
        for entry in self.entries[self.window_start() :]:
            if isinstance(entry, ToolCall):
                calls[entry.call_id] = entry
            elif isinstance(entry, ToolResult) and (call := calls.pop(entry.call_id, None)) is not None:
                pairs.append((call, entry))
        return tuple(pairs)
