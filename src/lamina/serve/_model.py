"""What the session inspector shows, as typed records: the JSON API's bodies and the pages' data (pure).

One codec: every record is a msgspec struct, encoded as the API's JSON and described by the
OpenAPI schema generated from the same types (`lamina.serve._openapi`). Texts from the log are
carried as they are (bounded where a list could grow large); the pages escape them when they
render them, the API sends them as JSON strings.
"""

from __future__ import annotations

from typing import Literal

import msgspec

LayerName = Literal["stable", "history", "current", "tail", "one_shot"]
"""The layers of a request, in the order they are sent: the stable prefix (tools, system, the project
parts), the history (summary, the user's words lane, earlier turns), this turn's message and tool loop
so far, its tail of volatile parts, and its one-shot parts (delivered once, in the tail)."""

LAYER_NAMES: tuple[LayerName, ...] = ("stable", "history", "current", "tail", "one_shot")


class SessionRow(msgspec.Struct, frozen=True, kw_only=True):
    """One session of the list."""

    id: str
    title: str
    cwd: str
    """The workspace the session ran in."""
    created_at: float
    updated_at: float
    entries: int
    turns: int
    """User messages in the whole log (every branch)."""
    requests: int
    """Model calls in the whole log."""
    input_tokens: int
    """Input tokens the provider reported: uncached, cache reads and cache writes, over every request."""
    output_tokens: int
    cost_usd: float | None
    """Estimated from list prices; None when a model has no known price."""
    problem: str | None = None
    model: str = ""
    """The model of the latest request ("" before the first)."""
    mode: str = ""
    """The permission mode the log recorded last ("" when it recorded none)."""
    status: str = ""
    """Where the session stands: `running` (a turn under way), `waiting for the user` (open in a chat, its
    last turn over), `ended`, `failed` (its last turn logged an error), `interrupted`, or `empty`."""
    status_detail: str = ""
    """What the status says more: a failed turn's error, what a running turn waits for, a plan awaiting a decision."""
    damaged: bool = False
    """The store reported damage or a repair when it read the log."""


class SessionList(msgspec.Struct, frozen=True, kw_only=True):
    sessions: list[SessionRow]
    query: str = ""


class AttachmentOut(msgspec.Struct, frozen=True, kw_only=True):
    sha256: str
    name: str
    media_type: str
    kind: str
    size: int
    width: int = 0
    height: int = 0
    pages: int = 0
    tokens: int = 0
    thumbnail: str | None = None
    """The thumbnail's URL (images of a store that keeps files), else None."""


class UsageOut(msgspec.Struct, frozen=True, kw_only=True):
    input: int
    """Uncached input tokens."""
    output: int
    cache_read: int
    cache_write: int


