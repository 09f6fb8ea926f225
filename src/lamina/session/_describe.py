"""A log entry put into words, the one wording the CLI and the inspector share (pure).

`describe_entry` matches every entry type and ends in `assert_never`, so a new entry type is a
type error until it is described here. The words are raw: each front end escapes what it shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, assert_never

import msgspec

from lamina.session._entries import (
    TURN_FAILED,
    AssistantMessage,
    BranchSummary,
    CompactionBoundary,
    CompactionDiscarded,
    Custom,
    Label,
    LogEntry,
    OutboxRecord,
    PlanState,
    PreparedCompaction,
    StateChange,
    ToolCall,
    ToolOutputPruned,
    ToolResult,
    TurnRecord,
    UnknownEntry,
    UserMessage,
)

_JSON: Final = msgspec.json.Encoder(order="sorted")


@dataclass(frozen=True, slots=True)
class EntryDescription:
    """A log entry in words: a title on one line, and its text."""

    title: str
    """What the entry is: its type and the facts that tell it from its neighbours (`tool result Read (error)`)."""
    detail: str = ""
    """Its text, whole and possibly many lines: a message, an output, a summary, arguments as JSON ("" for none)."""


def describe_entry(entry: LogEntry) -> EntryDescription:
    """`entry` in words: what `lamina sessions show` prints and the inspector's timeline shows.

    Args:
        entry: Any entry of a log, an entry of an unknown (newer) type included.

    Returns:
        Its title and text, raw (the caller escapes them for where it shows them).
    """
    match entry:
        case UserMessage(text=text):
            return EntryDescription("user", text)
        case AssistantMessage(text=text, model=model):
            return EntryDescription(f"assistant · {model}" if model else "assistant", text)
        case ToolCall(name=name, input=args):
            return EntryDescription(f"tool call {name}", _json(args))
        case ToolResult():
            return _tool_result(entry)
        case CompactionBoundary() | PreparedCompaction() | CompactionDiscarded():
            return _compaction(entry)
        case TurnRecord():
            return _turn_record(entry)
        case ToolOutputPruned():
            return _prune(entry)
        case BranchSummary(summary=summary, from_id=from_id):
            return EntryDescription(f"branch summary (from {from_id})", summary)
        case StateChange(key=key, value=value, detail=detail):
            return EntryDescription(f"state {key} = {value}", detail)
        case OutboxRecord():
            return _outbox(entry)
        case PlanState(plan_id=plan_id, state=state, plan_path=path, detail=detail):
            return EntryDescription(f"plan {plan_id}: {state}", f"{path}\n{detail}".strip())
        case Label(target_id=target, label=label):
            return EntryDescription(f"label on {target}", label or "(cleared)")
        case Custom():
            return _custom(entry)
        case UnknownEntry(type=kind):
            return EntryDescription(f"unknown entry type {kind} (kept, skipped)")
        case _:
            assert_never(entry)


def _compaction(entry: CompactionBoundary | PreparedCompaction | CompactionDiscarded) -> EntryDescription:
    match entry:
        case CompactionBoundary(summary=summary, trigger=trigger, prepared_id=prepared):
            applied = f", applies {prepared}" if isinstance(prepared, str) else ""
            return EntryDescription(f"compaction ({trigger}{applied})", summary)
        case PreparedCompaction(boundary=prepared, trigger=trigger):
            return EntryDescription(f"compaction prepared in the background ({trigger}), not applied", prepared.summary)
        case CompactionDiscarded(prepared_id=prepared, reason=reason):
            return EntryDescription(f"prepared compaction {prepared} discarded", reason)


def _custom(entry: Custom) -> EntryDescription:
    match entry:
        case Custom(name=name, data={"error": str(error), **rest}) if name == TURN_FAILED:
            return EntryDescription(f"turn failed ({rest.get('kind', 'error')})", error)
        case _:
            return EntryDescription(f"custom {entry.name}", _json(entry.data))


def _tool_result(entry: ToolResult) -> EntryDescription:
    note = f"\n(full output: {entry.full_output_path})" if entry.full_output_path else ""
    return EntryDescription(f"tool result {entry.name}{' (error)' if entry.is_error else ''}", entry.content + note)


def _turn_record(entry: TurnRecord) -> EntryDescription:
    chosen = f", breakpoint TTL {entry.turn_ttl}" if isinstance(entry.turn_ttl, str) else ""
    return EntryDescription(f"turn record {entry.turn_id} (stable v{entry.stable_version}{chosen})")


def _prune(entry: ToolOutputPruned) -> EntryDescription:
    count = len(entry.call_ids)
    freed = f", ~{entry.tokens:,} tokens freed" if entry.tokens else ""
    by = " (cleared by the server)" if entry.server is not None else ""
    return EntryDescription(f"prune{by}: {count:,} result{'' if count == 1 else 's'}{freed}", "\n".join(entry.call_ids))


def _outbox(entry: OutboxRecord) -> EntryDescription:
    where = f" in {entry.turn_id}" if entry.status == "delivered" and entry.turn_id else ""
    return EntryDescription(f"one-shot {entry.kind or 'part'} {entry.status}{where}", entry.text)


def _json(value: object) -> str:
    try:
        return _JSON.encode(value).decode()
    except (TypeError, msgspec.EncodeError):
        return repr(value)
