"""A provider's compaction block in requests: sent first, as it came, to its own provider only (pure).

Described in docs/compaction.md ("Server compaction"). The block (Anthropic) or item (OpenAI) is
decoded from the log's JSON text and sent unchanged; Lamina's ledger and the user's words lane
follow it. A request to any other provider shows the boundary's summary instead (invariant 9).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, Literal

import msgspec

from lamina.context import Message, TurnContext, prelude_messages, to_messages
from lamina.defang import SafeText
from lamina.placement._anthropic_render import wire_messages
from lamina.placement._openai_render import responses_wire_items
from lamina.placement._reasoning import replayed
from lamina.placement._targets import AnthropicTarget, OpenAIResponsesTarget
from lamina.session import LogEntry, ServerCompaction

WireConverter = Callable[[Sequence[Message]], list[dict[str, Any]]]
_OWNERS: Final = {"anthropic": "anthropic", "openai": "openai"}
"""A block's provider → the reasoning owner (the wire format) whose requests may carry it."""


def block_wire(server: ServerCompaction) -> dict[str, Any]:
    """The block as it goes back: an assistant message holding it (Anthropic), or the item itself (OpenAI)."""
    raw = msgspec.json.decode(server.block)
    if server.provider == "anthropic":
        return {"role": "assistant", "content": [raw]}
    return dict(raw)


def carries_block(server: ServerCompaction | None, owner: str) -> bool:
    """Whether a request in `owner`'s format sends `server` (its own provider's format only)."""
    return server is not None and _OWNERS[server.provider] == owner


def prelude_wire(turn: TurnContext, owner: str, convert: WireConverter) -> list[dict[str, Any]]:
    """The conversation's first messages: the block then the ledger and the lane, or the summary and the lane."""
    if turn.server is None or not carries_block(turn.server, owner):
        return convert(prelude_messages(turn.summary, turn.pinned))
    return [block_wire(turn.server), *convert(prelude_messages(turn.server_prelude, turn.pinned))]


def compaction_messages(
    server: ServerCompaction | None,
    previous_summary: SafeText | None,
    history: list[dict[str, Any]],
    *,
    owner: Literal["anthropic", "openai"],
    convert: WireConverter,
) -> list[dict[str, Any]]:
    """What a compaction request summarises: the previous block (or Lamina's previous summary), then `history`."""
    if carries_block(server, owner):
        assert server is not None
        return [block_wire(server), *history]
    return [*convert(prelude_messages(previous_summary, None)), *history]


def compaction_request(
    target: AnthropicTarget | OpenAIResponsesTarget,
    entries: Sequence[LogEntry],
    *,
    server: ServerCompaction | None,
    previous_summary: SafeText | None,
    instructions: str | None = None,
) -> dict[str, Any]:
    """The body of a provider compaction of `entries`: Anthropic's standalone request, or OpenAI's compact.

    The entries are converted as a request converts completed turns (their reasoning left out: a
    summary needs none); the previous block, or Lamina's previous summary, comes first.

    Args:
        target: The provider's target (its model, its output limit).
        entries: The summarised part of the provider view.
        server: The latest compaction's block, if the provider made it (sent back first, unchanged).
        previous_summary: Lamina's latest summary, when the latest compaction was Lamina's own.
        instructions: Replaces the provider's summarisation prompt (Anthropic) or is the compaction's
            instructions (OpenAI); None: the provider's own.

    Returns:
        The body: `client.beta.messages.create(**body)` or `client.responses.compact(**body)`.
    """
    messages = to_messages(entries)
    if isinstance(target, AnthropicTarget):
        history = wire_messages(replayed(messages, "anthropic", current=False, history="drop"))
        wire = compaction_messages(server, previous_summary, history, owner="anthropic", convert=wire_messages)
        config: dict[str, Any] = {"type": "summarize"}
        if instructions:
            config["instructions"] = instructions
        return {
            "model": target.model,
            "max_tokens": min(target.max_tokens, 8192),
            "messages": wire,
            "compaction": config,
        }
    items = responses_wire_items(replayed(messages, "openai", current=False, history="drop"))
    body: dict[str, Any] = {
        "model": target.model,
        "input": compaction_messages(server, previous_summary, items, owner="openai", convert=responses_wire_items),
    }
    if instructions:
        body["instructions"] = instructions
    return body
