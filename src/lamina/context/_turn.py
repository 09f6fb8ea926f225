"""Turn context: the frozen, fully built set of parts for one turn (pure).

`lamina.engine.assemble_turn` is the one place a `TurnContext` is built, so what is logged and what
every renderer sends cannot differ (invariant 1). Stable, volatile and one-shot parts, and how
each keeps its invariant, are in `docs/parts.md`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec

from lamina.context._messages import (
    AttachmentBlocks,
    Message,
    attachment_note,
    message_parts,
    prelude_messages,
    split_turns,
    tail_parts,
    to_messages,
)
from lamina.context._parts import Part, Stability, Tier
from lamina.defang import Authority, SafeText, escape_path, join, neutralise, trusted
from lamina.errors import UsageError
from lamina.session import CostDecision, LogEntry, PartRecord, ServerCompaction, TurnRecord

__all__ = [
    "SYSTEM_AUTHORITIES",
    "OneShot",
    "StableChange",
    "StableContext",
    "ToolSpec",
    "TurnContext",
    "VolatileInputs",
    "build_volatile_parts",
    "changed_volatile",
    "pin_stable",
    "stable_update_text",
    "tool_part",
]

_ENCODER: Final = msgspec.json.Encoder()  # key order as given: the order the request carries


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the model may call: name, short description and JSON schema of its input.

    A source's tool (MCP, API) is checked before it gets here (`lamina.sources._tool.checked_definition`):
    name in the providers' pattern, description and schema texts neutralised, schema bounded.
    """

    name: str
    description: SafeText
    input_schema: Mapping[str, Any]
    deferred: bool = False
    """Sent with `defer_loading` (found through the provider's tool search), not loaded up front."""


@dataclass(frozen=True, slots=True)
class StableChange:
    """What changed between two versions of the stable context."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]

    def describe(self) -> str:
        """One line for a person: `added a, b; removed c; changed d`, or `no change`."""
        words = [f"{label} {', '.join(keys)}" for label, keys in self._groups() if keys]
        return "; ".join(words) or "no change"

    def _groups(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        return (("added", self.added), ("removed", self.removed), ("changed", self.changed))


SYSTEM_AUTHORITIES = frozenset({Authority.SYSTEM_RULE, Authority.USER_DATA})
"""The authorities whose text may go in system-role content: Lamina's rules and the user's own preferences."""


@dataclass(frozen=True, slots=True)
class StableContext:
    """The pinned stable parts of a session: hashed and versioned."""

    parts: tuple[Part, ...]
    version: int
    digest: str

    @property
    def system_parts(self) -> tuple[Part, ...]:
        """The parts with system authority (rules, the user's preferences), in order: they go in system-role content."""
        return tuple(p for p in self.parts if p.authority in SYSTEM_AUTHORITIES and p.text)

    @property
    def context_parts(self) -> tuple[Part, ...]:
        """Every other part (project files, memory, the catalogues), in order.

        User-role content, still in the cached stable prefix (the first user message of every request).
        """
        return tuple(p for p in self.parts if p.authority not in SYSTEM_AUTHORITIES and p.text)

    @staticmethod
    def digest_of(parts: Sequence[Part]) -> str:
        """The SHA-256 over the parts' keys and digests, in order: equal parts give an equal digest."""
        h = hashlib.sha256()
        for part in parts:
            h.update(part.key.encode())
            h.update(b"\0")
            h.update(part.digest.encode())
            h.update(b"\n")
        return h.hexdigest()


def pin_stable(current: StableContext | None, parts: Sequence[Part]) -> tuple[StableContext, StableChange | None]:
    """Keep `current` when `parts` have the same bytes; otherwise the next version and what changed.

    Raises:
        UsageError: A part is not stable.
    """
    for part in parts:
        if part.stability is not Stability.STABLE:
            raise UsageError(f"stable context part {part.key!r} has stability {part.stability.value!r}")
    digest = StableContext.digest_of(parts)
    if current is not None and current.digest == digest:
        return current, None
    old = {p.key: p.digest for p in current.parts} if current else {}
    new = {p.key: p.digest for p in parts}
    change = StableChange(
        added=tuple(k for k in new if k not in old),
        removed=tuple(k for k in old if k not in new),
        changed=tuple(k for k in new if k in old and old[k] != new[k]),
    )
    version = current.version + 1 if current else 1
    return StableContext(tuple(parts), version, digest), change


def stable_update_text(before: StableContext, after: StableContext) -> str:
    """A one-shot telling the model what changed from `before` to `after`, for a prefix that keeps `before`.

    Every added or changed part is stated in full (it replaces the earlier copy); a removed part is
    named. The part texts are already what the prefix would have carried (defanged where untrusted).
    """
    old = {p.key: p for p in before.parts}
    new = {p.key: p for p in after.parts}
    lines = [
        "Stable context changed during this conversation. Each part below replaces its earlier copy from "
        "the start of the conversation (or from an earlier update); follow the newest copy."
    ]
    for key, part in new.items():
        if key not in old:
            lines.append(f"\n[{key}: new, from {part.provenance}]\n{part.text}")
        elif old[key].digest != part.digest:
            lines.append(f"\n[{key}: changed, from {part.provenance}]\n{part.text}")
    removed = [key for key in old if key not in new]
    if removed:
        lines.append("\nNo longer part of the context (ignore the earlier copies): " + ", ".join(removed) + ".")
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class VolatileInputs:
    """Everything the volatile parts are built from; the clock's reading is passed in."""

    now: datetime
    """An aware datetime (any zone); shown in `time_zone`."""
    time_zone: str = "UTC"
    """The user's IANA time zone, from preferences; never the server's."""
    permission_mode: str = "ask"
    plans_dir: str = ""
    data_dir: str = ""
    active_sources: tuple[str, ...] = ()


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"unknown time zone {name!r} in preferences (use an IANA name like 'Europe/Paris')") from None


