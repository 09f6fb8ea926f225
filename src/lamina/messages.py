"""The neutral message model every renderer starts from, and its derivation from log entries (pure).

Log entries are what happened; messages are what a provider is shown. `to_messages` turns a
provider view into alternating user/assistant messages: an assistant text and the tool calls
after it form one assistant message, consecutive tool results one user message, and a user
message carries again, byte for byte, the tail its turn was sent with. The result is always
well-formed: a tool call whose result is missing gets a synthetic "interrupted" result, and a
result whose call is not in view is dropped, so no request is refused for a split pair.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from lamina.defang import admit, join, render_block, trusted
from lamina.history_parts import assistant_part, interrupted_part, tool_result_part, user_part
from lamina.parts import SafeText
from lamina.session._entries import (
    AssistantMessage,
    AttachmentRef,
    LogEntry,
    OutboxRecord,
    PartRecord,
    ToolCall,
    ToolResult,
    TurnRecord,
    UserMessage,
)

INTERRUPTED_RESULT = "[interrupted: this tool call did not complete and returned no result]"

#: Block names of one-shot kinds; other kinds render as `<one_shot kind="...">`.
_ONE_SHOT_TAGS = frozenset({"mode_transition", "recovery", "branch_seed", "transfer_summary", "interruption"})


def render_tail(volatile: Sequence[PartRecord], one_shots: Sequence[PartRecord]) -> SafeText:
    """The text appended to a user message: its volatile parts, then its one-shot parts.

    Their texts are Lamina's sentences with names in them (sources, skills, paths), neutralised
    here as they are shown, so a name can never open or close a block, also in a stored record.
    """
    blocks = [render_block(r.key, admit(r.text)) for r in volatile]
    for r in one_shots:
        text = admit(r.text)
        blocks.append(
            render_block(r.key, text) if r.key in _ONE_SHOT_TAGS else render_block("one_shot", text, kind=r.key)
        )
    return join("\n", blocks)


def turn_tails(entries: Iterable[LogEntry]) -> dict[str, SafeText]:
    """The tail each user message was sent with, from the turn records among `entries`.

    A one-shot part counts only if its delivery was committed: one whose turn never committed is
    still pending and travels in a later tail instead, so it is never shown twice.
    """
    records: list[TurnRecord] = []
    delivered: set[tuple[str, str | None]] = set()
    for entry in entries:
        if isinstance(entry, TurnRecord):
            records.append(entry)
        elif isinstance(entry, OutboxRecord) and entry.status == "delivered":
            delivered.add((entry.part_id, entry.turn_id))
    tails: dict[str, SafeText] = {}
    for r in records:
        # only by this very turn: a part a later turn delivered belongs to that turn's tail
        one_shots = [o for o in r.one_shots if (o.part_id, r.turn_id) in delivered]
        tails[r.user_entry_id] = render_tail(r.volatile, one_shots)
    return tails


@dataclass(frozen=True, slots=True)
class TextBlock:
    """Text fit for a request: Lamina's own, the user's typing, or neutralised (never a raw string)."""

    text: SafeText


@dataclass(frozen=True, slots=True)
class ToolUseBlock:
    """A tool call the model made."""

    call_id: str
    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolResultBlock:
    """The result given back for `call_id`."""

    call_id: str
    name: str
    content: SafeText
    """The tool's output, neutralised: markers escaped, no wrapper (the provider's block separates it)."""
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class ImageBlock:
    """An image the user attached, as the bytes to send (already fitted to the provider)."""

    media_type: str
    data: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class DocumentBlock:
    """A document the user attached (a PDF), for a model that reads it natively."""

    media_type: str
    data: bytes = field(repr=False)
    title: str


Block: TypeAlias = TextBlock | ToolUseBlock | ToolResultBlock | ImageBlock | DocumentBlock

AttachmentBlocks: TypeAlias = Callable[[AttachmentRef], Sequence[Block]]
"""How a stored attachment is shown to the model in use (see `lamina.attachments.AttachmentRenderer`)."""


def attachment_note(ref: AttachmentRef) -> Sequence[Block]:
    """An attachment as a one-line note, where nothing better is known about the model."""
    return (TextBlock(trusted(f"[attached file: {admit(ref.name)} ({admit(ref.media_type)})]")),)


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a conversation in provider-neutral form."""

    role: Literal["user", "assistant"]
    blocks: tuple[Block, ...]


def _append(out: list[Message], role: Literal["user", "assistant"], block: Block) -> None:
    if out and out[-1].role == role:
        out[-1] = Message(role, (*out[-1].blocks, block))
    else:
        out.append(Message(role, (block,)))


def to_messages(
    entries: Sequence[LogEntry],
    *,
    prelude: SafeText | None = None,
    current_tail: tuple[str, SafeText] | None = None,
    attachments: AttachmentBlocks = attachment_note,
) -> list[Message]:
    """Messages for `entries` in order.

    Each user message carries the tail its turn record says it was sent with; `current_tail`
    (user entry id, tail) overrides it for the turn being sent. `prelude` is text put first as a
    user message (a compaction summary). A user message's attachments come before its text, as
    `attachments` shows them.
    """
    tails = turn_tails(entries)
    if current_tail is not None:
        tails[current_tail[0]] = current_tail[1]
    out: list[Message] = []
    if prelude:
        _append(out, "user", TextBlock(prelude))
    open_calls: dict[str, ToolCall] = {}
    for entry in entries:
        if isinstance(entry, UserMessage | AssistantMessage):
            _close_open_calls(out, open_calls)
        match entry:
            case UserMessage(text=text, id=entry_id, attachments=refs):
                for ref in refs:
                    for block in attachments(ref):
                        _append(out, "user", block)
                if text:
                    _append(out, "user", TextBlock(user_part(entry).text))  # the user's own typing, as typed
                tail = tails.get(entry_id)
                if tail:
                    _append(out, "user", TextBlock(tail))
            case AssistantMessage(text=text):
                if text:
                    _append(out, "assistant", TextBlock(assistant_part(entry).text))  # the model's own reply
            case ToolCall(call_id=call_id, name=name, input=args):
                if out and out[-1].role == "user" and any(isinstance(b, ToolResultBlock) for b in out[-1].blocks):
                    _close_open_calls(out, open_calls)  # a new batch after results: finish the old one first
                open_calls[call_id] = entry
                _append(out, "assistant", ToolUseBlock(call_id, name, args))
            case ToolResult(call_id=call_id, name=name, is_error=is_error):
                call = open_calls.pop(call_id, None)
                if call is not None:
                    # tool output is untrusted: neutralised markers, no wrapper (the system prompt says what it is)
                    _append(out, "user", ToolResultBlock(call_id, name, tool_result_part(entry, call).text, is_error))
            case _:
                pass  # state changes, outbox, turn records, labels...: not conversation
    _close_open_calls(out, open_calls)
    return out


def _close_open_calls(out: list[Message], open_calls: dict[str, ToolCall]) -> None:
    for call in open_calls.values():
        text = interrupted_part(call, INTERRUPTED_RESULT).text
        _append(out, "user", ToolResultBlock(call.call_id, call.name, text, is_error=True))
    open_calls.clear()
