"""A stored session read for the inspector: tree, branches, timeline, compactions, plans, totals (pure).

`SessionIndex` takes the whole log in file order (as `JsonlSession.entries()` gives it, links
already mended) once, and answers every view of it: the path to any leaf, the branches with their
fork points, the timeline items of a path (each marked in or out of the provider view), what each
compaction kept, the plans' states and the session's totals.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import msgspec

from lamina.pricing import DecisionOn, decision_on, decisions_on, describe_decision
from lamina.serve._calls import call_out
from lamina.serve._model import (
    AttachmentOut,
    BranchOut,
    CompactionOut,
    DecisionOut,
    Item,
    LaneWords,
    PartText,
    PlanOut,
    PlanTransition,
    UsageOut,
)
from lamina.session import (
    AssistantMessage,
    AttachmentRef,
    BranchSummary,
    CompactionBoundary,
    CostDecision,
    Label,
    LogEntry,
    OutboxRecord,
    PlanState,
    StateChange,
    ToolCall,
    ToolOutputPruned,
    ToolResult,
    TurnRecord,
    UnknownEntry,
    Usage,
    UserMessage,
    describe_entry,
    provider_view,
)

LIST_TEXT_CHARS: Final = 2_000
"""Characters of an entry's text the timeline shows (the entry's own page shows all of it, up to the page bound)."""
TITLE_CHARS: Final = 200
"""Characters of an entry's title (a tool's name, a model, a state's key and value come from the log)."""
_MEMO: Final = 16
"""Paths and views kept per index."""

BRIDGE_KINDS: Final = frozenset({"recovery", "branch_seed", "transfer_summary"})
"""One-shot kinds that bridge a gap for the model (a failed resume, a branch, a transfer): the user's
transcript hides them, the inspector marks them."""

INTERNAL: Final = (
    TurnRecord,
    StateChange,
    OutboxRecord,
    PlanState,
    Label,
    ToolOutputPruned,
    CompactionBoundary,
    UnknownEntry,
)
"""Records the conversation does not show as such: the timeline folds each into one line that opens on
click (a compaction's summary and lane are shown whole in the page's compactions section)."""

_V = TypeVar("_V")

ThumbnailUrl = Callable[[AttachmentRef], "str | None"]
Prices = Callable[[str, Usage], "float | None"]
"""The estimated cost of one model call (the CLI passes `lamina.pricing.cost_of`); None: no known price."""


@dataclass(frozen=True, slots=True)
class Totals:
    turns: int
    requests: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None


def totals_of(entries: Sequence[LogEntry], prices: Prices | None = None) -> Totals:
    """User messages, model calls, reported tokens and the estimated cost of a whole log (None without prices)."""
    turns = requests = input_tokens = output_tokens = 0
    cost: float | None = 0.0
    for entry in entries:
        if isinstance(entry, UserMessage):
            turns += 1
        elif isinstance(entry, AssistantMessage):
            requests += 1
            usage = entry.usage
            if usage is None:
                continue
            input_tokens += usage.input + usage.cache_read + usage.cache_write
            output_tokens += usage.output
            price = prices(entry.model, usage) if prices is not None else None
            cost = None if cost is None or price is None else cost + price
    return Totals(turns, requests, input_tokens, output_tokens, cost if requests else None)


def is_bridge(entry: LogEntry) -> bool:
    """Whether an entry is a hidden one-shot bridge (or a record of one)."""
    if bool(getattr(entry, "hidden", False)):  # a marker a later entry format may carry
        return True
    match entry:
        case OutboxRecord(kind=kind):
            return kind in BRIDGE_KINDS
        case TurnRecord(one_shots=one_shots):
            return any(p.key in BRIDGE_KINDS for p in one_shots)
        case BranchSummary():
            return True
        case _:
            return False


def path_up_to(by_id: Mapping[str, LogEntry], entry_id: str | None) -> list[LogEntry]:
    """The entries from the root to `entry_id`, inclusive, as far as the log holds them.

    Args:
        by_id: The log's entries by id.
        entry_id: Where the path ends (None: an empty path).

    Returns:
        The path; a missing parent, or one already on it (a loop), starts it there.
    """
    path: list[LogEntry] = []
    seen: set[str] = set()
    current = entry_id
    while current is not None and current not in seen:
        seen.add(current)
        entry = by_id.get(current)
        if entry is None:
            break
        path.append(entry)
        current = entry.parent_id
    path.reverse()
    return path


