"""Pruning: compaction's first, cheap layer (pure).

Described in docs/compaction.md ("Pruning").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Final

import msgspec

from lamina.compaction._cut import entry_tokens
from lamina.context import is_on_demand_read, path_of  # the one reading of a call's path
from lamina.session import LogEntry, ToolCall, ToolOutputPruned, ToolResult, UserMessage
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator
from lamina.workspace import CONTEXT_FILE_NAMES

__all__ = [
    "DEFAULT_PRUNE",
    "PrunePolicy",
    "apply_prunes",
    "choose_prune",
    "is_pruned",
    "prunable_tokens",
    "prune_floor",
    "pruned_note",
]

_NOTE_PREFIX = "[output pruned from context:"
_MAX_INPUT_CHARS = 200


@dataclass(frozen=True, slots=True)
class PrunePolicy:
    """When old tool output leaves the provider view (see the module docstring)."""

    protect_turns: int = 2
    """The tool output of this many newest user turns (the current one included) is never pruned."""
    protect_tokens: int = 10_000
    """Beyond those turns, this many tokens of the newest tool output are kept too."""
    minimum_tokens: int = 40_000
    """Prune only when this many tokens go at once (each prune costs a cache write of what follows)."""
    smallest_tokens: int = 100
    """Output this small stays: its note would save next to nothing."""


DEFAULT_PRUNE: Final = PrunePolicy()
"""The policy a context engine prunes with unless told otherwise."""


def pruned_note(call: ToolCall | None, result: ToolResult) -> str:
    """The text a pruned result shows: which call it answered, and how to get it back."""
    if call is None:
        return f"{_NOTE_PREFIX} {result.name}; call the tool again if you need it]"
    args = json.dumps(call.input, ensure_ascii=False, sort_keys=True, default=str)
    if len(args) > _MAX_INPUT_CHARS:
        args = args[:_MAX_INPUT_CHARS] + "…"
    return f"{_NOTE_PREFIX} {call.name} {args}; call it again if you need it]"


def prunable_tokens(
    result: ToolResult, call: ToolCall | None, policy: PrunePolicy, *, estimator: TokenEstimator = DEFAULT_ESTIMATOR
) -> int:
    """The tokens of `result` a prune may take (0: never pruned, being a note, small, or a read the rules count on)."""
    if is_pruned(result):
        return 0
    tokens = entry_tokens(result, estimator=estimator)
    if tokens < policy.smallest_tokens or (call is not None and _always_kept(call)):
        return 0
    return tokens


def is_pruned(result: ToolResult) -> bool:
    """Whether `result` is shown as its note (an earlier prune took it)."""
    return result.content.startswith(_NOTE_PREFIX)


def prune_floor(view: Sequence[LogEntry]) -> int:
    """Where the output a prune may take can start in `view`: the turn of the newest pruned result (0: none).

    A prune takes every result its policy allows older than the ones it protects, so nothing
    before that turn is left to take (under the same policy).
    """
    turn = 0
    floor = 0
    for index, entry in enumerate(view):
        if isinstance(entry, UserMessage):
            turn = index
        elif isinstance(entry, ToolResult) and is_pruned(entry):
            floor = turn
    return floor


def choose_prune(
    view: Sequence[LogEntry],
    policy: PrunePolicy,
    *,
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
    start: int = 0,
) -> ToolOutputPruned | None:
    """The prune to record before the next turn of `view`, or None when none pays (see `PrunePolicy`).

    Only entries from `start` on are looked at (`prune_floor`: before it, nothing is left to take).
    """
    tail = view[start:]
    calls = {e.call_id: e for e in tail if isinstance(e, ToolCall)}
    turns_seen = 0
    kept_tokens = 0
    chosen: list[str] = []
    freed = 0
    for entry in reversed(tail):
        if isinstance(entry, UserMessage):
            turns_seen += 1
            continue
        if not isinstance(entry, ToolResult) or is_pruned(entry):
            continue
        tokens = entry_tokens(entry, estimator=estimator)
        if turns_seen < policy.protect_turns - 1:  # the next turn is the newest of the protected ones
            continue
        if kept_tokens + tokens <= policy.protect_tokens:
            kept_tokens += tokens
            continue
        kept_tokens = policy.protect_tokens  # from here on, everything older is a candidate
        call = calls.get(entry.call_id)
        if not prunable_tokens(entry, call, policy, estimator=estimator):
            continue
        chosen.append(entry.call_id)
        freed += tokens - estimator.count(pruned_note(call, entry))
    if not chosen or freed < policy.minimum_tokens:
        return None
    return ToolOutputPruned(call_ids=tuple(reversed(chosen)), tokens=freed)


def _always_kept(call: ToolCall) -> bool:
    """Reads the rules count on: a skill, guide or document (a prerequisite), a context file (the project's rules)."""
    path = path_of(call.input)
    named = path is not None and PurePath(path).name.lower() in CONTEXT_FILE_NAMES
    return is_on_demand_read(call) or (call.name == "Read" and named)


def apply_prunes(entries: Sequence[LogEntry]) -> list[LogEntry]:
    """`entries` with every result a `ToolOutputPruned` among them names shown as its note (a new list)."""
    pruned = {call_id for e in entries if isinstance(e, ToolOutputPruned) for call_id in e.call_ids}
    if not pruned:
        return list(entries)
    calls = {e.call_id: e for e in entries if isinstance(e, ToolCall)}
    return [
        msgspec.structs.replace(e, content=pruned_note(calls.get(e.call_id), e), full_output_path=None, attachments=())
        if isinstance(e, ToolResult) and e.call_id in pruned
        else e
        for e in entries
    ]
