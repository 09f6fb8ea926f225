"""The provider's clearing of old tool results: what the model saw, and the runs a prune decision may offer (pure).

A prune the server makes (`ToolOutputPruned.server`) leaves the results whole in the request; the
request's `clear_tool_uses` edit clears every tool use up to the prune's newest one, each result
shown as `SERVER_CLEARED_NOTE`. Described in docs/providers.md ("Context editing").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from lamina.compaction._cut import entry_tokens
from lamina.placement import CLEAR_TOOL_USES, SERVER_CLEARED_NOTE, server_clearing
from lamina.pricing import PruneItem
from lamina.session import AppliedEdit, LogEntry, ToolCall, ToolResult
from lamina.tokens import TokenEstimator

__all__ = ["server_cleared", "show_server_clearing"]


def server_cleared(entries: Sequence[LogEntry]) -> frozenset[str]:
    """The calls of `entries` whose results the server clears: those the server's prunes name."""
    return server_clearing(entries)[0]


def show_server_clearing(
    entries: Sequence[LogEntry], *, applied: Sequence[AppliedEdit] | None = None
) -> list[LogEntry]:
    """`entries` as the model read them: every tool use the server's clearing took shown cleared (a new list).

    The request's edit clears every tool use up to the newest one a server prune names (those of
    `exclude_tools` apart): its result reads `SERVER_CLEARED_NOTE`, and with `clear_tool_inputs`
    its input is empty. `applied` is what the response said the server applied (None: as asked);
    without a `clear_tool_uses` among it, the server cleared nothing (`clear_at_least` not met).
    """
    cleared, settings = server_clearing(entries)
    if settings is None or (applied is not None and not any(e.kind == CLEAR_TOOL_USES for e in applied)):
        return list(entries)
    excluded = set(settings.exclude_tools)
    calls = [e for e in entries if isinstance(e, ToolCall) and e.name not in excluded]
    last = max((i for i, call in enumerate(calls) if call.call_id in cleared), default=-1)
    taken = {call.call_id for call in calls[: last + 1]}
    shown: list[LogEntry] = []
    for entry in entries:
        if isinstance(entry, ToolResult) and entry.call_id in taken:
            entry = msgspec.structs.replace(entry, content=SERVER_CLEARED_NOTE, full_output_path=None, attachments=())
        elif isinstance(entry, ToolCall) and entry.call_id in taken and settings.clear_tool_inputs:
            entry = msgspec.structs.replace(entry, input={})
        shown.append(entry)
    return shown


def server_run(
    view: Sequence[LogEntry],
    offered: Sequence[str],
    *,
    estimator: TokenEstimator,
    passable: Callable[[ToolResult, int], bool],
) -> list[tuple[str, int, int]]:
    """The results the server's clearing may take next, oldest first: call id, suffix tokens, tokens.

    The server clears a contiguous run of the oldest tool uses, so the run starts after the newest
    one it already clears and stops before the first result a prune may not take (protected,
    or a read the rules count on); a result too small to offer, or already shown as Lamina's note,
    is passed over inside the run (clearing it costs nothing).

    Args:
        view: The provider view, prunes applied.
        offered: The results a prune may take (the policy's candidates).
        estimator: Counts tokens.
        passable: Whether a result the prune may not take (with its tokens) may sit inside the run.

    Returns:
        The run, oldest first (empty: the server has nothing to clear).
    """
    cleared = server_cleared(view)
    allowed = set(offered)
    results = [(i, e) for i, e in enumerate(view) if isinstance(e, ToolResult)]
    start = max((n + 1 for n, (_, r) in enumerate(results) if r.call_id in cleared), default=0)
    suffix = _suffixes(view, estimator)
    run: list[tuple[str, int, int]] = []
    for index, result in results[start:]:
        tokens = entry_tokens(result, estimator=estimator)
        if result.call_id not in allowed and not passable(result, tokens):
            break
        run.append((result.call_id, suffix[index], tokens))
    return run


def server_items(run: Sequence[tuple[str, int, int]], chances: dict[str, float]) -> list[PruneItem]:
    """The run as the cost model prices it (what each result frees is left to the server's pricing)."""
    return [PruneItem(call_id, suffix, tokens, tokens, chances.get(call_id, 0.0)) for call_id, suffix, tokens in run]


def _suffixes(view: Sequence[LogEntry], estimator: TokenEstimator) -> list[int]:
    """For each entry of `view`, the tokens from it to the end."""
    total = 0
    out = [0] * len(view)
    for index in range(len(view) - 1, -1, -1):
        total += entry_tokens(view[index], estimator=estimator)
        out[index] = total
    return out
