"""Session log entries: a versioned, tagged union with one codec (pure).

Every line of a session log is one entry encoded as a JSON object. Each entry carries `id`,
`parent_id` (so a session is a tree), `ts` (seconds since the epoch, UTC), the format version `v`
and its `type` tag. An entry whose `type` this version does not know (written by a newer Lamina)
decodes to `UnknownEntry`: it keeps its raw bytes, stays in the tree and is skipped by the
provider view, so reading a newer log never crashes and forking it never drops data. So does an
entry of a known type written in a newer format version (`v` above `ENTRY_FORMAT_VERSION`).
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, Final, Literal, TypeAlias

import msgspec

from lamina.errors import EntryDecodeError
from lamina.session._attachment_ref import AttachmentRef
from lamina.session._cache_check import CacheCheck
from lamina.session._reasoning_record import Reasoning as Reasoning
from lamina.session._server_block import ServerCompaction
from lamina.session._server_edits import AppliedEdit, ServerClearing

#: The entry format version this code writes.
ENTRY_FORMAT_VERSION: Final = 1


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """Token usage a provider reported for one model call."""

    input: int = 0
    """Uncached input tokens."""
    output: int = 0
    """Output tokens, reasoning included (what is billed as output)."""
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    """Of `output`, the tokens the model spent reasoning (thinking), as the provider reports them."""


class Ledger(msgspec.Struct, frozen=True, kw_only=True):
    """Facts that travel from one compaction to the next, kept verbatim."""

    files_read: tuple[str, ...] = ()
    files_modified: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    """Written by Lamina versions before the user's words lane (sentences picked by keywords);
    read only to show an older session's rules, never filled any more."""
    open_tasks: tuple[str, ...] = ()


class UserWords(msgspec.Struct, frozen=True, kw_only=True):
    """One message the user typed, as the user's words lane keeps it."""

    turn: int
    """The message's turn number in the session (1 for the first user message)."""
    ts: float = 0.0
    """When it was sent (seconds since the epoch, UTC)."""
    text: str
    """The text, verbatim; a very long one is its head and its tail (see `omitted`)."""
    omitted: int = 0
    """Characters left out of the middle of `text` (0: the message is whole)."""
    archive: str = ""
    """The file, relative to the session's data folder, that holds the whole message ("": not saved)."""


class UserLane(msgspec.Struct, frozen=True, kw_only=True):
    """The user's words lane: the user's own messages from every summarised part of the session."""

    messages: tuple[UserWords, ...] = ()
    """The newest messages that fit the lane's budget, oldest first."""
    last_turn: int = 0
    """The turn number of the newest user message summarised so far (numbering goes on from it)."""
    left_out: int = 0
    """How many older messages are not in `messages` (over the budget); they are in the archive."""
    left_out_until: int = 0
    """The turn number of the newest message left out (0: none)."""
    archive_failed: str = ""
    """Why an archive file could not be written, when one could not (the log still holds every message)."""


_Id: TypeAlias = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
"""An entry id as read from a log (checked on decode only: an unstamped entry has the empty id)."""


