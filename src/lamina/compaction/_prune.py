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

from lamina.compaction._clearing import server_cleared, server_items, server_run
from lamina.compaction._cut import entry_tokens
from lamina.context import is_on_demand_read, path_of  # the one reading of a call's path
from lamina.pricing import ContextEditing, Outlook, PruneItem, choose_prune_option
from lamina.session import LogEntry, ServerClearing, ToolCall, ToolOutputPruned, ToolResult, UserMessage
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
    "reread_chances",
]

_NOTE_PREFIX = "[output pruned from context:"
_MAX_INPUT_CHARS = 200


@dataclass(frozen=True, slots=True)
class PrunePolicy:
    """When old tool output leaves the provider view (see the module docstring)."""

    protect_turns: int = 2
    """The tool output of this many newest user turns (the current one included) is never pruned."""
    protect_tokens: int = 2_000
    """Beyond those turns, this many tokens of the newest tool output are kept too."""
    minimum_tokens: int = 40_000
    """Prune only when this many tokens go at once (each prune costs a cache write of what follows)."""
    cold_minimum_tokens: int = 5_000
    """The floor instead when the cache holds none of the history (an idle gap longer than its TTL):
    the next request writes everything again anyway, so a prune rewrites nothing paid for (priced only)."""
    smallest_tokens: int = 100
    """Output this small stays: its note would save next to nothing."""
    priced: bool = True
    """Prune only what the cost model expects to lower the bill (False: whenever the rest allows)."""

    def floor_tokens(self, outlook: Outlook | None = None) -> int:
        """The fewest tokens a prune frees at once: `cold_minimum_tokens` on a cold cache (priced), else the minimum."""
        if outlook is not None and self.priced and outlook.cache.label(outlook.prices) == "cold":
            return min(self.minimum_tokens, self.cold_minimum_tokens)
        return self.minimum_tokens


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
    before that turn is left to take (under the same policy); a result the server clears counts
    as pruned.
    """
    cleared = server_cleared(view)
    turn = 0
    floor = 0
    for index, entry in enumerate(view):
        if isinstance(entry, UserMessage):
            turn = index
        elif isinstance(entry, ToolResult) and (is_pruned(entry) or entry.call_id in cleared):
            floor = turn
    return floor


def choose_prune(
    view: Sequence[LogEntry],
    policy: PrunePolicy,
    *,
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
    start: int = 0,
    outlook: Outlook | None = None,
    editing: ContextEditing = "lamina",
) -> ToolOutputPruned | None:
    """The prune to record before the next turn of `view`, or None when none pays (see `PrunePolicy`).

    Only entries from `start` on are looked at (`prune_floor`: before it, nothing is left to take);
    results the server already clears are never offered again. With an `outlook` and a priced
    policy, the cost model picks which of the results the policy allows go now, and the prune
    carries its decision: with `editing` `priced` or `server` (the model has `clear_tool_uses` and
    the session allows it), the server's clearing of the oldest run is priced beside Lamina's prune
    (`choose_prune_option`), and the prune it wins carries a `ServerClearing`. Without an outlook,
    all of them go once they free `minimum_tokens`.
    """
    chosen = _candidates(view[start:], policy, estimator, server_cleared(view))
    if outlook is not None and policy.priced and chosen:
        return _priced_prune(view, chosen, policy, outlook, estimator, editing)
    freed = sum(f for _, _, _, f in chosen)
    if not chosen or freed < policy.minimum_tokens:
        return None
    return ToolOutputPruned(call_ids=tuple(c[0] for c in chosen), tokens=freed)


def _priced_prune(
    view: Sequence[LogEntry],
    chosen: list[tuple[str, int, int, int]],
    policy: PrunePolicy,
    outlook: Outlook,
    estimator: TokenEstimator,
    editing: ContextEditing,
) -> ToolOutputPruned | None:
    """The cheapest of Lamina's prune of `chosen`, the server's clearing (where `editing` allows) and nothing."""
    run = None
    if editing in ("priced", "server"):
        passable = lambda result, tokens: is_pruned(result) or tokens < policy.smallest_tokens  # noqa: E731
        run = server_run(view, [c[0] for c in chosen], estimator=estimator, passable=passable)
    chances = reread_chances(view, {c[0] for c in chosen} | {r[0] for r in run or ()})
    choice = choose_prune_option(
        [PruneItem(c, s, t, f, chances[c]) for c, s, t, f in chosen],
        outlook,
        minimum_tokens=policy.floor_tokens(outlook),
        server_items=None if run is None else server_items(run, chances),
        mode=editing,
    )
    if choice.option == "nothing":
        return None
    server = ServerClearing(clear_at_least=choice.clear_at_least) if choice.option == "server" else None
    return ToolOutputPruned(call_ids=choice.call_ids, tokens=choice.freed, decision=choice.decision, server=server)


def _candidates(
    tail: Sequence[LogEntry], policy: PrunePolicy, estimator: TokenEstimator, cleared: frozenset[str] = frozenset()
) -> list[tuple[str, int, int, int]]:
    """The results `policy` allows to prune in `tail`, oldest first: call id, suffix tokens, tokens, freed."""
    calls = {e.call_id: e for e in tail if isinstance(e, ToolCall)}
    turns_seen = 0
    kept_tokens = 0
    suffix = 0
    chosen: list[tuple[str, int, int, int]] = []  # call id, suffix tokens, tokens, freed
    for entry in reversed(tail):
        entry_size = entry_tokens(entry, estimator=estimator)
        suffix += entry_size
        if isinstance(entry, UserMessage):
            turns_seen += 1
            continue
        if not isinstance(entry, ToolResult) or is_pruned(entry) or entry.call_id in cleared:
            continue
        tokens = entry_size
        if turns_seen < policy.protect_turns - 1:  # the next turn is the newest of the protected ones
            continue
        if kept_tokens + tokens <= policy.protect_tokens:
            kept_tokens += tokens
            continue
        kept_tokens = policy.protect_tokens  # from here on, everything older is a candidate
        call = calls.get(entry.call_id)
        if not prunable_tokens(entry, call, policy, estimator=estimator):
            continue
        chosen.append((entry.call_id, suffix, tokens, tokens - estimator.count(pruned_note(call, entry))))
    chosen.reverse()
    return chosen


_PRIOR_AGAIN: Final = 1.0
_PRIOR_NOT: Final = 2.0
_EDITED_FACTOR: Final = 0.25


def reread_chances(view: Sequence[LogEntry], call_ids: set[str]) -> dict[str, float]:
    """For each result of `call_ids`, the chance it is needed again, learnt from `view`.

    The base chance is how often a pruned result was asked for again (the same call made after
    its prune), on a prior of one in three. A file read more than once is needed again more
    likely (each earlier read counts as one more "needed again"); a file edited since its read is
    less (what it showed is out of date: the model reads it anew either way).
    """
    calls: dict[str, ToolCall] = {}
    pruned_keys: set[str] = set()
    seen_after: set[str] = set()
    reads: dict[str, int] = {}
    last_read: dict[str, int] = {}
    last_edit: dict[str, int] = {}
    keys: dict[str, str] = {}
    for index, entry in enumerate(view):
        if isinstance(entry, ToolCall):
            calls[entry.call_id] = entry
            key = _call_key(entry)
            keys[entry.call_id] = key
            if key in pruned_keys:
                seen_after.add(key)
            path = path_of(entry.input)
            if path is not None:
                if entry.name == "Read":
                    reads[path] = reads.get(path, 0) + 1
                    last_read[entry.call_id] = index
                elif entry.name in ("Edit", "Write"):
                    last_edit[path] = index
        elif isinstance(entry, ToolResult) and is_pruned(entry) and entry.call_id in keys:
            pruned_keys.add(keys[entry.call_id])
    pruned = len(pruned_keys)
    base = (len(seen_after) + _PRIOR_AGAIN) / (pruned + _PRIOR_AGAIN + _PRIOR_NOT)
    chances: dict[str, float] = {}
    for call_id in call_ids:
        call = calls.get(call_id)
        path = path_of(call.input) if call is not None else None
        chance = base
        if path is not None and call is not None:
            again = reads.get(path, 1) - 1 if call.name == "Read" else 0
            chance = 1.0 - (1.0 - base) / (1.0 + again)
            if last_edit.get(path, -1) > last_read.get(call_id, len(view)):
                chance *= _EDITED_FACTOR
        chances[call_id] = min(1.0, chance)
    return chances


def _call_key(call: ToolCall) -> str:
    path = path_of(call.input)
    if call.name == "Read" and path is not None:
        return f"Read:{path}"
    return call.name + json.dumps(call.input, sort_keys=True, default=str)


def _always_kept(call: ToolCall) -> bool:
    """Reads the rules count on: a skill, guide or document (a prerequisite), a context file (the project's rules)."""
    path = path_of(call.input)
    named = path is not None and PurePath(path).name.lower() in CONTEXT_FILE_NAMES
    return is_on_demand_read(call) or (call.name == "Read" and named)


def apply_prunes(entries: Sequence[LogEntry]) -> list[LogEntry]:
    """`entries` with every result a `ToolOutputPruned` among them names shown as its note (a new list).

    A Read that points at an earlier result (unchanged since, or only its changes) whose result is
    no longer among `entries` or was pruned is shown as a note too: what it points at is gone.
    """
    pruned = {  # a clearing the server makes leaves the results whole in the request (its edit clears them)
        call_id for e in entries if isinstance(e, ToolOutputPruned) and e.server is None for call_id in e.call_ids
    }
    pruned |= _dangling_reads(entries, pruned)
    if not pruned:
        return list(entries)
    calls = {e.call_id: e for e in entries if isinstance(e, ToolCall)}
    return [
        msgspec.structs.replace(e, content=pruned_note(calls.get(e.call_id), e), full_output_path=None, attachments=())
        if isinstance(e, ToolResult) and e.call_id in pruned
        else e
        for e in entries
    ]


def _dangling_reads(entries: Sequence[LogEntry], pruned: set[str]) -> set[str]:
    """The Read results whose pointer or changes name a result not shown in full (gone, pruned, itself dangling)."""
    results = [e for e in entries if isinstance(e, ToolResult)]
    gone: set[str] = set()
    while True:  # a pointer to a changes list whose base is gone is gone as well
        shown = {r.call_id for r in results} - pruned - gone
        more = {
            r.call_id
            for r in results
            if r.read is not None
            and r.call_id not in gone
            and (target := r.read.unchanged_from or r.read.changes_from) is not None
            and target not in shown
        }
        if not more:
            return gone
        gone |= more
