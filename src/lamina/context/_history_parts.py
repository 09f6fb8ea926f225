"""The conversation as parts: history entries, tool results, the compaction summary and the user's words (pure).

Stable and volatile context are parts from the start; the conversation is stored as log entries.
These builders give each piece of the conversation that reaches a request its part, with a
stability class, provenance and authority (SPEC F1), and the message model (`lamina.context._messages`)
and the renderers build their blocks from these parts' texts, so what is classified is exactly
what is sent:

| piece                              | key                        | stability    | authority      | tier         |
|------------------------------------|----------------------------|--------------|----------------|--------------|
| the user's message                 | `history.user.<id>`        | compactable  | user_data      | history      |
| the model's reply                  | `history.assistant.<id>`   | compactable  | model_output   | history      |
| a tool call (its name and input)   | `history.tool_call.<id>`   | compactable  | model_output   | history      |
| a tool result                      | `tool_result.<call id>`    | compactable  | tool_output    | tool results |
| a read of a skill, guide or document | `tool_result.<call id>`  | on_demand    | tool_output    | documents    |
| a call's "interrupted" result      | `tool_result.<call id>`    | compactable  | tool_output    | tool results |
| an earlier turn's tail, by part    | `history.tail.<id>.<key>`  | compactable  | system_rule    | history      |
| the compaction summary             | `compaction.summary`       | compactable  | model_output   | history      |
| the user's words lane              | `compaction.users_words`   | compactable  | user_data      | history      |
| an attached file, block by block   | `attachment.<id>.<n>`      | compactable  | user_data      | documents    |
| an image a tool returned, by block | `attachment.<id>.<n>`      | compactable  | tool_output    | tool results |

Compactable: summarised by the next compaction, never deleted from the log. On demand: read by
the model when it needs it (a `SKILL.md`, a source's `guide.md`, a document under `docs/`), not
inlined; a compaction forgets it too, and the skills in use are required again.

A tool call's text is the call as the request carries it, `{"name": ..., "input": ...}` in the
model's key order, and its tool-use block is decoded from that text (`tool_call_of`). An
attachment is shown by the model in use's attachment renderer as one or more blocks; each is a
part (`<id>` the user message's, `<n>` counting its blocks; provenance the file's name and
SHA-256; an image a tool returned is shown the same way, `<id>` its result's): a text block's
part is its text, an image or PDF sent as the provider's media block is a part whose text is a
label and whose `media_tokens` is the provider's estimate for it. The tails' parts (this turn's
volatile and one-shot parts, an earlier turn's compactable ones) are built where tails are
rendered, `lamina.context._messages.tail_parts`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePath
from typing import Any, Final

import msgspec

from lamina.context._parts import Part, Stability, Tier
from lamina.defang import Authority, SafeText, neutralise, render_block, trusted
from lamina.session import AssistantMessage, AttachmentRef, ToolCall, ToolResult, UserMessage

__all__ = [
    "ON_DEMAND_FILE_NAMES",
    "assistant_part",
    "attachment_part",
    "interrupted_part",
    "is_on_demand_read",
    "path_of",
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


def user_part(entry: UserMessage) -> Part:
    """The user's message as typed (the user's own words are trusted as data of the user)."""
    return Part(
        f"history.user.{entry.id}",
        trusted(entry.text),
        "user",
        Authority.USER_DATA,
        Stability.COMPACTABLE,
        Tier.HISTORY,
    )


def assistant_part(entry: AssistantMessage) -> Part:
    """The model's reply, given back to it as it was written."""
    return Part(
        f"history.assistant.{entry.id}",
        trusted(entry.text),  # the model's own reply, given back unchanged (cache bytes)
        f"model:{entry.model}" if entry.model else "model",
        Authority.MODEL_OUTPUT,
        Stability.COMPACTABLE,
        Tier.HISTORY,
    )


def tool_call_part(call: ToolCall) -> Part:
    """A tool call the model made: `{"name": ..., "input": ...}`, the input in the model's own key order.

    The model's own call, given back to it unchanged like its replies (the cached prefix keeps its
    bytes); what a tool does with it is the pre-tool-use pipeline's business.
    """
    text = trusted(_ENCODER.encode({"name": call.name, "input": dict(call.input)}).decode())
    return Part(
        f"history.tool_call.{call.call_id}", text, "model", Authority.MODEL_OUTPUT, Stability.COMPACTABLE, Tier.HISTORY
    )


def tool_call_of(part: Part) -> tuple[str, dict[str, Any]]:
    """The name and input of the tool call `part` holds (from `tool_call_part`), as its text says."""
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
    return Part(
        "compaction.summary",
        render_block("compaction_summary", summary),
        "compaction",
        Authority.MODEL_OUTPUT,
        Stability.COMPACTABLE,
        Tier.HISTORY,
    )


def users_words_part(lane: SafeText) -> Part:
    """The user's words lane after a compaction (the rendered `<pinned>` block)."""
    return Part("compaction.users_words", lane, "user", Authority.USER_DATA, Stability.COMPACTABLE, Tier.HISTORY)


def attachment_part(
    entry: UserMessage | ToolResult, index: int, ref: AttachmentRef, text: SafeText, *, media_tokens: int | None = None
) -> Part:
    """Block `index` of the attachments of `entry` (`ref` the file it shows): its text, or for a media
    block a label and the provider's token estimate. A user's file is user data; an image a tool
    returned is tool output, counted with the tool results."""
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
    value = arguments.get("path", arguments.get("file_path"))
    return value if isinstance(value, str) else None