class SessionIndex:
    """The tree of one log and everything the pages derive from it."""

    def __init__(self, entries: Sequence[LogEntry], leaf_id: str | None, *, prices: Prices | None = None) -> None:
        self.entries = list(entries)
        self.leaf_id = leaf_id
        self.by_id: dict[str, LogEntry] = {}
        self.position: dict[str, int] = {}
        self.children: dict[str, list[str]] = {}
        for index, entry in enumerate(self.entries):
            if entry.id in self.by_id:
                continue
            self.by_id[entry.id] = entry
            self.position[entry.id] = index
            if entry.parent_id is not None:
                self.children.setdefault(entry.parent_id, []).append(entry.id)
        self.requests: dict[str, int] = {}
        for entry in self.entries:
            if isinstance(entry, AssistantMessage):
                self.requests.setdefault(entry.id, len(self.requests))
        self.prices = prices
        self.totals = totals_of(self.entries, prices)
        self._paths: dict[str | None, list[LogEntry]] = {}
        self._views: dict[str | None, set[str]] = {}
        self._branches: list[BranchOut] | None = None
        self._by_call: dict[str, list[LogEntry]] | None = None
        """Memos: the index never changes once built (a changed log is indexed again)."""
        self._memo_lock = threading.Lock()
        """Pages read one index from several threads."""

    def has(self, entry_id: str) -> bool:
        return entry_id in self.by_id

    def path(self, leaf_id: str | None) -> list[LogEntry]:
        """The entries from the root to `leaf_id` (default: the session's leaf)."""
        key = leaf_id if leaf_id is not None else self.leaf_id
        held = self._paths.get(key)
        if held is None:
            held = self._remember(self._paths, key, self._path(key))
        return list(held)

    def _remember(self, memo: dict[str | None, _V], key: str | None, value: _V) -> _V:
        with self._memo_lock:
            memo[key] = value
            while len(memo) > _MEMO:
                del memo[next(iter(memo))]
        return value

    def _path(self, leaf_id: str | None) -> list[LogEntry]:
        return path_up_to(self.by_id, leaf_id if leaf_id is not None else self.leaf_id)

    def view_ids(self, path: list[LogEntry]) -> set[str]:
        """The ids the provider view of `path`'s end holds (do not change the set)."""
        key = path[-1].id if path else None
        held = self._views.get(key)
        if held is None:
            held = self._remember(self._views, key, {e.id for e in provider_view(path).entries})
        return held

    # -- branches ----------------------------------------------------------------------------------

    def leaves(self) -> list[str]:
        """Every leaf, depth first with children in file order: the first is the trunk (every fork's first child)."""
        roots = [e.id for e in self.entries if e.parent_id is None or e.parent_id not in self.by_id]
        out: list[str] = []
        stack = list(reversed(roots))
        seen: set[str] = set()
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            children = self.children.get(current)
            if not children:
                out.append(current)
            else:
                stack.extend(reversed(children))
        return out

    def branches(self) -> list[BranchOut]:
        """Every leaf as a branch: where it forked, from which branch, and whether its point was still in view."""
        if self._branches is None:
            self._branches = self._all_branches()
        return list(self._branches)

    def _all_branches(self) -> list[BranchOut]:
        leaves = self.leaves()
        owner: dict[str, str] = {}
        """Entry id -> the leaf of the first branch (in file order) that holds it."""
        out: list[BranchOut] = []
        for leaf in leaves:
            path = self.path(leaf)
            fork: str | None = None
            first = path[0].id if path else leaf
            for entry in reversed(path):
                if entry.id in owner:
                    fork = entry.id
                    break
                first = entry.id
            parent_leaf = owner.get(fork) if fork is not None else None
            for entry in path:
                owner.setdefault(entry.id, leaf)
            own = [e for e in path if self.position[e.id] >= self.position[first]] if fork else path
            label = next((e.text for e in own if isinstance(e, UserMessage)), "")
            out.append(
                BranchOut(
                    leaf_id=leaf,
                    label=_first_line(label) or type(self.by_id[leaf]).__name__,
                    fork_id=fork,
                    first_id=first,
                    depth=len(path),
                    own_entries=len(own),
                    updated=self.by_id[leaf].ts,
                    current=leaf == self.leaf_id,
                    point_in_view=self._point_in_view(fork, first) if fork is not None else None,
                    parent_leaf_id=parent_leaf,
                )
            )
        return out

    def _point_in_view(self, fork: str, first: str) -> bool:
        """Whether `fork` was in the provider view of where the session stood when `first` was appended."""
        before = self.position[first] - 1
        if before < 0:
            return True
        stood = self.entries[before]
        if stood.id == fork:
            return True
        return fork in self.view_ids(self.path(stood.id))

    # -- timeline ----------------------------------------------------------------------------------

    def items(
        self,
        path: list[LogEntry],
        *,
        offset: int = 0,
        limit: int | None = None,
        thumbnail: ThumbnailUrl | None = None,
        whole: bool = False,
    ) -> list[Item]:
        """Timeline items of `path[offset:offset+limit]`."""
        in_view = self.view_ids(path)
        turn = 0
        turns: dict[str, int] = {}
        for entry in path:
            if isinstance(entry, UserMessage):
                turn += 1
                turns[entry.id] = turn
        end = len(path) if limit is None else min(len(path), offset + limit)
        return [
            self.item(
                path[i], in_view=path[i].id in in_view, turn=turns.get(path[i].id), thumbnail=thumbnail, whole=whole
            )
            for i in range(max(offset, 0), end)
        ]

    def item(
        self,
        entry: LogEntry,
        *,
        in_view: bool,
        turn: int | None = None,
        thumbnail: ThumbnailUrl | None = None,
        whole: bool = False,
    ) -> Item:
        words = describe_entry(entry)
        title, text = words.title, words.detail
        title = title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1] + "…"
        shown = text if whole or len(text) <= LIST_TEXT_CHARS else text[:LIST_TEXT_CHARS]
        extra: dict[str, Any] = {"decision": decision_of(entry)}
        match entry:
            case UserMessage(attachments=refs):
                extra["attachments"] = [_attachment(ref, thumbnail) for ref in refs]
            case AssistantMessage(usage=usage):
                extra["request"] = self.requests.get(entry.id)
                if usage is not None:
                    extra["usage"] = UsageOut(
                        input=usage.input,
                        output=usage.output,
                        cache_read=usage.cache_read,
                        cache_write=usage.cache_write,
                    )
            case ToolCall(name=name, input=args):
                extra["call"] = call_out(name, args)
                extra.update(self._call_links(entry))
            case ToolResult(is_error=is_error, call_id=call_id):
                extra["is_error"] = is_error
                extra["call_entry_id"] = self._paired(call_id, entry, ToolCall)
            case TurnRecord(volatile=volatile, one_shots=one_shots):
                extra["parts"] = [PartText(key=p.key, text=p.text, part_id=p.part_id) for p in (*volatile, *one_shots)]
            case _:
                pass
        return Item(
            id=entry.id,
            parent_id=entry.parent_id,
            kind=_kind(entry),
            ts=entry.ts,
            title=title,
            text=shown,
            text_chars=len(text),
            in_view=in_view,
            hidden_bridge=is_bridge(entry),
            internal=isinstance(entry, INTERNAL),
            turn=turn,
            children=len(self.children.get(entry.id, ())),
            **extra,
        )

    def _call_links(self, call: ToolCall) -> dict[str, Any]:
        """A call's result entry and the request whose answer asked for it (the assistant message above it)."""
        asked: int | None = None
        current = call.parent_id
        while current is not None and asked is None:
            above = self.by_id.get(current)
            if not isinstance(above, AssistantMessage | ToolCall):
                break
            asked = self.requests.get(above.id) if isinstance(above, AssistantMessage) else None
            current = above.parent_id
        return {"result_id": self._paired(call.call_id, call, ToolResult), "asked_in": asked}

    def _paired(self, call_id: str, entry: LogEntry, kind: type[ToolCall] | type[ToolResult]) -> str | None:
        """The call's result after `entry` (or the result's call before it), by call id, on `entry`'s own path."""
        with self._memo_lock:
            if self._by_call is None:
                by_call: dict[str, list[LogEntry]] = {}
                for e in self.entries:
                    if isinstance(e, ToolCall | ToolResult):
                        by_call.setdefault(e.call_id, []).append(e)
                self._by_call = by_call
            held = self._by_call.get(call_id, [])
        mine = self.position[entry.id]
        if kind is ToolResult:  # the first result below the call
            return next((e.id for e in held if isinstance(e, ToolResult) and self._below(e.id, entry.id, mine)), None)
        calls = (e for e in reversed(held) if isinstance(e, ToolCall))
        return next((e.id for e in calls if self._below(entry.id, e.id, self.position[e.id])), None)

    def _below(self, lower: str, upper: str, upper_position: int) -> bool:
        """Whether `upper` is on the path from the root to `lower` (walked up, stopping above `upper`'s position)."""
        current: str | None = lower
        seen: set[str] = set()
        while current is not None and current not in seen and self.position.get(current, -1) >= upper_position:
            if current == upper:
                return True
            seen.add(current)
            parent = self.by_id.get(current)
            current = parent.parent_id if parent is not None else None
        return False

    # -- compactions and plans ---------------------------------------------------------------------

    def compactions(self, path: list[LogEntry]) -> list[CompactionOut]:
        out: list[CompactionOut] = []
        for index, entry in enumerate(path):
            if not isinstance(entry, CompactionBoundary):
                continue
            earlier = path[:index]
            kept_from = next((i for i, e in enumerate(earlier) if e.id == entry.first_kept_id), len(earlier))
            previous = max((i for i, e in enumerate(earlier) if isinstance(e, CompactionBoundary)), default=-1)
            summarised = max(kept_from - (previous + 1), 0)
            lane = entry.lane
            out.append(
                CompactionOut(
                    id=entry.id,
                    ts=entry.ts,
                    trigger=entry.trigger,
                    focus=entry.focus,
                    summary=entry.summary,
                    tokens_before=entry.tokens_before,
                    tokens_after=entry.tokens_after,
                    first_kept_id=entry.first_kept_id,
                    kept_entries=len(earlier) - kept_from,
                    summarised_entries=summarised,
                    files_read=list(entry.ledger.files_read),
                    files_modified=list(entry.ledger.files_modified),
                    open_tasks=list(entry.ledger.open_tasks),
                    lane=[LaneWords(turn=w.turn, ts=w.ts, text=w.text, omitted=w.omitted) for w in lane.messages],
                    lane_left_out=lane.left_out,
                    decision=decision_of(entry),
                    backend=next((d for d in decisions_out(entry) if d.on == "compaction backend"), None),
                )
            )
        return out

    def decisions(self, path: list[LogEntry]) -> list[DecisionOut]:
        """Every priced context decision logged on `path`, oldest first."""
        return [d for entry in path for d in decisions_out(entry)]

    def plans(self, path: list[LogEntry]) -> list[PlanOut]:
        plans: dict[str, list[PlanState]] = {}
        for entry in path:
            if isinstance(entry, PlanState):
                plans.setdefault(entry.plan_id, []).append(entry)
        return [
            PlanOut(
                plan_id=plan_id,
                plan_path=states[-1].plan_path,
                state=states[-1].state,
                transitions=[PlanTransition(entry_id=s.id, ts=s.ts, state=s.state, detail=s.detail) for s in states],
            )
            for plan_id, states in plans.items()
        ]