class PartText(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    text: str
    part_id: str | None = None


class LaneWords(msgspec.Struct, frozen=True, kw_only=True):
    turn: int
    ts: float
    text: str
    omitted: int = 0


class DecisionOut(msgspec.Struct, frozen=True, kw_only=True):
    """A context decision the cost model priced, as logged on its entry (`lamina.session.CostDecision`)."""

    entry_id: str
    """The entry that carries it: a prune, a compaction boundary or a turn record."""
    ts: float
    on: Literal["prune", "compaction", "compaction backend", "turn TTL"]
    """What it was on (as `lamina context --session` names it)."""
    action: str
    """What was chosen: `prune`, `keep`, `compact`, `wait`, `ttl_5m` or `ttl_1h`."""
    expected: float
    """The expected bill of the action taken, in base-price input tokens over the likely rest of the session."""
    expected_nothing: float
    """The expected bill of the alternative (keeping everything; for a TTL the other TTL; waiting or compacting now)."""
    horizon: int
    """The model calls the estimate looked ahead."""
    cache: str
    """The cache's state when it was decided: `warm`, `partly warm` or `cold` ("" when not logged)."""
    reread_chance: float
    """The chance, learnt in the session, that a pruned result is needed again."""
    words: str
    """The decision in words (`lamina.pricing.describe_decision`)."""


class CompactionOut(msgspec.Struct, frozen=True, kw_only=True):
    """A compaction boundary: what it kept, its summary and the user's words lane."""

    id: str
    ts: float
    trigger: str
    focus: str | None
    summary: str
    tokens_before: int
    tokens_after: int
    first_kept_id: str | None
    kept_entries: int
    """Entries before the boundary it kept verbatim (on the path to the boundary)."""
    summarised_entries: int
    """Entries before the boundary only the summary stands for (they stay in the log)."""
    files_read: list[str]
    files_modified: list[str]
    open_tasks: list[str]
    lane: list[LaneWords]
    lane_left_out: int
    decision: DecisionOut | None = None
    """Why it was made now, when the cost model priced it (None: an unpriced compaction, an older log)."""
    backend: DecisionOut | None = None
    """Who wrote its summary (the provider's compaction or Lamina's summariser) and why (None: Lamina's, unchosen)."""


class PlanTransition(msgspec.Struct, frozen=True, kw_only=True):
    entry_id: str
    ts: float
    state: str
    detail: str = ""


class PlanOut(msgspec.Struct, frozen=True, kw_only=True):
    """A plan and every state it went through, oldest first."""

    plan_id: str
    plan_path: str
    state: str
    """The latest state."""
    transitions: list[PlanTransition]


class DiffLine(msgspec.Struct, frozen=True, kw_only=True):
    """One line of a file change: removed (`-`), added (`+`) or unchanged context (` `)."""

    op: Literal["-", "+", " "]
    text: str


class CallOut(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call as a call: its name, what it acts on, its input, and for Edit and Write the change as a diff."""

    name: str
    target: str
    """The path, command or pattern it acts on ("" when its input names none)."""
    arguments: list[PartText]
    """Its input, one argument a row in the order the model gave them (a value that is not text as JSON)."""
    diff: list[DiffLine] = []
    """For Edit and Write: the lines removed and added (Write: every line of the new file added)."""
    diff_cut: int = 0
    """Diff lines left out past the bound."""


class Item(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of the timeline."""

    id: str
    parent_id: str | None
    kind: str
    """The entry's type tag (`user`, `assistant`, `tool_call`, ...)."""
    ts: float
    title: str
    """A short heading: `user`, `assistant · claude-sonnet-5`, `tool call Read`, `compaction (manual)`."""
    text: str
    """The entry's main text, cut to a bound in lists (see `text_chars`)."""
    text_chars: int
    """The length of the whole text."""
    in_view: bool
    """Whether the entry is in the provider view of the shown branch's leaf (after its latest compaction)."""
    hidden_bridge: bool = False
    """A one-shot bridge (recovery, branch seed, transfer summary) the user's transcript hides."""
    turn: int | None = None
    """The user message's turn number on this path."""
    request: int | None = None
    """For an assistant message: the index of its request (model call) in the session."""
    usage: UsageOut | None = None
    is_error: bool = False
    attachments: list[AttachmentOut] = []
    parts: list[PartText] = []
    """For a turn record: its tail's volatile then one-shot parts."""
    call: CallOut | None = None
    """For a tool call: the call, its input and (Edit, Write) its diff."""
    result_id: str | None = None
    """For a tool call: the entry of its result (None while it has none)."""
    asked_in: int | None = None
    """For a tool call: the index of the request whose answer asked for it."""
    call_entry_id: str | None = None
    """For a tool result: the entry of the call it answers."""
    internal: bool = False
    """A record the conversation does not show (turn record, state change, outbox, plan state, label,
    prune): the timeline folds it into one line that opens on click."""
    children: int = 0
    """Entries whose parent this is; more than one: a branch point."""
    decision: DecisionOut | None = None
    """For a prune, a compaction boundary or a turn record: the cost model's decision it logged, if any."""


class BranchOut(msgspec.Struct, frozen=True, kw_only=True):
    """One branch of the session tree: the path to a leaf."""

    leaf_id: str
    label: str
    """The branch's first user message (or its leaf's kind when it has none)."""
    fork_id: str | None
    """The entry the branch started from (None for the first branch)."""
    first_id: str
    """The branch's first own entry (after the fork point)."""
    depth: int
    """Entries on the path from the root to the leaf."""
    own_entries: int
    """Entries after the fork point."""
    updated: float
    current: bool
    """The session's own leaf (where the next append goes)."""
    point_in_view: bool | None
    """Whether the fork point was still in the provider view when the branch started (None: the first branch)."""
    parent_leaf_id: str | None = None
    """The leaf of the branch it forked from."""


class BranchTotals(msgspec.Struct, frozen=True, kw_only=True):
    """The shown branch's counts: its path's entries, user messages, model calls, reported tokens and cost."""

    entries: int
    turns: int
    requests: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None


class SessionDetail(msgspec.Struct, frozen=True, kw_only=True):
    session: SessionRow
    leaf_id: str | None
    """The leaf shown (the session's own leaf unless another branch was asked for)."""
    session_leaf_id: str | None
    path_entries: int
    branches: list[BranchOut]
    compactions: list[CompactionOut]
    """On the shown path, oldest first."""
    plans: list[PlanOut]
    problems: list[str]
    """What the store reported when it read the log (damage, repairs)."""
    decisions: list[DecisionOut] = []
    """Every priced context decision on the shown path (prunes, compactions, turn TTLs), oldest first."""
    branch: BranchTotals | None = None
    """The shown branch's counts (`session` counts the whole log, every branch)."""


class EntryPage(msgspec.Struct, frozen=True, kw_only=True):
    leaf_id: str | None
    total: int
    offset: int
    entries: list[Item]


class CacheFigures(msgspec.Struct, frozen=True, kw_only=True):
    """Input tokens of one request split the way they are billed."""

    read: int
    write: int
    uncached: int
    total: int
    hit_ratio: float
    """`read / total` (0 for an empty request)."""


class LayerPart(msgspec.Struct, frozen=True, kw_only=True):
    """One part of a layer: a stable or volatile part, a one-shot, or a block of the conversation."""

    key: str
    tier: int | None
    tier_name: str
    provenance: str
    authority: str
    tokens: int
    text: str
    """Cut to a bound; the whole text is in the log."""
    text_chars: int
    role: str = ""
    """For a block of the conversation: the role of the message holding it (`user`, `assistant`, `tool`)."""
    calls: list[CallOut] = []
    """For a tool call block: the calls as sent, each with its input and (Edit, Write) its diff."""
    reasoning: str = ""
    """For a block of the model's reasoning: its kind (`thinking`, `redacted_thinking`, `reasoning`,
    `reasoning_content`), its `text` the readable reasoning (thinking, summaries); "" for other blocks."""
    sealed: int = 0
    """For a reasoning block: characters of signed or encrypted content it carries back unread."""


class Layer(msgspec.Struct, frozen=True, kw_only=True):
    name: LayerName
    tokens: int
    parts: list[LayerPart]


class BlockOut(msgspec.Struct, frozen=True, kw_only=True):
    """One block of the rendered request in prefix order, as the cache sees it."""

    position: int
    where: str
    label: str
    layer: LayerName
    tokens: int
    cumulative: int
    region: str
    breakpoint: str | None


class BreakpointOut(msgspec.Struct, frozen=True, kw_only=True):
    position: int
    where: str
    ttl: str
    tokens: int
    cacheable: bool


class RequestSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One request (model call) of the session, for the plot."""

    index: int
    entry_id: str
    """The assistant message that answered it."""
    turn_id: str | None
    ts: float
    model: str
    on_path: bool
    """Whether it belongs to the shown branch."""
    layers: dict[str, int]
    """Tokens per layer of the request as reconstructed (keys: the layer names)."""
    provider: CacheFigures | None
    """From the provider's usage (None when the log has none)."""
    simulated: CacheFigures
    """From the cache simulator replaying the reconstructed requests in order (zero for a damaged request)."""
    damage: str | None = None
    """Why the request cannot be rebuilt from the log (a damaged turn record, ...); None when it was."""
    cache_miss: str | None = None
    """Why it missed the cache, in words: the provider's diagnosis, else the simulator's (`... (predicted)`)."""


class RequestSeries(msgspec.Struct, frozen=True, kw_only=True):
    leaf_id: str | None
    requests: list[RequestSummary]
    """The newest requests of the shown branch (at most `SERIES_MAX`), oldest first."""
    on_path: int
    """Requests on the shown branch in all."""
    notes: list[str]


class ComponentOut(msgspec.Struct, frozen=True, kw_only=True):
    """Tokens of one component of a request, as `lamina.reports` counts them (texts, not JSON)."""

    kind: str
    name: str
    tokens: int


class RequestLayers(msgspec.Struct, frozen=True, kw_only=True):
    """One request as sent: its layers, blocks, breakpoints, and its cache figures side by side."""

    index: int
    entry_id: str
    turn_id: str | None
    user_entry_id: str | None
    ts: float
    model: str
    format: str
    """The wire format it was rebuilt in (`anthropic`, `openai_chat`)."""
    layers: list[Layer]
    blocks: list[BlockOut]
    breakpoints: list[BreakpointOut]
    provider: CacheFigures | None
    simulated: CacheFigures
    stable_version: int | None
    stable_digest: str | None
    stable_recorded: bool
    """Whether the log holds the stable parts this request's prefix carried (older logs do not)."""
    tools: list[str] = []
    """The names of the tool definitions the rebuilt request sends, in order."""
    tools_recorded: bool = False
    """Whether the log recorded the tool definitions the request sent (older logs do not: it sends none)."""
    composition: list[ComponentOut]
    """The request component by component (system sections, project parts, defanging, tails, framing, ...)."""
    notes: list[str]
    cache_miss: str | None = None
    """Why it missed the cache, in words: the provider's diagnosis, else the simulator's (`... (predicted)`)."""


class ErrorOut(msgspec.Struct, frozen=True, kw_only=True):
    error: str
