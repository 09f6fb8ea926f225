"""Request composition: how many tokens each component of a request takes, per request and over a session (pure).

Every token of a request is counted in exactly one component, named by a kind and a name:

- `system`: one system section (`system.tools`, `system.permissions`, ...);
- `tools`: one tool definition (name, description and input schema);
- `project`: a stable part sent as the conversation's first user message (a project context
  file, memory, the skill catalogue), without its `<untrusted>` label;
- `defang`: the `<untrusted ...>` labels around those parts, and the escapes (`[U+XXXX]`) and
  `(quoted) ` marks neutralising added to any text;
- `volatile`: one volatile part in a tail (date and time, session state, sources), with its tags;
- `one-shot`: one one-shot part in a tail (a mode change, a stable update, ...), with its tags;
- `framing`: what a tool adds around the content it returns (Read's line numbers, closing notes
  in brackets, the header of an offloaded result's preview);
- `tool results`: the content tools returned, per tool;
- `tool calls`: the calls the model made (name and arguments), per tool;
- `history`: the user's messages and the model's text;
- `summary`: the compaction summary and the pinned user's words lane.

Counts are the estimator's count of each text (the request as sent, JSON, is a little larger).
`compose_turn` measures one request from the turn context and its tool loop so far (what
`lamina.placement.render` renders); `compose_entries` does the same from logged entries alone (a
past session); `SessionComposition` sums many requests.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import msgspec

from lamina.compaction._lane import render_lane
from lamina.defang import admit, render_block, trusted
from lamina.messages import render_tail
from lamina.parts import Authority, Part, Stability, Tier
from lamina.session._entries import (
    AssistantMessage,
    CompactionBoundary,
    LogEntry,
    OutboxRecord,
    PartRecord,
    StateChange,
    ToolCall,
    ToolResult,
    TurnRecord,
    UnknownEntry,
    UserMessage,
)
from lamina.session._tree import provider_view
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator
from lamina.turn import SYSTEM_AUTHORITIES, ToolSpec, TurnContext

__all__ = [
    "KINDS",
    "Component",
    "LoggedRequest",
    "RequestComposition",
    "SessionComposition",
    "compose_entries",
    "compose_turn",
    "framing_chars",
    "logged_requests",
    "session_json",
]

KINDS: Final = (
    "system",
    "tools",
    "project",
    "defang",
    "volatile",
    "one-shot",
    "framing",
    "tool results",
    "tool calls",
    "history",
    "summary",
)
"""Every component kind, in the order reports list them."""

_ENCODER: Final = msgspec.json.Encoder(order="sorted")
_WRAPPER_RE: Final = re.compile(r"\A(<untrusted\b[^>\n]*>\n)(.*)(\n</untrusted>)\Z", re.DOTALL)
_ESCAPE_RE: Final = re.compile(r"\[U\+[0-9A-F]{4,6}\]|\(quoted\) ")
_LINE_NUMBER_RE: Final = re.compile(r"^ *\d+\t", re.MULTILINE)
_NOTE_LINE_RE: Final = re.compile(r"(?:\A|\n)\[[^\n]*\](?=\n|\Z)")


@dataclass(frozen=True, slots=True)
class Component:
    """Tokens of one component of a request (or summed over requests)."""

    kind: str
    """One of `KINDS`."""
    name: str
    tokens: int


@dataclass(frozen=True, slots=True)
class RequestComposition:
    """One request, component by component."""

    components: tuple[Component, ...]

    @property
    def total(self) -> int:
        return sum(c.tokens for c in self.components)

    def by_kind(self) -> dict[str, int]:
        """Tokens per kind, every kind present (0 where none), in `KINDS` order."""
        totals = dict.fromkeys(KINDS, 0)
        for c in self.components:
            totals[c.kind] = totals.get(c.kind, 0) + c.tokens
        return totals


@dataclass(slots=True)
class SessionComposition:
    """Components summed over the requests of a session (add them in order with `add`)."""

    requests: int = 0
    first_request_tokens: int = 0
    totals: dict[tuple[str, str], int] = field(default_factory=dict)
    """Tokens per (kind, name), summed over every request."""
    first: dict[tuple[str, str], int] = field(default_factory=dict)
    """Tokens per (kind, name) of the first request."""

    def add(self, request: RequestComposition) -> None:
        if self.requests == 0:
            self.first_request_tokens = request.total
            for c in request.components:
                self.first[(c.kind, c.name)] = self.first.get((c.kind, c.name), 0) + c.tokens
        self.requests += 1
        for c in request.components:
            self.totals[(c.kind, c.name)] = self.totals.get((c.kind, c.name), 0) + c.tokens

    @property
    def total(self) -> int:
        return sum(self.totals.values())

    @property
    def mean_request_tokens(self) -> float:
        return self.total / self.requests if self.requests else 0.0

    def by_kind(self) -> dict[str, int]:
        """Tokens per kind over the session, every kind present, in `KINDS` order."""
        totals = dict.fromkeys(KINDS, 0)
        for (kind, _), tokens in self.totals.items():
            totals[kind] = totals.get(kind, 0) + tokens
        return totals

    def top(self, n: int = 10) -> list[Component]:
        """The `n` components that took the most tokens over the session, largest first."""
        ranked = sorted(self.totals.items(), key=lambda item: (-item[1], item[0]))
        return [Component(kind, name, tokens) for (kind, name), tokens in ranked[:n]]


class _Counter:
    def __init__(self, estimator: TokenEstimator) -> None:
        self.estimator = estimator
        self.tokens: dict[tuple[str, str], int] = {}

    def add(self, kind: str, name: str, text: str) -> None:
        self.add_tokens(kind, name, self.estimator.count(text))

    def add_tokens(self, kind: str, name: str, tokens: int) -> None:
        if tokens:
            self.tokens[(kind, name)] = self.tokens.get((kind, name), 0) + tokens

    def neutralised(self, kind: str, name: str, text: str) -> None:
        """`text` as shown: the escapes and quote marks neutralising added count as defang notes."""
        notes = "".join(_ESCAPE_RE.findall(text))
        whole = self.estimator.count(text)
        note_tokens = min(whole, self.estimator.count(notes))
        self.add_tokens("defang", "escapes and quote marks", note_tokens)
        self.add_tokens(kind, name, whole - note_tokens)

    def result_block(self, tool: str, shown: str) -> None:
        """A tool result as shown: its framing, the defang notes in it, and the content proper."""
        whole = self.estimator.count(shown)
        notes = min(whole, self.estimator.count("".join(_ESCAPE_RE.findall(shown))))
        frame = min(whole - notes, self.estimator.count("x" * framing_chars(shown)))
        self.add_tokens("defang", "escapes and quote marks", notes)
        self.add_tokens("framing", tool, frame)
        self.add_tokens("tool results", tool, whole - notes - frame)

    def result(self) -> RequestComposition:
        return RequestComposition(tuple(Component(k, n, t) for (k, n), t in self.tokens.items()))


def framing_chars(content: str) -> int:
    """Characters of a tool result that frame its content: line-number prefixes and bracketed note lines."""
    numbers = sum(len(m) for m in _LINE_NUMBER_RE.findall(content))
    notes = sum(len(m) for m in _NOTE_LINE_RE.findall(content))
    return numbers + notes


def _stable(counter: _Counter, parts: Sequence[Part], tools: Sequence[ToolSpec], system: Sequence[Part]) -> None:
    for tool in tools:
        definition = {"name": tool.name, "description": tool.description, "input_schema": dict(tool.input_schema)}
        counter.add("tools", tool.name, _ENCODER.encode(definition).decode())
    system_keys = {p.key for p in system}
    for part in parts:
        if not part.text:
            continue
        if part.key in system_keys:
            counter.add("system", part.key, part.text)
            continue
        wrapped = _WRAPPER_RE.match(part.text)
        if wrapped is None:
            counter.neutralised("project", part.key, part.text)
        else:
            counter.add("defang", "untrusted labels", wrapped.group(1) + wrapped.group(3))
            counter.neutralised("project", part.key, wrapped.group(2))


def _tail(counter: _Counter, volatile: Iterable[PartRecord], one_shots: Iterable[PartRecord]) -> None:
    for record in volatile:
        counter.neutralised("volatile", record.key, render_tail((record,), ()))
    for record in one_shots:
        counter.neutralised("one-shot", record.key, render_tail((), (record,)))


def _history(
    counter: _Counter,
    entries: Sequence[LogEntry],
    current: tuple[str, Sequence[PartRecord], Sequence[PartRecord]] | None,
) -> None:
    """The conversation part of a request: `current` (user entry id, volatile, one-shots) is the turn being sent."""
    records: dict[str, TurnRecord] = {}
    delivered: set[tuple[str, str | None]] = set()
    for entry in entries:
        if isinstance(entry, TurnRecord):
            records[entry.user_entry_id] = entry
        elif isinstance(entry, OutboxRecord) and entry.status == "delivered":
            delivered.add((entry.part_id, entry.turn_id))
    calls: set[str] = set()
    for entry in entries:
        match entry:
            case UserMessage(text=text, id=entry_id):
                counter.add("history", "user messages", text)
                if current is not None and entry_id == current[0]:
                    _tail(counter, current[1], current[2])
                elif (record := records.get(entry_id)) is not None:
                    shown = [o for o in record.one_shots if (o.part_id, record.turn_id) in delivered]
                    _tail(counter, record.volatile, shown)
            case AssistantMessage(text=text):
                counter.add("history", "assistant text", text)
            case ToolCall(call_id=call_id, name=name, input=args):
                calls.add(call_id)
                counter.add("tool calls", name, name + _ENCODER.encode(dict(args)).decode())
            case ToolResult(call_id=call_id, name=name, content=content) if call_id in calls:
                counter.result_block(name, admit(content))
            case _:
                pass


def _prelude(counter: _Counter, summary: str | None, pinned: str | None) -> None:
    if summary:
        counter.add("summary", "compaction summary", render_block("compaction_summary", admit(summary)))
    if pinned:
        counter.add("summary", "pinned user's words", pinned)


def compose_turn(
    turn: TurnContext, continuation: Sequence[LogEntry] = (), *, estimator: TokenEstimator = DEFAULT_ESTIMATOR
) -> RequestComposition:
    """The composition of the request `render(turn, target, continuation=continuation)` sends."""
    counter = _Counter(estimator)
    _stable(counter, turn.stable.parts, turn.tools, turn.stable.system_parts)
    _prelude(counter, turn.summary, turn.pinned)
    record = turn.record()
    _history(counter, [*turn.history, *continuation], (turn.user_entry_id, record.volatile, record.one_shots))
    return counter.result()


def compose_entries(
    entries: Sequence[LogEntry],
    *,
    stable: Sequence[Part],
    system_keys: Iterable[str],
    tools: Sequence[ToolSpec],
    summary: str | None = None,
    pinned: str | None = None,
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
) -> RequestComposition:
    """The composition of a request that carried `entries` (a past one, rebuilt from the log).

    The last turn record among `entries` is the turn being sent: its one-shot parts count whether
    or not their delivery was recorded yet.
    """
    counter = _Counter(estimator)
    keys = frozenset(system_keys)
    _stable(counter, stable, tools, [p for p in stable if p.key in keys])
    _prelude(counter, summary, pinned)
    last = next((e for e in reversed(entries) if isinstance(e, TurnRecord)), None)
    current = (last.user_entry_id, last.volatile, last.one_shots) if last is not None else None
    _history(counter, entries, current)
    return counter.result()


@dataclass(frozen=True, slots=True)
class LoggedRequest:
    """One model request of a logged session, rebuilt from the log."""

    number: int
    """1 for the session's first request."""
    turn: int
    """1 for the session's first user turn."""
    composition: RequestComposition


