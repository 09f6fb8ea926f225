"""Where a compaction cuts the provider view, and when compaction is due (pure).

Described in docs/compaction.md ("Where to cut, and when").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from lamina.errors import UsageError
from lamina.session import AssistantMessage, LogEntry, ToolCall, ToolResult, TurnRecord, UserMessage
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator

__all__ = [
    "DEFAULT_KEEP_TOKENS",
    "DEFAULT_RESERVE",
    "CutPoint",
    "entry_tokens",
    "find_cut_point",
    "freed_enough",
    "scaled_reserve",
    "should_compact",
]

DEFAULT_KEEP_TOKENS = 20_000
"""Recent tokens kept verbatim by default (pi's `keepRecentTokens`)."""
DEFAULT_RESERVE = 16_384
"""Tokens left free below the context window for the answer and the next request (pi's reserve)."""
RESERVE_SHARE = 4
"""The default reserve is at most a quarter of the window: a local server's 8,192 tokens keep 2,048 free."""


def scaled_reserve(reserve: int, context_window: int) -> int:
    """The reserve used with `context_window`: a set one as set; the default at most `1 / RESERVE_SHARE` of it."""
    if reserve != DEFAULT_RESERVE:
        return reserve
    return min(reserve, max(0, context_window) // RESERVE_SHARE)


@dataclass(frozen=True, slots=True)
class CutPoint:
    """Where a compaction cuts the provider view: `summarised + kept` is the view, in order."""

    first_kept_id: str | None
    """The id of `kept[0]`, for `CompactionBoundary.first_kept_id`; `None` when nothing is kept."""
    summarised: tuple[LogEntry, ...]
    """Entries the summary replaces, oldest first (empty: there is nothing to compact)."""
    kept: tuple[LogEntry, ...]
    """Entries kept verbatim after the summary; always holds the latest user request."""
    split_turn_prefix: tuple[LogEntry, ...]
    """When the cut falls inside a turn: that turn's start, the tail of `summarised`.

    It belongs to the turn whose rest is kept, so it is summarised separately (what was asked,
    what was done so far); empty when the cut falls before a user message.
    """
    tokens_before: int
    """Tokens of the whole view (every entry of `summarised` and `kept`)."""
    tokens_kept: int
    """Tokens of `kept`."""

    @property
    def history(self) -> tuple[LogEntry, ...]:
        """`summarised` without the split turn's prefix: whole turns only."""
        return self.summarised[: len(self.summarised) - len(self.split_turn_prefix)]


def entry_tokens(entry: LogEntry, *, estimator: TokenEstimator = DEFAULT_ESTIMATOR) -> int:
    """Tokens an entry adds to a request: its text and attachments, a tool call's name and input, a turn's tail.

    Entries that are not sent to the model (state changes, outbox records, labels, ...) count 0.
    """
    match entry:
        case UserMessage(text=text, attachments=attachments):
            return estimator.count(text) + sum(a.tokens for a in attachments)  # images: the providers' formulas
        case AssistantMessage(text=text, reasoning=reasoning):
            # its reasoning as the budget counts it: what can be read of it (`Reasoning.readable`)
            return estimator.count(text) + sum(estimator.count(r.readable) for r in reasoning)
        case ToolCall(name=name, input=args):
            return estimator.count(f"{name} {_json(args)}")
        case ToolResult(content=content, attachments=attachments):
            return estimator.count(content) + sum(a.tokens for a in attachments)
        case TurnRecord(volatile=volatile, one_shots=one_shots):
            return sum(estimator.count(r.text) for r in (*volatile, *one_shots))
        case _:
            return 0


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _is_conversation(entry: LogEntry) -> bool:
    return isinstance(entry, UserMessage | AssistantMessage | ToolCall | ToolResult)


def _spanned(entries: Sequence[LogEntry]) -> list[bool]:
    """For each index `i`, whether a cut before `entries[i]` would separate a call from a result.

    A call at `a` answered at `b > a` rules out every cut in `a+1 .. b` (a difference array, so
    the whole view costs one pass however large the batches).
    """
    calls: dict[str, int] = {}
    depth = [0] * (len(entries) + 2)
    for index, entry in enumerate(entries):
        if isinstance(entry, ToolCall):
            calls.setdefault(entry.call_id, index)
        elif isinstance(entry, ToolResult):
            start = calls.get(entry.call_id)
            if start is not None and start < index:
                depth[start + 1] += 1
                depth[index + 1] -= 1
    spanned: list[bool] = []
    running = 0
    for index in range(len(entries) + 1):
        running += depth[index]
        spanned.append(running > 0)
    return spanned


def find_cut_point(
    entries: Sequence[LogEntry],
    *,
    keep_tokens: int = DEFAULT_KEEP_TOKENS,
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
) -> CutPoint:
    """The cut that keeps at least `keep_tokens` recent tokens verbatim, and as few more as it can.

    The kept part starts at the latest safe cut whose suffix holds `keep_tokens` tokens (the
    whole view when it holds fewer), and never after the latest user request. Safe cuts are
    before a user message, or before an assistant message that starts a model response once
    every earlier tool call is answered (so a response's reasoning, its calls and their results
    stay on one side); a cut of the second kind is used only for a turn larger than `keep_tokens` on its
    own (a turn that fits is kept whole, its user message with it), and reports that turn's
    start in `split_turn_prefix`. The latest turn is never split: its request stays
    verbatim, so a single huge current turn is kept whole (prune its tool output instead).

    Args:
        entries: The current provider view, oldest first (entries kept by an earlier compaction
            included; the boundary itself excluded).
        keep_tokens: Most recent tokens to keep verbatim, at least.
        estimator: Counts the tokens of each entry (see `entry_tokens`).

    Raises:
        UsageError: `keep_tokens` is negative.
    """
    if keep_tokens < 0:
        raise UsageError(f"keep_tokens must be at least 0, not {keep_tokens}")
    view = tuple(entries)
    sizes = [entry_tokens(e, estimator=estimator) for e in view]
    total = sum(sizes)
    suffix = [0] * (len(view) + 1)
    for index in range(len(view) - 1, -1, -1):
        suffix[index] = suffix[index + 1] + sizes[index]

    last_user = next((i for i in range(len(view) - 1, -1, -1) if isinstance(view[i], UserMessage)), None)
    spanned = _spanned(view)
    # Keeping nothing is allowed only when there is no request to keep.
    latest = len(view) if last_user is None else last_user
    cut = 0
    for index in range(latest, 0, -1):
        safe = index == len(view) or isinstance(view[index], UserMessage) or _starts_response(view, index)
        if safe and not spanned[index] and suffix[index] >= keep_tokens:
            cut = _whole_turn(view, index, spanned, suffix, keep_tokens)
            break
    if cut:
        cut = _with_leading_entries(view, cut)
    summarised, kept = view[:cut], view[cut:]
    prefix: tuple[LogEntry, ...] = ()
    first = _first_conversation(kept)
    if summarised and first is not None and not isinstance(first, UserMessage):
        turn_start = next((i for i in range(cut - 1, -1, -1) if isinstance(view[i], UserMessage)), 0)
        turn_start = _with_leading_entries(view, turn_start)
        prefix = view[turn_start:cut]
    return CutPoint(
        first_kept_id=kept[0].id if kept else None,
        summarised=summarised,
        kept=kept,
        split_turn_prefix=prefix,
        tokens_before=total,
        tokens_kept=suffix[cut],
    )


def _starts_response(view: Sequence[LogEntry], index: int) -> bool:
    """Whether `view[index]` is an assistant message that starts a model response.

    An assistant message right after another one is the same response going on (an integration
    logs a response's reasoning, texts and calls as they came): a cut there would part the
    response's reasoning from the rest of it.
    """
    if not isinstance(view[index], AssistantMessage):
        return False
    before = next((view[i] for i in range(index - 1, -1, -1) if _is_conversation(view[i])), None)
    return not isinstance(before, AssistantMessage)


def _whole_turn(view: Sequence[LogEntry], index: int, spanned: list[bool], suffix: list[int], keep: int) -> int:
    """`index`, or the start of its turn when `index` splits a turn that fits `keep` tokens on its own.

    A user message is not separated from the rest of its turn unless the turn alone is larger than
    the kept budget (then only a cut inside it can keep the view small).
    """
    if index >= len(view) or isinstance(view[index], UserMessage):
        return index
    start = next((i for i in range(index - 1, -1, -1) if isinstance(view[i], UserMessage)), None)
    if start is None or spanned[start]:
        return index
    end = next((i for i in range(index, len(view)) if isinstance(view[i], UserMessage)), len(view))
    return start if suffix[start] - suffix[end] <= keep else index


def _with_leading_entries(view: Sequence[LogEntry], index: int) -> int:
    """`index` moved back over the non-conversation entries just before it, which travel with it.

    A turn record stays behind: it belongs to the user message it follows.
    """
    while index > 0 and not _is_conversation(view[index - 1]) and not isinstance(view[index - 1], TurnRecord):
        index -= 1
    return index


def _first_conversation(entries: Sequence[LogEntry]) -> LogEntry | None:
    return next((e for e in entries if _is_conversation(e)), None)


def should_compact(view_tokens: int, *, context_window: int, reserve: int = DEFAULT_RESERVE) -> bool:
    """Whether a view of `view_tokens` tokens leaves less than `reserve` tokens of the window free.

    Raises:
        UsageError: `context_window` is not positive or `reserve` is negative.
    """
    if context_window <= 0:
        raise UsageError(f"context_window must be positive, not {context_window}")
    if reserve < 0:
        raise UsageError(f"reserve must be at least 0, not {reserve}")
    return view_tokens > context_window - reserve


def freed_enough(tokens_before: int, tokens_after: int, *, minimum_ratio: float = 0.05) -> bool:
    """Whether a compaction shrank the context by at least `minimum_ratio` of `tokens_before`.

    A compaction that frees less has stalled (summary as long as what it replaced, or a huge
    current turn kept whole): retrying it would loop, so the caller reports it instead.

    Raises:
        UsageError: `minimum_ratio` is not between 0 and 1.
    """
    if not 0.0 <= minimum_ratio <= 1.0:
        raise UsageError(f"minimum_ratio must be between 0 and 1, not {minimum_ratio}")
    if tokens_before <= 0:
        return False
    return tokens_before - tokens_after >= minimum_ratio * tokens_before
