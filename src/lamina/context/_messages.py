"""The neutral message model every renderer starts from, built from the parts of log entries (pure).

`to_messages` turns a provider view into alternating, always well-formed user/assistant messages;
every block is built from parts and carries them (`Block.parts`), so a request's parts list is
what its blocks are made of. How pairs are kept whole is in `docs/parts.md`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from lamina.context._history_parts import (
    assistant_part,
    attachment_part,
    interrupted_part,
    reasoning_part,
    summary_part,
    tool_call_of,
    tool_call_part,
    tool_result_part,
    user_part,
    users_words_part,
)
from lamina.context._parts import Part, Stability, Tier
from lamina.defang import Authority, SafeText, join, neutralise, render_block, trusted
from lamina.session import (
    AssistantMessage,
    AttachmentRef,
    LogEntry,
    OutboxRecord,
    PartRecord,
    Reasoning,
    ToolCall,
    ToolResult,
    TurnRecord,
    UserMessage,
)

__all__ = [
    "INTERRUPTED_RESULT",
    "AttachmentBlocks",
    "Block",
    "DocumentBlock",
    "ImageBlock",
    "Message",
    "ReasoningBlock",
    "TextBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "attached_blocks",
    "attachment_note",
    "history_tails",
    "message_parts",
    "prelude_messages",
    "render_tail",
    "split_turns",
    "tail_parts",
    "to_messages",
    "turn_tails",
]

INTERRUPTED_RESULT = "[interrupted: this tool call did not complete and returned no result]"

#: Block names of one-shot kinds; other kinds render as `<one_shot kind="...">`.
_ONE_SHOT_TAGS = frozenset({"mode_transition", "recovery", "branch_seed", "transfer_summary", "interruption"})


def tail_parts(
    volatile: Sequence[PartRecord], one_shots: Sequence[PartRecord], *, history: str | None = None
) -> tuple[Part, ...]:
    """The parts of a tail as it is sent: each volatile part, then each one-shot part, in its block.

    Their texts are Lamina's sentences with names in them (sources, skills, paths), neutralised
    here as they are shown, so a name can never open or close a block, also in a stored record.

    Args:
        volatile: The tail's volatile parts, as recorded.
        one_shots: Its one-shot parts, as recorded.
        history: For an earlier turn's tail, its user message's id: the parts then travel in the
            history, compactable, under `history.tail.<id>.<key>`. None for the turn being sent,
            whose parts are volatile and one-shot.

    Returns:
        The parts, in order.
    """
    parts: list[Part] = []
    for r in volatile:
        text = render_block(r.key, neutralise(r.text))
        if history is None:
            parts.append(Part(r.key, text, "lamina", Authority.SYSTEM_RULE, Stability.VOLATILE, Tier.SESSION_STATE))
        else:
            key = f"history.tail.{history}.{r.key}"
            parts.append(Part(key, text, "lamina", Authority.SYSTEM_RULE, Stability.COMPACTABLE, Tier.HISTORY))
    for r in one_shots:
        body = neutralise(r.text)
        text = render_block(r.key, body) if r.key in _ONE_SHOT_TAGS else render_block("one_shot", body, kind=r.key)
        provenance = f"outbox:{r.part_id}"
        if history is None:
            parts.append(Part(r.key, text, provenance, Authority.SYSTEM_RULE, Stability.ONE_SHOT, Tier.ONE_SHOT))
        else:
            key = f"history.tail.{history}.{r.key}"
            parts.append(Part(key, text, provenance, Authority.SYSTEM_RULE, Stability.COMPACTABLE, Tier.HISTORY))
    return tuple(parts)


def render_tail(volatile: Sequence[PartRecord], one_shots: Sequence[PartRecord]) -> SafeText:
    """The text appended to a user message: its volatile parts, then its one-shot parts (`tail_parts`), one a line."""
    return join("\n", [p.text for p in tail_parts(volatile, one_shots)])


def history_tails(entries: Iterable[LogEntry]) -> dict[str, tuple[Part, ...]]:
    """The tail each user message was sent with, as its parts, from the turn records among `entries`.

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
    tails: dict[str, tuple[Part, ...]] = {}
    for r in records:
        # only by this very turn: a part a later turn delivered belongs to that turn's tail
        one_shots = [o for o in r.one_shots if (o.part_id, r.turn_id) in delivered]
        tails[r.user_entry_id] = tail_parts(r.volatile, one_shots, history=r.user_entry_id)
    return tails


def turn_tails(entries: Iterable[LogEntry]) -> dict[str, SafeText]:
    """The tail each user message was sent with (its tail parts, one a line)."""
    return {k: join("\n", [p.text for p in v]) for k, v in history_tails(entries).items()}