def decision_of(entry: LogEntry) -> DecisionOut | None:
    """The priced decision an entry logged (a prune, a compaction boundary, a turn record's TTL), else None."""
    found = decision_on(entry)
    return None if found is None else _decision_out(entry, *found)


def decisions_out(entry: LogEntry) -> list[DecisionOut]:
    """Every decision an entry logged: `decision_of`'s, then a compaction's backend (who wrote its summary, why)."""
    return [_decision_out(entry, on, d) for on, d in decisions_on(entry)]


def _decision_out(entry: LogEntry, on: DecisionOn, d: CostDecision) -> DecisionOut:
    return DecisionOut(
        entry_id=entry.id,
        ts=entry.ts,
        on=on,
        action=d.action,
        expected=d.expected,
        expected_nothing=d.expected_nothing,
        horizon=d.horizon,
        cache=d.cache,
        reread_chance=d.reread_chance,
        words=describe_decision(d),
    )


def _first_line(text: str) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= 80 else line[:79] + "…"


def _kind(entry: LogEntry) -> str:
    if isinstance(entry, UnknownEntry):
        return "unknown"
    return str(msgspec.inspect.type_info(type(entry)).tag)  # type: ignore[attr-defined]


def _attachment(ref: AttachmentRef, thumbnail: ThumbnailUrl | None) -> AttachmentOut:
    return AttachmentOut(
        sha256=ref.sha256,
        name=ref.name,
        media_type=ref.media_type,
        kind=ref.kind,
        size=ref.size,
        width=ref.width,
        height=ref.height,
        pages=ref.pages,
        tokens=ref.tokens,
        thumbnail=thumbnail(ref) if thumbnail is not None and ref.kind == "image" else None,
    )