def build_volatile_parts(inputs: VolatileInputs) -> tuple[Part, ...]:
    """Date and time, session state and source state for this turn. No side effects."""
    if inputs.now.tzinfo is None:
        raise UsageError("VolatileInputs.now must be timezone-aware")
    local = inputs.now.astimezone(_zone(inputs.time_zone))
    offset = local.strftime("%z")
    date_time = f"{local:%A %Y-%m-%d %H:%M} ({inputs.time_zone}, UTC{offset[:3]}:{offset[3:]})"
    # system authority: names and paths are escaped, so no text from outside Lamina can act in them
    state_lines = [f"permission mode: {escape_path(inputs.permission_mode)}"]
    if inputs.plans_dir:
        state_lines.append(f"plans folder: {escape_path(inputs.plans_dir, allow=':')}")
    if inputs.data_dir:
        state_lines.append(f"data folder: {escape_path(inputs.data_dir, allow=':')}")
    sources = ", ".join(map(escape_path, inputs.active_sources)) if inputs.active_sources else "none"

    def part(key: str, text: str, provenance: str) -> Part:
        # Lamina's sentences around the clock's reading, a checked zone name and escaped names and paths
        return Part(key, trusted(text), provenance, Authority.SYSTEM_RULE, Stability.VOLATILE, Tier.SESSION_STATE)

    return (
        part("date_time", date_time, "clock"),
        part("session_state", "\n".join(state_lines), "session"),
        part("sources", f"active sources: {sources}", "sources"),
    )


@dataclass(frozen=True, slots=True)
class OneShot:
    """A one-shot part from the outbox: delivered exactly once, then never again."""

    part_id: str
    kind: str
    text: str
    hidden: bool = False
    """A hidden one-shot bridge (recovery, branch seed, transfer summary): a UI leaves it out of the transcript."""

    def as_part(self) -> Part:
        """The one-shot as its turn's tail shows it: a system rule, neutralised, its outbox id as provenance."""
        return Part(
            self.kind,
            neutralise(self.text),  # Lamina's sentence with names in it: shown as the tail shows it
            f"outbox:{self.part_id}",
            Authority.SYSTEM_RULE,
            Stability.ONE_SHOT,
            Tier.ONE_SHOT,
        )


