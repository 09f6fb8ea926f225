"""The tool definitions a session's requests send, and their record in the log (pure).

Like the stable prefix, each version is recorded once, when it changes: a `tools` state change
holding every definition, under `version:digest`, so a request rebuilt from the log sends them again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence

import msgspec

from lamina.context import ToolSpec
from lamina.placement import recorded_tools
from lamina.pricing import Outlook, price_tool_change
from lamina.session import LogEntry, PinnedTool, StateChange, UserMessage
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator

__all__ = ["ToolDefinitions", "pinned_tools", "recorded_tools", "tools_digest"]


def pinned_tools(tools: Sequence[ToolSpec]) -> tuple[PinnedTool, ...]:
    """The definitions as the log records them, the schema as JSON text in its own key order."""
    return tuple(
        PinnedTool(
            name=t.name,
            description=str(t.description),
            input_schema=json.dumps(dict(t.input_schema)),
            deferred=t.deferred,
        )
        for t in tools
    )


def tools_digest(pinned: Sequence[PinnedTool]) -> str:
    """The SHA-256 over the definitions' names, descriptions and schemas, in order."""
    h = hashlib.sha256()
    for tool in pinned:
        for text in (tool.name, tool.description, tool.input_schema):
            h.update(text.encode())
            h.update(b"\0")
        if tool.deferred:  # only then: the digests of sessions without deferred tools stay as they were
            h.update(b"deferred\0")
        h.update(b"\n")
    return h.hexdigest()


class ToolDefinitions:
    """The tool definitions the log recorded last (append order), and the changes to record when they differ."""

    def __init__(self) -> None:
        """Nothing recorded yet: the first turn records its definitions."""
        self._recorded: tuple[int, str] | None = None
        self._pinned: tuple[PinnedTool, ...] = ()

    def observe(self, entry: LogEntry) -> None:
        """Fold an entry of the log, in append order (tool definitions hold on every branch)."""
        if isinstance(entry, StateChange) and entry.key == "tools":
            version, _, digest = entry.value.partition(":")
            self._recorded = (int(version) if version.isdigit() else 0, digest)
            self._pinned = entry.tools

    def change(self, tools: Sequence[ToolSpec]) -> StateChange | None:
        """The `tools` state change to record before a turn sending `tools` (None: the log has them already).

        Args:
            tools: The definitions the turn's requests send.

        Returns:
            The change holding every definition under the next version, or None when unchanged.
        """
        pinned = pinned_tools(tools)
        digest = tools_digest(pinned)
        version = 0
        if self._recorded is not None:
            version, known = self._recorded
            if known == digest:
                return None
        elif not pinned:
            return None  # a session without tools, from its start: nothing to record
        previous = f"{version}:{self._recorded[1]}" if self._recorded is not None else None
        names = ", ".join(t.name for t in pinned) or "none"
        return StateChange(
            key="tools",
            value=f"{version + 1}:{digest}",
            previous=previous,
            detail=f"{len(pinned)} tool definitions: {names}",
            tools=pinned,
        )

    def changes(
        self,
        tools: Sequence[ToolSpec],
        view: Sequence[LogEntry],
        outlook: Callable[[], Outlook],
        estimator: TokenEstimator = DEFAULT_ESTIMATOR,
    ) -> list[StateChange]:
        """The `tools` changes to record, in order, before a request sending `tools` (none when unchanged).

        A change inside a window whose view holds no `tools` change first records the set it
        replaces again, so the view says what the window's `tools` array is (a model that takes
        tool changes keeps it and gets blocks). A change the cost model prices cheaper as a
        rewrite of the array is marked `tools_rewritten`, as is one deferring a tool where the set
        before deferred none (the array has no tool-search tool for it).

        Args:
            tools: The definitions the next requests send.
            view: The provider view the change is recorded in.
            outlook: What the cost model prices from now (read only for a change inside a window).
            estimator: Counts the definitions' tokens.

        Returns:
            The state changes to record.
        """
        change = self.change(tools)
        if change is None or self._recorded is None:
            return [] if change is None else [change]
        if not any(isinstance(e, UserMessage) for e in view):
            return [change]  # the window's first set: the array is written anyway
        base: list[StateChange] = []
        if not any(isinstance(e, StateChange) and e.key == "tools" for e in view):
            base = [msgspec.structs.replace(change, value=change.previous or "", previous=None, tools=self._pinned)]
            base[0] = msgspec.structs.replace(base[0], detail=f"the window's tool definitions: {len(self._pinned)}")
        rewritten = msgspec.UNSET if _kept(self._pinned, change.tools, outlook(), estimator) else True
        return [*base, msgspec.structs.replace(change, tools_rewritten=rewritten)]


def _kept(
    before: Sequence[PinnedTool], after: Sequence[PinnedTool], outlook: Outlook, estimator: TokenEstimator
) -> bool:
    """Whether the change from `before` to `after` keeps the `tools` array (blocks), not a rewrite."""
    if any(t.deferred for t in after) and not any(t.deferred for t in before):
        return False  # the array must carry the tool-search tool a first deferred tool needs
    old, new = {t.name: t for t in before}, {t.name: t for t in after}
    added = [t for n, t in new.items() if old.get(n) != t]
    removed = [t for n, t in old.items() if new.get(n) != t]
    price = price_tool_change(
        outlook,
        added_tokens=_tokens(added, estimator),
        removed_tokens=_tokens(removed, estimator),
        block_tokens=len(removed) * _REFERENCE_TOKENS,
    )
    return price.keeps_cache


_REFERENCE_TOKENS = 20
"""A `tool_removal` block's tokens, near enough."""


def _tokens(tools: Sequence[PinnedTool], estimator: TokenEstimator) -> int:
    return sum(estimator.count(f"{t.name} {t.description} {t.input_schema}") for t in tools)