def logged_requests(
    path: Sequence[LogEntry],
    *,
    tools: Sequence[ToolSpec],
    fallback_stable: Sequence[Part] = (),
    data_dir: str = "data",
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
) -> list[LoggedRequest]:
    """Every model request of a logged session (a root-to-leaf `path`), one per assistant message.

    Each request carried the provider view at that point (the latest compaction's summary and
    the entries it kept), the stable prefix the log recorded for it (`StateChange` entries for
    `stable` carry the prefix's parts; `fallback_stable` stands in where an older log recorded
    none) and `tools` (the log does not record tool definitions).
    """
    stable: Sequence[Part] = fallback_stable
    boundary: CompactionBoundary | None = None
    since: list[LogEntry] = []
    requests: list[LoggedRequest] = []
    turns = 0
    for index, entry in enumerate(path):
        match entry:
            case StateChange(key="stable", prefix=prefix) if prefix:
                stable = [
                    Part(p.key, trusted(p.text), p.provenance, Authority(p.authority), Stability.STABLE, Tier(p.tier))
                    for p in prefix
                    if p.authority in {a.value for a in Authority}
                ]
            case CompactionBoundary():
                view = provider_view(list(path[: index + 1]))
                boundary, since = view.boundary, list(view.entries)
                continue
            case UserMessage():
                turns += 1
            case AssistantMessage():
                pinned = render_lane(boundary.lane, data_dir=data_dir, legacy=boundary.ledger) if boundary else None
                composition = compose_entries(
                    since,
                    stable=stable,
                    system_keys=[p.key for p in stable if p.authority in SYSTEM_AUTHORITIES],
                    tools=tools,
                    summary=boundary.summary if boundary else None,
                    pinned=pinned,
                    estimator=estimator,
                )
                requests.append(LoggedRequest(len(requests) + 1, max(turns, 1), composition))
            case _:
                pass
        if not isinstance(entry, UnknownEntry):
            since.append(entry)
    return requests


def session_json(composition: SessionComposition, *, top: int = 10) -> Mapping[str, object]:
    """The session composition as a JSON-ready mapping (for `--json` reports)."""
    return {
        "requests": composition.requests,
        "tokens_per_request_mean": round(composition.mean_request_tokens, 1),
        "first_request_tokens": composition.first_request_tokens,
        "total_tokens": composition.total,
        "by_kind": composition.by_kind(),
        "top": [{"kind": c.kind, "name": c.name, "tokens": c.tokens} for c in composition.top(top)],
        "components": [
            {"kind": kind, "name": name, "tokens": tokens, "first_request": composition.first.get((kind, name), 0)}
            for (kind, name), tokens in sorted(composition.totals.items(), key=_in_kind_order)
        ],
    }


def _in_kind_order(item: tuple[tuple[str, str], int]) -> tuple[int, str]:
    (kind, name), _ = item
    return (KINDS.index(kind) if kind in KINDS else len(KINDS), name)
