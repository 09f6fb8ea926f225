"""One way to split a request body into cache blocks, for the simulators and for `lamina.reports` (pure).

A block is one unit of prefix identity: a tool definition, a system block, a content block of a
message (a string `content` is one text block), and, for OpenAI, whatever a message carries besides
its content (`tool_calls`, `tool_call_id`, ...) or an input item that is not a message. Each
generator yields `(where, ..., role, block)`: `where` is the block's path inside its group
(`tools[3]`, `.content[2]`), so a report can name it and an error can point at it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Final, TypeAlias

from lamina.cachesim._simulator import CacheSimulationError

TOOLS: Final = 0
SYSTEM: Final = 1
MESSAGES: Final = 2
"""Anthropic's three levels, in prefix order: a change at one level invalidates every later one."""

OpenAISection: TypeAlias = tuple[bytes, object, str, Iterable[tuple[str, str, object]]]
"""`(tag, value, where, blocks)`: one memoisable piece of an OpenAI body (its tools, its output schema, one
message or input item), its kind's tag, where it is, and its blocks `(where inside it, role, block)`."""


def as_list(value: object, where: str) -> list[object]:
    """`value` as a list (None: empty).

    Raises:
        CacheSimulationError: `value` is not a list, named by `where`.
    """
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise CacheSimulationError(f"{where}: expected a list, got {type(value).__name__}")
    return list(value)


def as_mapping(value: object, where: str) -> Mapping[str, object]:
    """`value` as a JSON object.

    Raises:
        CacheSimulationError: `value` is not an object, named by `where`.
    """
    if not isinstance(value, Mapping):
        raise CacheSimulationError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def text_block(text: str) -> dict[str, object]:
    # A string content renders as one text block, so both spellings share an identity.
    """A string `content` as the one text block it renders as."""
    return {"type": "text", "text": text}


def without_marker(block: Mapping[str, object]) -> Mapping[str, object]:
    """The block minus `cache_control` (also inside a tool_result's content), so markers never change identity."""
    if "cache_control" in block:
        block = {k: v for k, v in block.items() if k != "cache_control"}
    inner = block.get("content")
    if (
        block.get("type") == "tool_result"
        and isinstance(inner, list)
        and any(isinstance(c, Mapping) and "cache_control" in c for c in inner)
    ):
        inner = [{k: v for k, v in c.items() if k != "cache_control"} if isinstance(c, Mapping) else c for c in inner]
        block = {**block, "content": inner}
    return block


def tool_items(tools: list[object]) -> Iterator[tuple[str, int, str, Mapping[str, object]]]:
    """The tool definitions as Anthropic cache blocks: `(where, level, role, block)`.

    A deferred tool (`defer_loading: true`) is not in the prompt until a tool search loads it: none.
    """
    for i, tool in enumerate(tools):
        if isinstance(tool, Mapping) and tool.get("defer_loading") is True:
            continue
        yield f"tools[{i}]", TOOLS, "tools", as_mapping(tool, f"tools[{i}]")


def system_items(system: object) -> Iterator[tuple[str, int, str, Mapping[str, object]]]:
    """The system prompt (a string or a list of blocks) as Anthropic cache blocks: `(where, level, role, block)`."""
    if isinstance(system, str):
        if system:
            yield "system", SYSTEM, "system", text_block(system)
        return
    for i, block in enumerate(as_list(system, "system")):
        yield f"system[{i}]", SYSTEM, "system", as_mapping(block, f"system[{i}]")


def message_items(raw: object, prefix: str) -> Iterator[tuple[str, int, str, Mapping[str, object]]]:
    """One message's content blocks as Anthropic cache blocks: `(where, level, role, block)`.

    `where` is relative to `prefix`, the message's own path.
    """
    message = as_mapping(raw, prefix)
    role = str(message.get("role", ""))
    content = message.get("content")
    if isinstance(content, str):
        yield ".content", MESSAGES, role, text_block(content)
        return
    for c, block in enumerate(as_list(content, f"{prefix}.content")):
        yield f".content[{c}]", MESSAGES, role, as_mapping(block, f"{prefix}.content[{c}]")


def openai_item(raw: object, where: str) -> Iterator[tuple[str, str, object]]:
    """One OpenAI input item as cache blocks, `(where, role, block)`.

    An item that is not a message is one block, its type standing for its role.
    """
    item = as_mapping(raw, where)
    if "role" in item:
        yield from openai_message(item, where)
    else:  # function_call, function_call_output, reasoning, compaction, ...
        yield "", str(item.get("type", "item")), item


def openai_message(raw: object, where: str) -> Iterator[tuple[str, str, object]]:
    """One OpenAI message as cache blocks, `(where, role, block)`: its content, then whatever else it carries."""
    message = as_mapping(raw, where)
    role = str(message.get("role", ""))
    content = message.get("content")
    # Everything but role and content (tool_calls, tool_call_id, name, ...) is one more block.
    meta = {k: v for k, v in message.items() if k not in ("role", "content") and not (k == "type" and v == "message")}
    emitted = False
    if isinstance(content, str):
        yield ".content", role, text_block(content)
        emitted = True
    else:
        for c, part in enumerate(as_list(content, f"{where}.content")):
            yield f".content[{c}]", role, part
            emitted = True
    if meta or not emitted:
        yield "", role, meta


def openai_sections(body: Mapping[str, object]) -> Iterator[OpenAISection]:
    """A Chat Completions or Responses body in prompt order: tools, output schema, then the conversation.

    Raises:
        CacheSimulationError: The body has neither `messages` nor `input`/`instructions`.
    """
    tools = body.get("tools")
    if tools is not None:
        yield b"tools", tools, "tools", [(f"[{i}]", "tools", tool) for i, tool in enumerate(as_list(tools, "tools"))]
    text = body.get("text")
    schema = body.get("response_format") or (text.get("format") if isinstance(text, Mapping) else None)
    if schema is not None:
        yield b"schema", schema, "response_format", [("", "schema", schema)]
    if "messages" in body:
        for m, message in enumerate(as_list(body.get("messages"), "messages")):
            where = f"messages[{m}]"
            yield b"message", message, where, openai_message(message, where)
        return
    if "input" not in body and "instructions" not in body:
        raise CacheSimulationError("body has neither 'messages' nor 'input'/'instructions': not an OpenAI request")
    for name, role in (("instructions", "developer"), ("input", "user")):
        value = body.get(name)
        if isinstance(value, str):
            if value:
                yield name.encode(), value, name, [("", role, text_block(value))]
            continue
        for i, item in enumerate(as_list(value, name)):
            where = f"{name}[{i}]"
            yield b"item", item, where, openai_item(item, where)