@dataclass(frozen=True, slots=True)
class TextBlock:
    """Text fit for a request: Lamina's own, the user's typing, or neutralised (never a raw string)."""

    text: SafeText
    parts: tuple[Part, ...] = field(default=(), compare=False, repr=False)
    """The parts the text is made of (empty for a block not yet placed in a conversation)."""

    @classmethod
    def of(cls, *parts: Part) -> TextBlock:
        """The block of `parts`' texts, one a line (one part: its text as it is)."""
        return cls(join("\n", [p.text for p in parts]), parts)


@dataclass(frozen=True, slots=True)
class ToolUseBlock:
    """A tool call the model made."""

    call_id: str
    name: str
    input: Mapping[str, Any]
    parts: tuple[Part, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def of(cls, call_id: str, part: Part) -> ToolUseBlock:
        """The call `part` (a tool call's part) holds: name and input decoded from its text."""
        name, arguments = tool_call_of(part)
        return cls(call_id, name, arguments, (part,))


@dataclass(frozen=True, slots=True)
class ToolResultBlock:
    """The result given back for `call_id`."""

    call_id: str
    name: str
    content: SafeText
    """The tool's output, neutralised: markers escaped, no wrapper (the provider's block separates it)."""
    is_error: bool = False
    parts: tuple[Part, ...] = field(default=(), compare=False, repr=False)
    """The result's part, then its media's parts."""
    media: tuple[Block, ...] = ()
    """The images the tool returned, as the model in use takes them (image blocks, or notes), in order."""

    @classmethod
    def of(
        cls, call_id: str, name: str, part: Part, *, is_error: bool = False, media: Sequence[Block] = ()
    ) -> ToolResultBlock:
        """The result block built from its part, carrying the parts of the media it returned.

        Args:
            call_id: The call answered.
            name: The tool's name.
            part: The result's part; its text is the block's content.
            is_error: Whether the tool failed.
            media: The images the tool returned, as the model in use takes them.
        """
        parts = (part, *(p for block in media for p in block.parts))
        return cls(call_id, name, part.text, is_error, parts, tuple(media))


@dataclass(frozen=True, slots=True)
class ImageBlock:
    """An image the user attached, as the bytes to send (already fitted to the provider)."""

    media_type: str
    data: bytes = field(repr=False)
    tokens: int = 0
    """The provider's estimate of its input tokens (its formula for the image's size)."""
    parts: tuple[Part, ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class DocumentBlock:
    """A document the user attached (a PDF), for a model that reads it natively."""

    media_type: str
    data: bytes = field(repr=False)
    title: str
    tokens: int = 0
    """The estimate of its input tokens (its pages' text and images)."""
    parts: tuple[Part, ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ReasoningBlock:
    """A block of the model's reasoning, as its provider returned it (signature, encrypted content).

    Which of them go back, and to whom, is `lamina.placement`'s decision (`docs/reasoning.md`).
    """

    reasoning: Reasoning
    parts: tuple[Part, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def of(cls, entry: AssistantMessage, index: int) -> ReasoningBlock:
        """The `index`-th reasoning block of `entry`, with its part."""
        reasoning = entry.reasoning[index]
        return cls(reasoning, (reasoning_part(entry, index, reasoning),))


Block: TypeAlias = TextBlock | ToolUseBlock | ToolResultBlock | ImageBlock | DocumentBlock | ReasoningBlock

AttachmentBlocks: TypeAlias = Callable[[AttachmentRef], Sequence[Block]]
"""How a stored attachment is shown to the model in use (see `lamina.attachments.AttachmentRenderer`)."""


def attachment_note(ref: AttachmentRef) -> Sequence[Block]:
    """An attachment as a one-line note, where nothing better is known about the model."""
    return (TextBlock(trusted(f"[attached file: {neutralise(ref.name)} ({neutralise(ref.media_type)})]")),)


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


def split_turns(entries: Sequence[LogEntry]) -> list[Sequence[LogEntry]]:
    """`entries` cut before every user message: one segment per turn."""
    segments: list[Sequence[LogEntry]] = []
    start = 0
    for index, entry in enumerate(entries):
        if isinstance(entry, UserMessage) and index > start:
            segments.append(entries[start:index])
            start = index
    if start < len(entries):
        segments.append(entries[start:])
    return segments


def prelude_messages(summary: SafeText | None, pinned: SafeText | None) -> list[Message]:
    """The compaction summary and the user's words lane, as the conversation's first message (none without them)."""
    blocks: list[Block] = []
    if summary:
        blocks.append(TextBlock.of(summary_part(summary)))
    if pinned:
        blocks.append(TextBlock.of(users_words_part(pinned)))
    return [Message("user", tuple(blocks))] if blocks else []


def attached_blocks(entry: UserMessage | ToolResult, attachments: AttachmentBlocks) -> list[Block]:
    """The blocks of `entry`'s attachments (a user's files, a tool's images), each rebuilt from its part.

    Args:
        entry: The user message or tool result.
        attachments: How the model in use shows a stored file.

    Returns:
        The blocks, in order.
    """
    out: list[Block] = []
    for ref in entry.attachments:
        for block in attachments(ref):
            index = len(out)
            match block:
                case TextBlock(text=text):
                    out.append(TextBlock.of(attachment_part(entry, index, ref, text)))
                case ImageBlock(media_type=media, data=data, tokens=tokens):
                    label = trusted(f"[attached image {neutralise(ref.name)} ({neutralise(media)}), sent as an image]")
                    part = attachment_part(entry, index, ref, label, media_tokens=tokens)
                    out.append(ImageBlock(media, data, tokens, (part,)))
                case DocumentBlock(media_type=media, data=data, title=title, tokens=tokens):
                    label = trusted(
                        f"[attached document {neutralise(ref.name)} ({neutralise(media)}), sent as a document]"
                    )
                    part = attachment_part(entry, index, ref, label, media_tokens=tokens)
                    out.append(DocumentBlock(media, data, title, tokens, (part,)))
                case _:
                    # an attachment renderer shows files as text and media, never as tool calls or results
                    raise TypeError(f"an attachment cannot be shown as {type(block).__name__}")
    return out


def to_messages(
    entries: Sequence[LogEntry],
    *,
    current_tail: tuple[str, Sequence[Part]] | None = None,
    attachments: AttachmentBlocks = attachment_note,
) -> list[Message]:
    """Messages for `entries` in order, every block built from its parts.

    Each user message carries the tail its turn record says it was sent with. A user message's
    attachments come before its text.

    Args:
        entries: The provider view's entries.
        current_tail: For the turn being sent, its user entry's id and its tail's parts, which
            override the recorded tail.
        attachments: How attached files are shown.

    Returns:
        Alternating user and assistant messages, well-formed.
    """
    tails: dict[str, Sequence[Part]] = dict(history_tails(entries))
    if current_tail is not None:
        tails[current_tail[0]] = current_tail[1]
    out: list[Message] = []
    open_calls: dict[str, ToolCall] = {}
    for entry in entries:
        if isinstance(entry, UserMessage | AssistantMessage):
            _close_open_calls(out, open_calls)
        match entry:
            case UserMessage(text=text, id=entry_id):
                for block in attached_blocks(entry, attachments):
                    _append(out, "user", block)
                if text:
                    _append(out, "user", TextBlock.of(user_part(entry)))  # the user's own typing, as typed
                tail = tails.get(entry_id)
                if tail:
                    _append(out, "user", TextBlock.of(*tail))
            case AssistantMessage(text=text, reasoning=reasoning):
                for index in range(len(reasoning)):  # before the answer and its calls, as the model produced them
                    _append(out, "assistant", ReasoningBlock.of(entry, index))
                if text:
                    _append(out, "assistant", TextBlock.of(assistant_part(entry)))  # the model's own reply
            case ToolCall(call_id=call_id):
                if out and out[-1].role == "user" and any(isinstance(b, ToolResultBlock) for b in out[-1].blocks):
                    _close_open_calls(out, open_calls)  # a new batch after results: finish the old one first
                open_calls[call_id] = entry
                _append(out, "assistant", ToolUseBlock.of(call_id, tool_call_part(entry)))
            case ToolResult(call_id=call_id, name=name, is_error=is_error):
                call = open_calls.pop(call_id, None)
                if call is not None:
                    # tool output is untrusted: neutralised markers, no wrapper (the system prompt says what it is)
                    part = tool_result_part(entry, call)
                    media = attached_blocks(entry, attachments)  # the images it returned, as the model takes them
                    _append(out, "user", ToolResultBlock.of(call_id, name, part, is_error=is_error, media=media))
            case _:
                pass  # state changes, outbox, turn records, labels...: not conversation
    _close_open_calls(out, open_calls)
    return out


def _close_open_calls(out: list[Message], open_calls: dict[str, ToolCall]) -> None:
    for call in open_calls.values():
        part = interrupted_part(call, INTERRUPTED_RESULT)
        _append(out, "user", ToolResultBlock.of(call.call_id, call.name, part, is_error=True))
    open_calls.clear()


def message_parts(messages: Iterable[Message]) -> list[Part]:
    """The parts `messages`' blocks are built from, in order."""
    return [part for message in messages for block in message.blocks for part in block.parts]
