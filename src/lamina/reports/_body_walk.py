"""The one walk of a rendered request for accounting: its blocks in prefix order, labelled and measured (pure).

Blocks are split as the cache simulator splits them (`lamina.cachesim`'s block helpers) and
measured as it measures them (canonical JSON, without `cache_control`), except media, counted by
the providers' formulas. The budget's cache layout and the inspector's layers both walk a body here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, assert_never, cast

import msgspec

from lamina.attachments import media_tokens
from lamina.cachesim import (
    message_items,
    openai_item,
    openai_message,
    system_items,
    text_block,
    tool_items,
    without_marker,
)
from lamina.context import TurnContext
from lamina.placement import (
    AnthropicTarget,
    OpenAIChatTarget,
    OpenAIResponsesTarget,
    RenderedRequest,
    RenderTarget,
    SdkManagedPrompt,
    SdkManagedTarget,
)
from lamina.tokens import TokenEstimator

__all__ = ["BodyBlock", "block_tokens", "body_blocks", "request_body"]

_ENCODER: Final = msgspec.json.Encoder(order="sorted")

_NESTED: Final = {"tool_result": "content", "function_call_output": "output"}
"""Where a tool result's own blocks are (the images a tool returned among them), by block type."""


@dataclass(frozen=True, slots=True)
class BodyBlock:
    """One block of a rendered request body, in prefix order (tools, then system, then messages)."""

    where: str
    """Path in the request body: `tools[2]`, `system[4]`, `messages[0].content[1]`, `input[3]`."""
    label: str
    """What the block holds: a tool name, a part key, `user message`, `tail: date_time, ...`."""
    block: object
    """The block as the simulator sees it (a string content as one text block)."""
    stable: bool
    """Whether the block belongs to the stable prefix (tools, system and the stable parts)."""
    message: int | None = None
    """The index of the message (or input item) holding the block; None for tools, system, instructions."""
    ttl: str | None = None
    """The cache TTL (`5m`, `1h`) when the block carries an explicit breakpoint (Anthropic)."""


def request_body(request: RenderedRequest) -> Mapping[str, Any]:
    """The body of a rendered request.

    Args:
        request: What `lamina.placement.render` returned.

    Returns:
        The request body as a mapping.

    Raises:
        TypeError: `request` is an SDK-managed prompt, which has no body.
    """
    if isinstance(request, SdkManagedPrompt):
        raise TypeError("an SdkManagedPrompt is not a request body; use SdkManagedTarget")
    return cast(Mapping[str, Any], request)


def body_blocks(
    request: RenderedRequest, target: RenderTarget, *, turn: TurnContext | None = None
) -> Iterator[BodyBlock]:
    """Every block of `request` (rendered for `target`) in prefix order, split as the cache simulator splits it.

    Args:
        request: What `lamina.placement.render(turn, target)` returned.
        target: The target it was rendered for (it decides the format).
        turn: The turn it was rendered from, to label blocks with part keys; optional.

    Yields:
        Each block with its path, label, whether it is stable and its breakpoint.

    Raises:
        TypeError: `target` is SDK-managed (its prompt has no blocks).
    """
    labels = _Labels(turn)
    match target:
        case AnthropicTarget():
            yield from _anthropic_blocks(request_body(request), labels)
        case OpenAIChatTarget():
            yield from _openai_chat_blocks(request_body(request), labels)
        case OpenAIResponsesTarget():
            yield from _openai_responses_blocks(request_body(request), labels)
        case SdkManagedTarget():
            raise TypeError("an SDK-managed prompt has no blocks")
        case _:
            assert_never(target)


def block_tokens(block: object, estimator: TokenEstimator) -> int:
    """A block's tokens: the simulator's count (canonical JSON without markers), media by the providers' formulas.

    Media count by formula also inside a tool result.

    Args:
        block: One block of a request body (a `BodyBlock.block`).
        estimator: Counts the block's canonical JSON, as the cache simulator does.

    Returns:
        The block's estimated tokens.
    """
    if isinstance(block, Mapping):
        block = without_marker(block)
        key = _NESTED.get(str(block.get("type")))
        inner = block.get(key) if key else None
        if key and isinstance(inner, list) and any(_inline_media(b) for b in inner):
            found = [m for b in inner if (m := _inline_media(b)) is not None]
            rest = {**block, key: [b for b in inner if _inline_media(b) is None]}
            return estimator.count(_ENCODER.encode(rest).decode()) + sum(media_tokens(*m) for m in found)
    media = _inline_media(block)
    if media is not None:  # an image or a PDF: by the providers' formulas, not its base64 text
        return media_tokens(*media)
    return estimator.count(_ENCODER.encode(block).decode())


def _inline_media(block: object) -> tuple[str, str] | None:
    """(media type, base64 data) of an attachment block in any of the three wire formats, else None."""
    if not isinstance(block, Mapping):
        return None
    kind = block.get("type")
    source = block.get("source")
    if kind in ("image", "document") and isinstance(source, Mapping) and source.get("type") == "base64":
        return str(source.get("media_type")), str(source.get("data"))
    url = _data_url(block, kind)
    if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return head, data
    return None


def _data_url(block: Mapping[str, Any], kind: object) -> object:
    """The URL an OpenAI image or file block carries its data in (None for other blocks)."""
    if kind == "image_url" and isinstance(image := block.get("image_url"), Mapping):
        return image.get("url")
    if kind == "input_image":
        return block.get("image_url")
    if kind == "file" and isinstance(file := block.get("file"), Mapping):
        return file.get("file_data")
    if kind == "input_file":
        return block.get("file_data")
    return None


