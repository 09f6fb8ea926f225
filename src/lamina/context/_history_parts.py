"""The conversation as parts: history entries, tool results, the compaction summary and the user's words (pure).

Each piece of the conversation that reaches a request gets its part, with a stability class,
provenance and authority (SPEC F1); the message model and the renderers build their blocks from
these parts' texts, so what is classified is exactly what is sent. The table of keys, stability
classes and authorities is in `docs/parts.md`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePath
from typing import Any, Final

import msgspec

from lamina.context._parts import Part, Stability, Tier
from lamina.defang import Authority, SafeText, neutralise, render_block, trusted
from lamina.session import AssistantMessage, AttachmentRef, Reasoning, ToolCall, ToolResult, UserMessage

__all__ = [
    "ON_DEMAND_FILE_NAMES",
    "assistant_part",
    "attachment_part",
    "interrupted_part",
    "is_on_demand_read",
    "path_of",
    "reasoning_part",
    "summary_part",
    "tool_call_of",
    "tool_call_part",
    "tool_result_part",
    "user_part",
    "users_words_part",
]

ON_DEMAND_FILE_NAMES: Final = frozenset({"skill.md", "guide.md"})
"""Files whose Read is an on-demand document rather than a tool result (letter case ignored)."""

_DOCUMENT_SUFFIXES: Final = frozenset({".md", ".rst", ".txt", ".pdf"})
_DOCUMENT_FOLDERS: Final = frozenset({"docs", "doc", "documentation"})
_ENCODER: Final = msgspec.json.Encoder()  # key order as the model produced it: the request's bytes
_DECODER: Final = msgspec.json.Decoder(dict[str, Any])


def _history(key: str, text: SafeText, source: str, authority: Authority) -> Part:
    """A part of the conversation's history tier: compactable, as every history part is."""
    return Part(key, text, source, authority, Stability.COMPACTABLE, Tier.HISTORY)


def _model_source(entry: AssistantMessage) -> str:
    """Who wrote a reply or its reasoning: `model:<id>`, or `model` when the log did not record which."""
    return f"model:{entry.model}" if entry.model else "model"


def user_part(entry: UserMessage) -> Part:
    """The user's message as typed (the user's own words are trusted as data of the user)."""
    return _history(f"history.user.{entry.id}", trusted(entry.text), "user", Authority.USER_DATA)


def assistant_part(entry: AssistantMessage) -> Part:
    """The model's reply, given back to it as it was written."""
    text = trusted(entry.text)  # the model's own reply, given back unchanged (cache bytes)
    return _history(f"history.assistant.{entry.id}", text, _model_source(entry), Authority.MODEL_OUTPUT)


def reasoning_part(entry: AssistantMessage, index: int, reasoning: Reasoning) -> Part:
    """One block of the model's reasoning before its answer; its text is what can be read of it.

    The block itself (signature, encrypted content) goes back unchanged as `ReasoningBlock.reasoning`;
    the part's text is the readable reasoning (or the summaries) that the budget counts.
    """
    text = trusted(reasoning.readable)  # the model's own reasoning, given back unchanged (cache bytes)
    return _history(f"history.reasoning.{entry.id}.{index}", text, _model_source(entry), Authority.MODEL_OUTPUT)


def tool_call_part(call: ToolCall) -> Part:
    """A tool call the model made: `{"name": ..., "input": ...}`, the input in the model's own key order.

    The model's own call, given back to it unchanged like its replies (the cached prefix keeps its
    bytes); what a tool does with it is the pre-tool-use pipeline's business.
    """
    text = trusted(_ENCODER.encode({"name": call.name, "input": dict(call.input)}).decode())
    return _history(f"history.tool_call.{call.call_id}", text, "model", Authority.MODEL_OUTPUT)


def tool_call_of(part: Part) -> tuple[str, dict[str, Any]]:
    """The name and input of the tool call `part` holds (a tool call's part), as its text says."""
    call = _DECODER.decode(part.text)
    return str(call["name"]), dict(call["input"])


def tool_result_part(result: ToolResult, call: ToolCall | None = None) -> Part:
    """A tool's output, neutralised; an on-demand document when `call` read a skill, guide or document."""
    on_demand = call is not None and is_on_demand_read(call)
    return Part(
        f"tool_result.{result.call_id}",
        neutralise(result.content),  # tool output is untrusted: markers neutralised, no wrapper
        f"tool:{result.name}",
        Authority.TOOL_OUTPUT,
        Stability.ON_DEMAND if on_demand else Stability.COMPACTABLE,
        Tier.ON_DEMAND if on_demand else Tier.TOOL_RESULTS,
    )


def interrupted_part(call: ToolCall, text: str) -> Part:
    """The synthetic result of a tool call that never completed (Lamina's own sentence)."""
    return Part(
        f"tool_result.{call.call_id}",
        trusted(text),
        "lamina",
        Authority.TOOL_OUTPUT,
        Stability.COMPACTABLE,
        Tier.TOOL_RESULTS,
    )


def summary_part(summary: SafeText) -> Part:
    """The compaction summary (already neutralised) in its block, as it opens the conversation."""
    text = render_block("compaction_summary", summary)
    return _history("compaction.summary", text, "compaction", Authority.MODEL_OUTPUT)


def users_words_part(lane: SafeText) -> Part:
    """The user's words lane after a compaction (the rendered `<pinned>` block)."""
    return _history("compaction.users_words", lane, "user", Authority.USER_DATA)


def attachment_part(
    entry: UserMessage | ToolResult, index: int, ref: AttachmentRef, text: SafeText, *, media_tokens: int | None = None
) -> Part:
    """The part of one block of an entry's attachments.

    A user's file is user data; an image a tool returned is tool output, counted with the tool results.

    Args:
        entry: The user message or tool result the file came with.
        index: The block's place among the entry's attachment blocks.
        ref: The file the block shows.
        text: The block's text, or for a media block its label.
        media_tokens: For a media block, the provider's token estimate.

    Returns:
        The block's part.
    """
    tool = entry.name if isinstance(entry, ToolResult) else None
    return Part(
        f"attachment.{entry.id}.{index}",
        text,
        f"{'' if tool is None else f'tool:{tool} '}attachment:{ref.name} sha256:{ref.sha256}",
        Authority.USER_DATA if tool is None else Authority.TOOL_OUTPUT,
        Stability.COMPACTABLE,
        Tier.ON_DEMAND if tool is None else Tier.TOOL_RESULTS,
        media_tokens,
    )


def is_on_demand_read(call: ToolCall) -> bool:
    """Whether `call` reads a document on demand: a `SKILL.md`, a `guide.md`, or a text file under `docs/`."""
    if call.name != "Read":
        return False
    path = path_of(call.input)
    if path is None:
        return False
    pure = PurePath(path)
    if pure.name.lower() in ON_DEMAND_FILE_NAMES:
        return True
    return pure.suffix.lower() in _DOCUMENT_SUFFIXES and any(p.lower() in _DOCUMENT_FOLDERS for p in pure.parts[:-1])


def path_of(arguments: Mapping[str, Any]) -> str | None:
    """The path a tool call's input names (`path`, else `file_path`), if it is a string."""
    value = arguments.get("path", arguments.get("file_path"))
    return value if isinstance(value, str) else None