@dataclass(frozen=True, slots=True)
class TurnContext:
    """One turn, fully built and frozen: logged as a `TurnRecord`, rendered as-is."""

    id: str
    session_id: str
    user_entry_id: str
    user_text: str
    stable: StableContext
    volatile: tuple[Part, ...]
    """The volatile parts this turn's tail carries: those whose text the model has not seen yet."""
    one_shots: tuple[OneShot, ...]
    history: Sequence[LogEntry]
    """Provider-view log entries up to and including this turn's user message and record."""
    summary: SafeText | None
    """The latest compaction summary, neutralised, put before the history."""
    pinned: SafeText | None
    """The pinned lane after a compaction (the user's constraints, verbatim), put after the summary."""
    tools: tuple[ToolSpec, ...]
    stable_seen: bool = False
    """Whether this stable version was already sent in the current context window (for backends
    that keep the transcript themselves and are given the stable parts in a user message)."""
    turn_ttl: Literal["5m", "1h"] | None = None
    """The TTL the cost model chose for this turn's cache breakpoint (None: the target's own)."""
    cost: CostDecision | None = None
    """That choice's expected figures (logged in the record)."""
    server: ServerCompaction | None = None
    """The provider's own compaction block: a request to that provider sends it first, in place of `summary`."""
    server_prelude: SafeText | None = None
    """What follows that block in place of the summary (the ledger, which Lamina's own summary carries)."""

    def record(self) -> TurnRecord:
        """The log entry for this turn (id and parent are stamped by the session)."""
        return TurnRecord(
            turn_id=self.id,
            user_entry_id=self.user_entry_id,
            stable_digest=self.stable.digest,
            stable_version=self.stable.version,
            volatile=tuple(PartRecord(key=p.key, text=p.text) for p in self.volatile),
            one_shots=tuple(
                PartRecord(key=o.kind, text=o.text, part_id=o.part_id, hidden=o.hidden) for o in self.one_shots
            ),
            turn_ttl=self.turn_ttl if self.turn_ttl is not None else msgspec.UNSET,
            decision=self.cost if self.cost is not None else msgspec.UNSET,
        )

    def tail_parts(self) -> tuple[Part, ...]:
        """This turn's tail as it is sent: each volatile part, then each one-shot part, in its block."""
        record = self.record()
        placed = tail_parts(record.volatile, record.one_shots)
        built = [*self.volatile, *(o.as_part() for o in self.one_shots)]
        return tuple(replace(p, provenance=b.provenance) for p, b in zip(placed, built, strict=True))

    @property
    def tail(self) -> SafeText:
        """The text appended to this turn's user message: `tail_parts`, one a line."""
        return join("\n", [p.text for p in self.tail_parts()])

    def segments(self, continuation: Sequence[LogEntry] = ()) -> tuple[Sequence[LogEntry], list[LogEntry]]:
        """The entries of completed turns before this one, and this turn's (its user message and tool loop)."""
        history = self.history
        current = len(history) - 1 if history and history[-1].id == self.user_entry_id else len(history)
        return history[:current], [*history[current:], *continuation]

    def messages(
        self, continuation: Sequence[LogEntry] = (), attachments: AttachmentBlocks = attachment_note
    ) -> list[Message]:
        """The conversation a request carries: summary, completed turns, this turn's message and tool loop so far.

        Each turn is converted on its own (no message merges across turns), which is what lets a
        render cache reuse completed turns; providers accept consecutive user messages.
        """
        past, now = self.segments(continuation)
        messages = prelude_messages(self.summary, self.pinned)
        for segment in split_turns(past):
            messages += to_messages(segment, attachments=attachments)
        messages += to_messages(now, current_tail=(self.user_entry_id, self.tail_parts()), attachments=attachments)
        return messages

    def parts(
        self, continuation: Sequence[LogEntry] = (), attachments: AttachmentBlocks = attachment_note
    ) -> tuple[Part, ...]:
        """Every part of the request this turn sends, in request order (SPEC F1).

        The tool definitions, the stable parts, then the parts of every block of the conversation
        (`messages`): the compaction summary and the user's words, the history (each earlier
        turn's attachments, message, tail, replies, tool calls and results) and this turn's
        attachments, message, tail (volatile, then one-shot parts) and tool loop so far
        (`continuation`). How the conversation is classified: `docs/parts.md`.

        Args:
            continuation: This turn's tool loop so far.
            attachments: Shows attached files as the renderer does (the same one gives the same parts).

        Returns:
            The parts, in request order.
        """
        return (
            *(tool_part(t) for t in self.tools),
            *self.stable.parts,
            *message_parts(self.messages(continuation, attachments)),
        )


def tool_part(tool: ToolSpec) -> Part:
    """A tool definition as a stable part: its name, description and input schema as the request carries them.

    Lamina's own tools are its rules; a source's tool (`<slug>__<tool>`) is external text, checked
    and neutralised when it was loaded (`lamina.sources`), so its definition is shown as it is.
    """
    definition = {"name": tool.name, "description": tool.description, "input_schema": dict(tool.input_schema)}
    text = trusted(_ENCODER.encode(definition).decode())  # every field checked or Lamina's own (see ToolSpec)
    slug, sep, _ = tool.name.partition("__")
    if sep:
        return Part(
            f"tool.{tool.name}", text, f"source:{slug}", Authority.TOOL_OUTPUT, Stability.STABLE, Tier.CATALOGUE
        )
    return Part(f"tool.{tool.name}", text, "lamina", Authority.SYSTEM_RULE, Stability.STABLE, Tier.CATALOGUE)


def changed_volatile(parts: Sequence[Part], last_seen: Mapping[str, str]) -> tuple[Part, ...]:
    """The parts whose text differs from what the model last saw under the same key."""
    return tuple(p for p in parts if last_seen.get(p.key) != p.text)