class _EntryBase(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", gc=False):
    # gc=False: decoded entries cannot form reference cycles, and untracked objects keep the
    # collector from rescanning a million-entry log over and over during a full load.
    # `id`, `parent_id` and `ts` are stamped by the session when the entry is appended.
    id: _Id = ""
    parent_id: _Id | None = None
    ts: float = 0.0
    v: Annotated[int, msgspec.Meta(le=ENTRY_FORMAT_VERSION)] = ENTRY_FORMAT_VERSION
    """Format version; a newer one decodes as `UnknownEntry` (kept byte for byte, not half-understood)."""


class UserMessage(_EntryBase, frozen=True, kw_only=True, tag="user"):
    """A user-role message: what the user typed, or a message Lamina wrote for the user (attachments are references).

    Lamina writes some user-role messages itself: a plan's execution message and its continuation
    after a reload, a rejection sending a plan back with the user's feedback. Those carry
    `user_words`, the part of `text` the user typed ("" for none), so the user's words lane never
    shows Lamina's text as the user's. Older logs have no such field: all of their text is the user's.
    """

    text: str
    attachments: tuple[AttachmentRef, ...] = ()
    user_words: str | msgspec.UnsetType = msgspec.UNSET
    """For a message Lamina wrote: what of it the user typed ("" for nothing). Unset (not even written
    to the log, so older lines stay byte for byte what this version writes): the user typed all of `text`."""

    @property
    def typed(self) -> str:
        """The text the user typed in this message ("" when Lamina wrote all of it)."""
        return self.text if isinstance(self.user_words, msgspec.UnsetType) else self.user_words

    @property
    def by_lamina(self) -> bool:
        """Whether Lamina wrote this message (a plan's execution message, its continuation, a rejection)."""
        return not isinstance(self.user_words, msgspec.UnsetType)


class AssistantMessage(_EntryBase, frozen=True, kw_only=True, tag="assistant"):
    """The text of one model response; its tool calls follow as `ToolCall` entries.

    Its reasoning (`reasoning`) came before the text and the calls, in the order the model produced it.
    """

    text: str
    model: str = ""
    usage: Usage | None = None
    stop_reason: str | None = None
    turn_id: str | None = None
    reasoning: tuple[Reasoning, ...] = ()
    context_edits: tuple[AppliedEdit, ...] = ()  # what the provider's context editing cleared before it read
    cache_check: CacheCheck | None = None  # why the request missed the prompt cache


class ToolCall(_EntryBase, frozen=True, kw_only=True, tag="tool_call"):
    """One tool call requested by the model (parallel calls are consecutive entries)."""

    call_id: str
    name: str
    input: dict[str, Any]


class ReadStamp(msgspec.Struct, frozen=True, kw_only=True):
    """What a Read result showed: the file, its hash and the window, so a later Read can tell it is still current.

    Logged on the result, so "still in the request" is decided from the provider view after a
    restart too (see docs/tools.md, "Read").
    """

    path: str
    """The file, absolute and resolved."""
    sha256: str
    """The hex SHA-256 of the file's bytes when it was read."""
    offset: int = 1
    limit: int | None = None
    """The window, as the call asked for it (None: as many lines as one Read returns)."""
    unchanged_from: str | None = None
    """This result is a pointer to the earlier result of call `unchanged_from` (byte-identical there)."""
    changes_from: str | None = None
    """This result lists only the changes since the earlier result of call `changes_from`."""


class ToolResult(_EntryBase, frozen=True, kw_only=True, tag="tool_result"):
    """The result returned to the model for the tool call `call_id`."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    full_output_path: str | None = None
    """Where the full output was written when the model received only a preview."""
    attachments: tuple[AttachmentRef, ...] = ()
    """Images the tool returned (an MCP server's image content), stored like a user's attachments: references,
    never inline bytes; shown with the result as the model in use takes them."""
    read: ReadStamp | None = None
    """For a Read of a text file: what it showed (file, hash, window)."""


class CostDecision(msgspec.Struct, frozen=True, kw_only=True):
    """A context decision and the expected bills that made it (`lamina.pricing`'s cost model).

    Bills are in base-price input tokens over the likely rest of the session; logged on the entry
    the decision made (a prune, a compaction boundary, a turn record for its breakpoint's TTL).
    """

    action: str
    """What was chosen: `prune`, `keep`, `compact`, `wait`, `ttl_5m` or `ttl_1h`."""
    expected: float
    """The expected bill of the action taken."""
    expected_nothing: float
    """The expected bill of doing nothing (for a TTL: of the other TTL)."""
    horizon: int = 0
    """The model calls the estimate looks ahead."""
    cache: str = ""
    """The cache's state when it was decided: `warm`, `partly warm` or `cold`."""
    reread_chance: float = 0.0
    """The chance, learnt in the session, that a pruned result is needed again."""
    reason: str | msgspec.UnsetType = msgspec.UNSET
    """Why, in words, where the figures did not decide alone: a setting, a model without the option, a fallback."""


class ToolOutputPruned(_EntryBase, frozen=True, kw_only=True, tag="prune"):
    """From here on, the provider view shows these calls' results as a one-line note (the log keeps them).

    Compaction's cheap first layer (`lamina.compaction.choose_prune`); the note is made from the
    call, so every later request renders the same bytes.
    """

    call_ids: tuple[str, ...]
    tokens: int = 0
    """Tokens the prune freed, estimated when it was chosen."""
    decision: CostDecision | msgspec.UnsetType = msgspec.UNSET
    """Why it was made: its expected bill against keeping everything (absent in older logs)."""
    server: ServerClearing | None = None  # made by the provider's context editing (None: Lamina's note)


class PartRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A part as it was sent in a turn's tail: enough to render the same bytes again."""

    key: str
    text: str
    part_id: str | None = None
    """The outbox id, for one-shot parts."""
    hidden: bool = False
    """A hidden one-shot bridge (see `OutboxRecord.hidden`)."""


PlanStateName: TypeAlias = Literal[
    "submitted", "accepted", "awaiting_compaction", "compacted", "dispatched", "done", "failed", "rejected", "cancelled"
]
"""The states of a plan's approval (see `lamina.engine` for the transitions between them)."""


class PlanSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """A plan and where its approval stands: folded from its `PlanState` entries, carried by compactions."""

    plan_id: str
    state: PlanStateName
    title: str = ""
    plan_path: str = ""
    """The plan file, as SubmitPlan resolved it (usually in the session's plans folder)."""
    text: str = ""
    """The plan's text as submitted (the log keeps it, whatever later happens to the file)."""
    compact: bool = False
    """Accepted with "Accept & Compact": the context is compacted before the plan is dispatched."""
    draft_input: str | None = None
    """The user's unsent input when the plan was accepted, restored on reload."""
    detail: str = ""
    """The latest transition's words: why it failed, the user's feedback, what replaced it."""
    compaction_id: str | None = None
    """The boundary of the plan's compaction, once it completed."""
    dispatched: bool = False
    """Whether the plan was ever dispatched (after that it is never dispatched again)."""
    message_id: str | None = None
    """The execution message (the first user message after the dispatch), once logged."""
    answered: bool = False
    """Whether the model answered the execution message (its turn started)."""
    run_mode: str | None = None
    """The permission mode the user chose, when accepting, for carrying the plan out (None: an older log: execute)."""
    return_mode: str | None = None
    """The mode the session goes back to once the plan is over (None: an older log: it stays)."""


class ProviderSession(msgspec.Struct, frozen=True, kw_only=True):
    """Where a session's conversation lives on a provider that keeps one (the Claude Agent SDK): resume through it."""

    provider: str
    """The provider's name (`claude-agent`)."""
    session_id: str
    """The provider's own session id."""
    resume_at: str | None = None
    """The provider's id of the last message of the last completed turn (None: the transcript's end)."""
    fork: bool = False
    """The next turn forks `session_id` into a new provider session instead of continuing it."""


class StateSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """Session state at a compaction, so a resume that reads only from the boundary knows it."""

    mode: str | None = None
    sources: tuple[str, ...] = ()
    stable: str | None = None
    """`version:digest` of the pinned stable context."""
    pending_one_shots: tuple[PartRecord, ...] = ()
    """One-shot parts still queued (their `key` is the kind)."""
    skills: tuple[str, ...] = ()
    """Skills invoked in the session: after a compaction the model must read them again."""
    plan: PlanSnapshot | None = None
    """The session's latest plan and where its approval stands (None: no plan yet, or an older log)."""
    provider_sessions: tuple[ProviderSession, ...] = ()
    """Provider-side sessions to resume through, one per provider."""
    model: str | None = None
    """The model spec the session last recorded (None: none, or an older log)."""
    preset: str | None = None
    """The system prompt preset the session last recorded (None: none, or an older log)."""
    preset_file: str = ""
    """The custom preset's file recorded with `preset` ("": none)."""
    reasoning: str | None = None
    """The reasoning settings the session last recorded, as their `reasoning` state change gives them
    (None: none, or an older log)."""


class CompactionBoundary(_EntryBase, frozen=True, kw_only=True, tag="compaction"):
    """A compaction: the provider view restarts here with `summary` plus the kept entries."""

    summary: str
    first_kept_id: str | None
    """The oldest entry kept verbatim; `None` when nothing before the boundary is kept."""
    tokens_before: int
    tokens_after: int
    trigger: Literal["manual", "threshold", "overflow"]
    focus: str | None = None
    ledger: Ledger = Ledger()
    state: StateSnapshot = StateSnapshot()
    lane: UserLane = UserLane()
    """The user's own messages from the summarised part (and from earlier compactions), verbatim."""
    plan_id: str | None = None
    """The plan this compaction was made for (Accept & Compact), if any."""
    decision: CostDecision | msgspec.UnsetType = msgspec.UNSET
    """When it was priced: its expected bill against waiting (absent in older logs and unpriced compactions)."""
    server: ServerCompaction | msgspec.UnsetType = msgspec.UNSET  # a provider's block, sent first in place of `summary`
    backend: CostDecision | msgspec.UnsetType = msgspec.UNSET
    """Who wrote the summary and why (`server_compaction` or `lamina_compaction`; absent: Lamina's, unchosen)."""
    prepared_id: str | msgspec.UnsetType = msgspec.UNSET  # the `PreparedCompaction` it applies (absent: inline)


class PreparedCompaction(_EntryBase, frozen=True, kw_only=True, tag="compaction_prepared"):
    """A compaction made in the background, not applied: only a `CompactionBoundary` naming it applies it."""

    boundary: CompactionBoundary  # what applying it records, with the state of that moment
    trigger: Literal["threshold", "idle"]
    covers: str  # a digest of the entries the summary covers and of the boundary the view started from


class CompactionDiscarded(_EntryBase, frozen=True, kw_only=True, tag="compaction_discarded"):
    """A prepared compaction that will never be applied, and why."""

    prepared_id: str
    reason: str


class BranchSummary(_EntryBase, frozen=True, kw_only=True, tag="branch_summary"):
    """A summary of the path abandoned when the session branched away from `from_id`."""

    summary: str
    from_id: str


class PinnedPart(msgspec.Struct, frozen=True, kw_only=True):
    """A stable part as the cached prefix renders it: enough to render the same bytes after a resume."""

    key: str
    text: str
    provenance: str
    authority: str
    tier: int


class PinnedTool(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A tool definition as a request sends it: enough to send the same bytes again from the log."""

    name: str
    description: str
    input_schema: str
    """The input schema as JSON text, its keys in the order the request sends them."""
    deferred: bool = False  # sent with `defer_loading`: the model finds it through the provider's tool search


class StateChange(_EntryBase, frozen=True, kw_only=True, tag="state_change"):
    """A change of session state.

    The permission mode, model, system prompt preset, reasoning settings, active sources, a stable input,
    skills in use, a provider-side session, the tool definitions the requests send; `foreign_reasoning`:
    another provider's (`value`) reasoning is left out from here on (`detail`: how much). An empty `value`
    for `mode`, `model`, `preset` or `reasoning` clears it: an imported bundle's settings are not the session's.
    """

    key: (
        Literal["mode", "model", "preset", "reasoning", "sources", "stable", "skills", "provider_session", "tools"]
        | Literal["foreign_reasoning"]
    )
    value: str
    previous: str | None = None
    detail: str = ""
    """What changed, in words (for a stable input: which file or setting; for `preset`: the custom preset's file)."""
    prefix: tuple[PinnedPart, ...] = ()
    """For `stable`: the parts the cached prefix renders from this change on (empty in older logs).

    The new version's parts, or, when the change is delivered once in the tail instead, the parts
    the prefix keeps until the next compaction."""
    prefix_version: int | None = None
    """For `stable`: the version of `prefix` (older than `value`'s while a change waits for a compaction)."""
    provider: str = ""
    """For `provider_session`: the provider whose session this is; `value` is its session id ("": cleared)."""
    session: ProviderSession | None = None
    """For `provider_session`: the session to resume through from now on (None: cleared, start a fresh one)."""
    compacted: bool = False
    """For `provider_session`: the provider compacted its own context (what it saw before is summarised)."""
    tools: tuple[PinnedTool, ...] = ()
    """For `tools`: the definitions the requests send from this change on (`value` is `version:digest`)."""
    tools_rewritten: bool | msgspec.UnsetType = msgspec.UNSET
    """For `tools`: the change rewrites the `tools` array even for a model that takes tool changes (priced so)."""


class OutboxRecord(_EntryBase, frozen=True, kw_only=True, tag="outbox"):
    """A one-shot part queued for the model, or the record that it was delivered."""

    part_id: str
    status: Literal["queued", "delivered"]
    kind: str = ""
    text: str = ""
    turn_id: str | None = None
    hidden: bool = False
    """A one-shot bridge (recovery block, branch seed, transfer summary): the model needs it once, the
    user never typed or read it, so a UI hides it from the transcript (`lamina sessions show --all` shows it)."""


class PlanState(_EntryBase, frozen=True, kw_only=True, tag="plan_state"):
    """One transition of a plan's approval state machine, fsynced before the transition has effect.

    The first entry of a plan (`submitted`) carries its title, path and text; later ones carry what
    their transition adds (the draft, the compact choice and the modes on `accepted`, the boundary
    on `compacted`, the reason on `failed`, the feedback on `rejected`).
    """

    plan_id: str
    state: PlanStateName
    plan_path: str = ""
    title: str = ""
    text: str = ""
    compact: bool = False
    draft_input: str | None = None
    detail: str = ""
    compaction_id: str | None = None
    run_mode: str | None = None
    """With `accepted`: the mode the plan runs in, as the user chose it."""
    return_mode: str | None = None
    """With `accepted`: the mode to go back to when the plan is over (the one before the plan)."""


class TurnRecord(_EntryBase, frozen=True, kw_only=True, tag="turn"):
    """The turn context of one turn, recorded as built: what is logged is what is sent.

    Appended right after the turn's user message. Its tail (volatile then one-shot parts) is
    rendered again, byte for byte, whenever that user message is part of a later request.
    """

    turn_id: str
    user_entry_id: str
    stable_digest: str
    stable_version: int
    volatile: tuple[PartRecord, ...] = ()
    one_shots: tuple[PartRecord, ...] = ()
    turn_ttl: Literal["5m", "1h"] | msgspec.UnsetType = msgspec.UNSET
    """The TTL the cost model chose for the turn's cache breakpoint (absent: the target's own)."""
    decision: CostDecision | msgspec.UnsetType = msgspec.UNSET
    """Why that TTL: its expected bill against the other one."""


class Label(_EntryBase, frozen=True, kw_only=True, tag="label"):
    """A user label on another entry (`None` clears it)."""

    target_id: str
    label: str | None


TURN_FAILED: Final = "lamina.turn_failed"
"""The `Custom` entry the agent appends when a turn fails with an error: `data` is `{"error": words, "kind": type}`.

No request carries it; the inspector reads it (a session's status: failed, with its error).
"""


class Custom(_EntryBase, frozen=True, kw_only=True, tag="custom"):
    """An application-defined entry; Lamina stores it and never interprets it (except its own, `TURN_FAILED`)."""

    name: str
    data: Any = None


class UnknownEntry(msgspec.Struct, frozen=True, kw_only=True):
    """An entry of a type this version does not know; kept byte for byte, skipped by views."""

    id: str
    parent_id: str | None
    ts: float
    type: str
    raw: bytes


Entry: TypeAlias = (
    UserMessage
    | AssistantMessage
    | ToolCall
    | ToolResult
    | ToolOutputPruned
    | CompactionBoundary
    | PreparedCompaction
    | CompactionDiscarded
    | BranchSummary
    | StateChange
    | OutboxRecord
    | PlanState
    | TurnRecord
    | Label
    | Custom
)
"""Every entry type this version writes."""

LogEntry: TypeAlias = Entry | UnknownEntry
"""Anything a log line can decode to."""

#: One-shot kinds rebuilt for the model after a break (resume, branch, transfer): hidden, never in the transcript.
BRIDGE_KINDS: Final = frozenset({"recovery", "branch_seed", "transfer_summary"})


def is_hidden(entry: LogEntry) -> bool:
    """Whether a UI hides `entry` from the user's transcript: an outbox record of a hidden one-shot bridge."""
    return isinstance(entry, OutboxRecord) and entry.hidden


#: Entry types whose append is made durable at once, not at the next turn boundary.
CRITICAL_ENTRY_TYPES: Final = (OutboxRecord, PlanState, CompactionBoundary, PreparedCompaction, CompactionDiscarded)


class _Header(msgspec.Struct, frozen=True):
    id: _Id
    type: str
    parent_id: _Id | None = None
    ts: float = 0.0
    v: int = ENTRY_FORMAT_VERSION


_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(Entry)
_header_decoder: Final = msgspec.json.Decoder(_Header)
_KNOWN_TYPES: Final = frozenset(
    str(info.tag)
    for info in msgspec.inspect.multi_type_info(typing.get_args(Entry))
    if isinstance(info, msgspec.inspect.StructType)
)


def encode_entry(entry: LogEntry) -> bytes:
    """Encode an entry as one JSON line, without the trailing newline."""
    if isinstance(entry, UnknownEntry):
        return entry.raw
    return _encoder.encode(entry)


def decode_entry(line: bytes) -> LogEntry:
    """Decode one log line; raises `EntryDecodeError` saying what is wrong with it."""
    try:
        return _decoder.decode(line)
    except msgspec.DecodeError as exc:
        first_error = exc
    try:
        header = _header_decoder.decode(line)
    except msgspec.DecodeError:
        raise EntryDecodeError(str(first_error)) from None
    if header.type in _KNOWN_TYPES and header.v <= ENTRY_FORMAT_VERSION:
        raise EntryDecodeError(str(first_error))
    return UnknownEntry(id=header.id, parent_id=header.parent_id, ts=header.ts, type=header.type, raw=bytes(line))