class _Labels:
    """Names blocks after the turn they were rendered from."""

    def __init__(self, turn: TurnContext | None) -> None:
        self._turn = turn
        self.stable_keys = [p.key for p in turn.stable.system_parts] if turn else []
        self.context_keys = [p.key for p in turn.stable.context_parts] if turn else []
        """The stable parts the first user message holds (they have no system authority)."""
        self._tail = turn.tail if turn else ""
        """Rendered once: `tail` renders every tail part anew, and a long session has thousands of text blocks."""

    def text(self, text: str) -> str:
        turn = self._turn
        if turn is not None:
            if self._tail and text == self._tail:
                keys = [p.key for p in turn.volatile] + [o.kind for o in turn.one_shots]
                return f"tail: {', '.join(keys)}"
            if text == turn.user_text:
                return "user message"
            if turn.summary and text.startswith("<compaction_summary>"):
                return "compaction summary"
            if turn.pinned and text == turn.pinned:
                return "user's words"
        return "history"

    def system(self, index: int) -> str:
        return self.stable_keys[index] if index < len(self.stable_keys) else "system"

    def context(self, index: int) -> str:
        return self.context_keys[index] if index < len(self.context_keys) else "stable parts"


def _block_label(block: Mapping[str, Any], labels: _Labels) -> str:
    kind = block.get("type")
    if kind == "text":
        return labels.text(str(block.get("text", "")))
    if kind == "tool_use":
        return f"tool call {block.get('name', '')}"
    if kind == "tool_result":
        return "tool result"
    return str(kind or "block")


def _ttl(block: Mapping[str, Any]) -> str | None:
    marker = block.get("cache_control")
    if not isinstance(marker, Mapping):
        return None
    return str(marker.get("ttl") or "5m")


def _anthropic_blocks(body: Mapping[str, Any], labels: _Labels) -> Iterator[BodyBlock]:
    for where, _, _, tool in tool_items(list(body.get("tools") or ())):
        yield BodyBlock(where, str(tool.get("name", "tool")), tool, True, ttl=_ttl(tool))
    system = body.get("system")
    for i, (where, _, _, block) in enumerate(system_items(system) if system else ()):
        label = "system" if isinstance(system, str) else labels.system(i)
        yield BodyBlock(where, label, block, True, ttl=_ttl(block))
    for m, message in enumerate(body.get("messages") or ()):
        prefix = f"messages[{m}]"
        whole = isinstance(message.get("content"), str)
        stable = m == 0 and bool(labels.context_keys) and not whole  # the stable parts without system authority
        for c, (where, _, _, block) in enumerate(message_items(message, prefix)):
            if whole:
                label = labels.text(str(block.get("text", "")))
            else:
                label = labels.context(c) if stable else _block_label(block, labels)
            yield BodyBlock(prefix + where, label, block, stable, m, _ttl(block))


def _openai_chat_blocks(body: Mapping[str, Any], labels: _Labels) -> Iterator[BodyBlock]:
    yield from _openai_tools(body, chat=True)
    messages = body.get("messages") or ()
    first = 1 if messages and messages[0].get("role") == "system" else 0
    for m, message in enumerate(messages):
        context = m == first and bool(labels.context_keys)  # the stable parts without system authority
        stable = context or (m == 0 and message.get("role") == "system")
        yield from _openai_message(message, m, f"messages[{m}]", labels, context=context, stable=stable)


def _openai_responses_blocks(body: Mapping[str, Any], labels: _Labels) -> Iterator[BodyBlock]:
    yield from _openai_tools(body, chat=False)
    instructions = body.get("instructions")
    if instructions:
        yield BodyBlock("instructions", "stable parts", text_block(str(instructions)), True)
    for i, item in enumerate(body.get("input") or ()):
        where = f"input[{i}]"
        if "role" in item:
            context = i == 0 and bool(labels.context_keys)
            yield from _openai_message(item, i, where, labels, context=context, stable=context)
        else:
            kind = str(item.get("type", "item"))
            label = f"tool call {item.get('name', '')}" if kind == "function_call" else kind.replace("_", " ")
            for sub, _, block in openai_item(item, where):
                yield BodyBlock(where + sub, label, block, False, i)


def _openai_tools(body: Mapping[str, Any], *, chat: bool) -> Iterator[BodyBlock]:
    for i, tool in enumerate(body.get("tools") or ()):
        function = tool.get("function") if chat else tool
        yield BodyBlock(f"tools[{i}]", str((function or {}).get("name", "tool")), tool, True)


def _openai_message(
    message: Mapping[str, Any], index: int, where: str, labels: _Labels, *, context: bool, stable: bool
) -> Iterator[BodyBlock]:
    role = str(message.get("role", ""))
    label = "stable parts" if role == "system" else "tool result" if role == "tool" else ""
    for c, (sub, _, block) in enumerate(openai_message(message, where)):
        if sub:  # a content block
            text = str(block.get("text", "")) if isinstance(block, Mapping) else ""
            name = labels.context(c) if context else label or labels.text(text)
            yield BodyBlock(where + sub, name, block, stable, index)
        else:  # what the message carries besides its content
            calls = [str(call.get("function", {}).get("name", "")) for call in message.get("tool_calls") or ()]
            yield BodyBlock(where, f"tool call {', '.join(calls)}" if calls else label or role, block, stable, index)
