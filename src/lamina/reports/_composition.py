"""Request composition: how many tokens each component of a request takes, per request and over a session (pure).

Every token of a request is counted in exactly one component, named by a kind (`KINDS`) and a name,
on the very parts the renderers build the request from, so a request's composition sums to its
budget. docs/reports.md lists the kinds and what each counts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from lamina.context import (
    AttachmentBlocks,
    Part,
    Stability,
    Tier,
    ToolSpec,
    TurnContext,
    attachment_note,
    message_parts,
    prelude_messages,
    split_turns,
    tail_parts,
    to_messages,
    tool_call_of,
    tool_part,
)
from lamina.defang import neutralise, trusted
from lamina.reports._replay import RecordedPrefixes, replay_request
from lamina.session import (
    AssistantMessage,
    LogEntry,
    TurnRecord,
    UserMessage,
)
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator

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
    "reasoning",
    "summary",
)
"""Every component kind, in the order reports list them."""

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

    def neutralised(self, kind: str, name: str, text: str, *, tokens: int | None = None) -> None:
        """`text` as shown: the escapes and quote marks neutralising added count as defang notes.

        `tokens` (default: the count of `text`) is what `text` adds in all, split between the two.
        """
        notes = "".join(_ESCAPE_RE.findall(text))
        whole = self.estimator.count(text) if tokens is None else tokens
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


def _count(counter: _Counter, parts: Iterable[Part], system_keys: Iterable[str]) -> None:
    """Every part in its component: the request's tokens, each counted once."""
    system = frozenset(system_keys)
    for part in parts:
        key, text = part.key, part.text
        if part.media_tokens is not None or key.startswith("attachment."):
            counter.add_tokens("history", "attachments", part.token_count(counter.estimator))
        elif part.tier is Tier.CATALOGUE and key.startswith("tool."):
            counter.add("tools", key.removeprefix("tool."), text)
        elif part.stability is Stability.STABLE:
            _stable(counter, part, system=key in system)
        elif part.stability is Stability.VOLATILE:
            counter.neutralised("volatile", key, text)
        elif part.stability is Stability.ONE_SHOT:
            counter.neutralised("one-shot", key, text)
        elif key == "compaction.summary":
            counter.add("summary", "compaction summary", text)
        elif key == "compaction.users_words":
            counter.add("summary", "pinned user's words", text)
        elif key.startswith("history.tail."):  # an earlier turn's tail, as it travels in the history
            kind = "one-shot" if part.provenance.startswith("outbox:") else "volatile"
            counter.neutralised(kind, key.rsplit(".", 1)[-1], text)
        elif key.startswith("history.user."):
            counter.add("history", "user messages", text)
        elif key.startswith("history.assistant."):
            counter.add("history", "assistant text", text)
        elif key.startswith("history.reasoning."):  # readable: thinking, summaries (signed and encrypted bytes aside)
            counter.add("reasoning", "model reasoning", text)
        elif key.startswith("history.tool_call."):
            counter.add("tool calls", tool_call_of(part)[0], text)
        elif key.startswith("tool_result."):
            counter.result_block(
                part.provenance.removeprefix("tool:") if part.provenance.startswith("tool:") else "interrupted", text
            )
        else:
            counter.add("history", key, text)  # nothing else is built today; counted rather than lost


def _stable(counter: _Counter, part: Part, *, system: bool) -> None:
    if not part.text:
        return
    if system:
        counter.add("system", part.key, part.text)
        return
    wrapped = _WRAPPER_RE.match(part.text)
    if wrapped is None:
        counter.neutralised("project", part.key, part.text)
    else:  # the label's share of the part's tokens, the body the rest: the part's count in all, as the budget's
        whole = counter.estimator.count(part.text)
        label = min(whole, counter.estimator.count(wrapped.group(1) + wrapped.group(3)))
        counter.add_tokens("defang", "untrusted labels", label)
        counter.neutralised("project", part.key, wrapped.group(2), tokens=whole - label)


def compose_turn(
    turn: TurnContext,
    continuation: Sequence[LogEntry] = (),
    *,
    attachments: AttachmentBlocks = attachment_note,
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
) -> RequestComposition:
    """The composition of the request `render(turn, target, continuation=continuation)` sends.

    Counted on `turn.parts(continuation, attachments)`; `attachments` is the renderer's attachment
    renderer (by default a note each, as `render`'s default).
    """
    counter = _Counter(estimator)
    _count(counter, turn.parts(continuation, attachments), (p.key for p in turn.stable.system_parts))
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
    attachments: AttachmentBlocks = attachment_note,
) -> RequestComposition:
    """The composition of a request that carried `entries` (a past one, rebuilt from the log).

    Built into parts as `TurnContext.parts` builds a live turn's: the tool definitions, `stable`,
    the summary (neutralised here) and the user's words lane `pinned` (as rendered), and the
    conversation. The last turn record among `entries` is the turn being sent: its one-shot parts
    count whether or not their delivery was recorded yet.
    """
    counter = _Counter(estimator)
    last = next((e for e in reversed(entries) if isinstance(e, TurnRecord)), None)
    current = (last.user_entry_id, tail_parts(last.volatile, last.one_shots)) if last is not None else None
    shown_summary = neutralise(summary) if summary else None
    shown_pinned = trusted(pinned) if pinned else None  # the lane as `render_lane` rendered it
    messages = prelude_messages(shown_summary, shown_pinned)
    for segment in split_turns(entries):
        messages += to_messages(segment, current_tail=current, attachments=attachments)
    parts = [*(tool_part(t) for t in tools), *stable, *message_parts(messages)]
    _count(counter, parts, system_keys)
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

    Each request is replayed as the inspector replays it (`replay_request`): the provider view at
    that point, the stable prefix the log recorded for it and `tools`.

    Args:
        path: The session's entries from the root to a leaf, oldest first.
        tools: The tool definitions to count where the log recorded none (an older log).
        fallback_stable: The stable parts that stand in where the log recorded no prefix (an older log).
        data_dir: The session's data folder, as the model's tools reach it.
        estimator: Counts each part's text.

    Returns:
        The requests in log order, each with its composition.
    """
    prefixes = RecordedPrefixes()
    requests: list[LoggedRequest] = []
    turns = 0
    for index, entry in enumerate(path):
        prefixes.observe(entry)
        if isinstance(entry, UserMessage):
            turns += 1
        elif isinstance(entry, AssistantMessage):
            replayed = replay_request(
                path[:index],
                prefixes=prefixes,
                data_dir=data_dir,
                tools=tools,
                fallback_stable=fallback_stable,
                applied=entry.context_edits,  # what the model read: the server's clearing as it applied
            )
            composition = compose_turn(replayed.turn, replayed.continuation, estimator=estimator)
            requests.append(LoggedRequest(len(requests) + 1, max(turns, 1), composition))
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
