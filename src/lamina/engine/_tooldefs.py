"""The tool definitions a session's requests send, and their record in the log (pure).

Like the stable prefix, each version is recorded once, when it changes: a `tools` state change
holding every definition, under `version:digest`, so a request rebuilt from the log sends them again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from lamina.context import ToolSpec
from lamina.defang import trusted
from lamina.session import LogEntry, PinnedTool, StateChange


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


def recorded_tools(change: StateChange) -> tuple[ToolSpec, ...] | None:
    """The tool definitions a `tools` state change records (None: not a readable `tools` change).

    Args:
        change: A state change from the log.

    Returns:
        The definitions, as the requests from that change on sent them; None for any other change,
        or a hand-edited one whose schema is not a JSON object.
    """
    if change.key != "tools":
        return None
    specs: list[ToolSpec] = []
    for tool in change.tools:
        try:
            schema = json.loads(tool.input_schema)
        except ValueError:
            return None
        if not isinstance(schema, dict):
            return None
        # texts Lamina checked (and neutralised) itself before the first request sent them
        specs.append(ToolSpec(tool.name, trusted(tool.description), schema, deferred=tool.deferred))
    return tuple(specs)


class ToolDefinitions:
    """The tool definitions the log recorded last (append order), and the change to record when they differ."""

    def __init__(self) -> None:
        """Nothing recorded yet: the first turn records its definitions."""
        self._recorded: tuple[int, str] | None = None

    def observe(self, entry: LogEntry) -> None:
        """Fold an entry of the log, in append order (tool definitions hold on every branch)."""
        if isinstance(entry, StateChange) and entry.key == "tools":
            version, _, digest = entry.value.partition(":")
            self._recorded = (int(version) if version.isdigit() else 0, digest)

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
