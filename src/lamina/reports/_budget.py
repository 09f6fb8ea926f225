"""Context budget: tokens per tier of a turn, and where a rendered request's cache breakpoints fall (pure).

`budget_of_turn` counts the very parts the renderers build the request's blocks from
(`TurnContext.parts`), tier by tier; `cache_layout` walks a rendered request (`body_blocks`) and
says which blocks the provider caches, measured as the cache simulator measures them. The tiers
and the layout are told in docs/reports.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias, assert_never

import msgspec

from lamina.cachesim import (
    AnthropicCacheRules,
    AnthropicCacheSimulator,
    CacheUsage,
    OpenAICacheRules,
    OpenAICacheSimulator,
    TimedRequest,
)
from lamina.context import (
    AttachmentBlocks,
    Part,
    Stability,
    Tier,
    ToolSpec,
    TurnContext,
    attachment_note,
    message_parts,
    prelude_messages,
    tool_part,
)
from lamina.placement import (
    AnthropicTarget,
    OpenAIChatTarget,
    OpenAIResponsesTarget,
    RenderedRequest,
    RenderTarget,
    SdkManagedPrompt,
    SdkManagedTarget,
)
from lamina.reports._body_walk import BodyBlock, block_tokens, body_blocks, request_body
from lamina.session import LogEntry
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator

__all__ = [
    "NEXT_MESSAGE",
    "TIER_LABELS",
    "Breakpoint",
    "BudgetReport",
    "CacheLayout",
    "CacheRegion",
    "LayoutBlock",
    "TierTokens",
    "budget_of_parts",
    "budget_of_turn",
    "cache_layout",
    "tool_tokens",
]

TIER_LABELS: Final[Mapping[Tier, str]] = {
    Tier.RULES: "rules",
    Tier.CATALOGUE: "catalogue",
    Tier.SESSION_STATE: "session state",
    Tier.ON_DEMAND: "documents",
    Tier.HISTORY: "history",
    Tier.MEMORY: "memory",
    Tier.TOOL_RESULTS: "tool results",
    Tier.ONE_SHOT: "one-shot",
}
"""A short name for each tier, as reports show it."""

_REASONING_ITEM: Final = "reasoning"
"""The item the model's reasoning is counted as (the parts keyed `history.reasoning.`)."""

BLOCK_ITEM: Final = "compaction block"
"""The item a provider's compaction block is counted as (sent in place of the summary, to its provider)."""
_SUMMARY_KEY: Final = "compaction.summary"

NEXT_MESSAGE: Final = "(your next message)"
"""Stands for the user's text in the budget of a session's next request: the report is about everything around it."""


# --- tokens per tier --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TierTokens:
    """The tokens of one tier and what they were spent on."""

    tier: Tier
    tokens: int
    items: tuple[str, ...]
    """What was counted, in order: part keys (stable, volatile and one-shot parts), and for the
    conversation `tools`, `compaction block`, `compaction summary`, `user's words`, `history`, `reasoning`,
    `user message`, `attachments`, `documents read`, `tool results`."""
    reasoning: int = 0
    """Of `tokens`, the model's reasoning replayed in the conversation (its thinking, reasoning
    summaries, a server's reasoning: the `history.reasoning.` parts, in the history tier)."""


@dataclass(frozen=True, slots=True)
class BudgetReport:
    """Tokens per tier, every tier present, in `Tier` order."""

    tiers: tuple[TierTokens, ...]

    @property
    def total(self) -> int:
        return sum(t.tokens for t in self.tiers)

    @property
    def reasoning(self) -> int:
        """Of the total, the tokens of the model's reasoning (a row of its own in the reports)."""
        return sum(t.reasoning for t in self.tiers)

    def tokens(self, tier: Tier) -> int:
        """The tokens of `tier`."""
        return self.tiers[list(Tier).index(tier)].tokens


class _Tally:
    def __init__(self) -> None:
        self._tokens = dict.fromkeys(Tier, 0)
        self._reasoning = dict.fromkeys(Tier, 0)
        self._items: dict[Tier, list[str]] = {t: [] for t in Tier}

    def add(self, tier: Tier, item: str, tokens: int) -> None:
        self._tokens[tier] += tokens
        if item == _REASONING_ITEM:
            self._reasoning[tier] += tokens
        if item not in self._items[tier]:
            self._items[tier].append(item)

    def report(self) -> BudgetReport:
        return BudgetReport(
            tuple(TierTokens(t, self._tokens[t], tuple(self._items[t]), self._reasoning[t]) for t in Tier)
        )


def tool_tokens(tool: ToolSpec, *, estimator: TokenEstimator = DEFAULT_ESTIMATOR) -> int:
    """Estimated tokens of one tool definition: its part's text (name, description and input schema as JSON)."""
    return tool_part(tool).token_count(estimator)


def _item(part: Part, user_entry_id: str | None) -> str:
    """What a part is spent on, as a report shows it: its key, or its kind for the conversation's many parts."""
    key = part.key
    if part.tier is Tier.CATALOGUE and key.startswith("tool."):
        return "tools"
    if part.stability is not Stability.COMPACTABLE and part.stability is not Stability.ON_DEMAND:
        return key  # stable, volatile and one-shot parts by name
    if key == _SUMMARY_KEY:
        return "compaction summary"
    if key == "compaction.users_words":
        return "user's words"
    if key.startswith("attachment."):
        return "attachments"
    if key.startswith("tool_result."):
        return "documents read" if part.stability is Stability.ON_DEMAND else "tool results"
    if user_entry_id is not None and key == f"history.user.{user_entry_id}":
        return "user message"
    if key.startswith("history.reasoning."):
        return _REASONING_ITEM
    return "history"


def budget_of_parts(
    parts: Iterable[Part],
    *,
    tools: Sequence[ToolSpec] = (),
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
    user_entry_id: str | None = None,
) -> BudgetReport:
    """Tokens per tier of `parts` (each in its own tier) and of `tools` (the capability catalogue).

    Each part counts `Part.token_count` (its text, or a media part's estimate); `user_entry_id`
    names the current user message's part `user message` in the items.
    """
    tally = _Tally()
    for part in (*(tool_part(t) for t in tools), *parts):
        tally.add(part.tier, _item(part, user_entry_id), part.token_count(estimator))
    return tally.report()


def budget_of_turn(
    turn: TurnContext,
    continuation: Sequence[LogEntry] = (),
    *,
    attachments: AttachmentBlocks = attachment_note,
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
    owner: Literal["anthropic", "openai"] | None = None,
) -> BudgetReport:
    """Tokens per tier of everything `turn` sends: the sum over `turn.parts(continuation, attachments)`.

    Those parts are what the renderers build every block of the request from, so the budget is
    the request's: tool definitions in the catalogue, stable parts in their own tiers, this
    turn's tail part by part as it is sent (session state, one-shot), the conversation in
    history, tool results in their tier (a skill, guide or document read on demand in the
    documents tier) and attached files in the documents tier (SPEC F17), shown as `attachments`
    shows them (an image or a PDF sent as media by the provider's estimate). Pass the renderer
    the request is made with (`ContextEngine.attachment_blocks`) to count the attachments as sent.

    After a provider's own compaction (`turn.server`), a request to that provider sends its block
    in place of the summary, then the ledger: the budget counts the block as sent (its signed or
    encrypted JSON, as the cache simulator counts it) as `compaction block`, and the ledger as the
    summary. `owner` is the wire format of the request (`anthropic` or `openai`; None: the block's
    own): a request in another format shows the summary, and the budget counts it.
    """
    parts = turn.parts(continuation, attachments)
    server = turn.server
    if server is None or (owner is not None and server.provider != owner):
        return budget_of_parts(parts, estimator=estimator, user_entry_id=turn.user_entry_id)
    block = block_tokens(msgspec.json.decode(server.block), estimator)  # the block as sent, as the simulator counts
    ledger = message_parts(prelude_messages(turn.server_prelude, None))  # what follows the block
    tally = _Tally()
    for part in parts:
        if part.key == _SUMMARY_KEY:  # the block in its place, then the ledger (`lamina.placement.prelude_wire`)
            tally.add(Tier.HISTORY, BLOCK_ITEM, block)
        for counted in ledger if part.key == _SUMMARY_KEY else (part,):
            tally.add(counted.tier, _item(counted, turn.user_entry_id), counted.token_count(estimator))
    return tally.report()


# --- cache layout ---------------------------------------------------------------------------------------

CacheRegion: TypeAlias = Literal["stable", "rolling", "uncached"]
"""Where a block stands for the provider's cache: in the stable prefix every later turn reads, in
the part cached for the next request only, or not cached."""


@dataclass(frozen=True, slots=True)
class LayoutBlock:
    """One block of a rendered request, in prefix order."""

    position: int
    """1-based position in the prefix (tools, then system, then messages)."""
    where: str
    """Path in the request body: `tools[2]`, `system[4]`, `messages[0].content[1]`, `input[3]`."""
    label: str
    """What the block holds: a tool name, a part key, `user message`, `tail: date_time, ...`."""
    tokens: int
    cumulative: int
    """Tokens from the start of the request up to and including this block."""
    region: CacheRegion
    breakpoint: str | None = None
    """The cache TTL (`5m`, `1h`) when this block carries an explicit breakpoint."""


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """An explicit cache breakpoint and the prefix it caches."""

    position: int
    where: str
    ttl: str
    tokens: int
    """Tokens up to and including the breakpoint's block."""
    cacheable: bool
    """Whether the prefix reaches the provider's minimum cacheable length."""


@dataclass(frozen=True, slots=True)
class CacheLayout:
    """How a rendered request sits in the provider's prompt cache."""

    format: Literal["anthropic", "openai_chat", "openai_responses", "sdk_managed"]
    blocks: tuple[LayoutBlock, ...]
    breakpoints: tuple[Breakpoint, ...]
    stable_prefix_tokens: int
    """Tokens of the prefix that stays byte-identical across turns (tools and stable parts)."""
    total_tokens: int
    min_cacheable_tokens: int
    """The provider's minimum prefix length for caching (0 when the backend decides)."""
    first_request: CacheUsage | None
    """What this request costs sent as the session's first, by the cache simulator (None: not simulated)."""
    notes: tuple[str, ...]
    """Plain sentences explaining the layout to a reader."""


def cache_layout(
    request: RenderedRequest,
    target: RenderTarget,
    *,
    turn: TurnContext | None = None,
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
) -> CacheLayout:
    """The cache layout of `request`, rendered for `target`.

    Args:
        request: What `lamina.placement.render(turn, target)` returned.
        target: The target it was rendered for (it decides the format).
        turn: The turn it was rendered from, to label blocks with part keys; optional.
        estimator: Counts each block's canonical JSON, as the cache simulator does.

    Returns:
        The request's blocks in prefix order, its breakpoints and notes for a reader.

    Raises:
        TypeError: `request` does not match `target` (an SDK-managed prompt for a body's target, or the reverse).
    """
    match target:
        case AnthropicTarget():
            return _anthropic(request_body(request), list(body_blocks(request, target, turn=turn)), estimator)
        case OpenAIChatTarget() | OpenAIResponsesTarget():
            chat = isinstance(target, OpenAIChatTarget)
            return _openai(request_body(request), list(body_blocks(request, target, turn=turn)), estimator, chat=chat)
        case SdkManagedTarget():
            if not isinstance(request, SdkManagedPrompt):
                raise TypeError("an SDK-managed target renders an SdkManagedPrompt")
            return _sdk(request, estimator)
        case _:
            assert_never(target)


def _anthropic(body: Mapping[str, Any], raws: Sequence[BodyBlock], estimator: TokenEstimator) -> CacheLayout:
    rules = AnthropicCacheRules()
    measured = [block_tokens(raw.block, estimator) for raw in raws]
    cumulative = _running(measured)
    marks = [i for i, raw in enumerate(raws) if raw.ttl is not None]
    stable_end = max((i for i, raw in enumerate(raws) if raw.stable), default=-1)
    stable_mark = max((i for i in marks if i <= stable_end), default=-1)
    last_mark = marks[-1] if marks else -1
    blocks = []
    for i, (raw, tokens) in enumerate(zip(raws, measured, strict=True)):
        region: CacheRegion = "stable" if i <= stable_mark else "rolling" if i <= last_mark else "uncached"
        blocks.append(LayoutBlock(i + 1, raw.where, raw.label, tokens, cumulative[i], region, raw.ttl))
    breakpoints = tuple(
        Breakpoint(i + 1, raws[i].where, raws[i].ttl or "5m", cumulative[i], cumulative[i] >= rules.min_tokens)
        for i in marks
    )
    usage = AnthropicCacheSimulator(estimator=estimator).submit(TimedRequest(0.0, body))
    notes = [*_anthropic_notes(breakpoints, stable_mark, last_mark, rules), _first_request_note(usage)]
    return CacheLayout(
        format="anthropic",
        blocks=tuple(blocks),
        breakpoints=breakpoints,
        stable_prefix_tokens=cumulative[stable_end] if stable_end >= 0 else 0,
        total_tokens=cumulative[-1] if cumulative else 0,
        min_cacheable_tokens=rules.min_tokens,
        first_request=usage,
        notes=tuple(notes),
    )


def _anthropic_notes(
    breakpoints: Sequence[Breakpoint], stable_mark: int, last_mark: int, rules: AnthropicCacheRules
) -> list[str]:
    """What the stable and the rolling breakpoints cache, in plain sentences."""
    notes = []
    if stable_mark >= 0:
        bp = next(b for b in breakpoints if b.position == stable_mark + 1)
        notes.append(
            f"Breakpoint {breakpoints.index(bp) + 1} ({bp.ttl}) closes the stable prefix (tools, system and the "
            f"first user message with the project parts, "
            f"{bp.tokens:,} tokens): every later turn reads it from the cache until a stable input changes."
        )
        if not bp.cacheable:
            notes.append(
                f"The stable prefix is below Anthropic's minimum of {rules.min_tokens:,} tokens (more for some "
                "models), so it is cached only together with the conversation after it."
            )
    if last_mark > stable_mark:
        bp = breakpoints[-1]
        notes.append(
            f"Breakpoint {len(breakpoints)} ({bp.ttl}) is the rolling breakpoint on the last block: the next "
            f"request of this session reads everything up to it ({bp.tokens:,} tokens)."
        )
    return notes


def _openai(
    body: Mapping[str, Any], raws: Sequence[BodyBlock], estimator: TokenEstimator, *, chat: bool
) -> CacheLayout:
    rules = OpenAICacheRules()
    measured = [block_tokens(raw.block, estimator) for raw in raws]
    cumulative = _running(measured)
    total = cumulative[-1] if cumulative else 0
    stored = total >= rules.min_tokens
    blocks = tuple(
        LayoutBlock(
            i + 1,
            raw.where,
            raw.label,
            tokens,
            cumulative[i],
            "stable" if raw.stable else "rolling" if stored else "uncached",
        )
        for i, (raw, tokens) in enumerate(zip(raws, measured, strict=True))
    )
    stable_tokens = max((b.cumulative for b in blocks if b.region == "stable"), default=0)
    notes = [
        f"OpenAI caches automatically: a prompt of at least {rules.min_tokens:,} tokens is stored, and a later "
        f"prompt with the same prompt_cache_key reads its longest common prefix, in steps of {rules.increment} tokens.",
        f"The stable prefix (tools and the stable parts) is {stable_tokens:,} tokens and is the same every turn; "
        "the conversation after it only grows, so each request can read the one before it.",
    ]
    if not stored:
        notes.append(f"This request is {total:,} tokens, below the minimum: it is not cached.")
    simulator = OpenAICacheSimulator(estimator=estimator)
    usage = simulator.submit(TimedRequest(0.0, body))
    return CacheLayout(
        format="openai_chat" if chat else "openai_responses",
        blocks=blocks,
        breakpoints=(),
        stable_prefix_tokens=stable_tokens,
        total_tokens=total,
        min_cacheable_tokens=rules.min_tokens,
        first_request=usage,
        notes=tuple(notes),
    )


def _sdk(prompt: SdkManagedPrompt, estimator: TokenEstimator) -> CacheLayout:
    tokens = estimator.count(prompt.prompt)
    block = LayoutBlock(1, "prompt", "user message with stable parts and tail", tokens, tokens, "uncached")
    notes = (
        "The backend (the Claude Agent SDK) owns the system prompt, the transcript and their cache; Lamina "
        "sends one user message.",
        "The stable parts travel in that message on the first turn, after a compaction and when they change; "
        "later turns carry only the user's text and the tail.",
    )
    return CacheLayout(
        format="sdk_managed",
        blocks=(block,),
        breakpoints=(),
        stable_prefix_tokens=0,
        total_tokens=tokens,
        min_cacheable_tokens=0,
        first_request=None,
        notes=notes,
    )


def _running(values: Sequence[int]) -> list[int]:
    out, total = [], 0
    for value in values:
        total += value
        out.append(total)
    return out


def _first_request_note(usage: CacheUsage) -> str:
    if not usage.write:
        return f"Sent as a session's first request, nothing is written to the cache ({usage.total:,} tokens uncached)."
    parts = [
        f"{tokens:,} with the {ttl} TTL" for ttl, tokens in (("1h", usage.write_1h), ("5m", usage.write_5m)) if tokens
    ]
    uncached = f"; {usage.uncached:,} tokens are not cached" if usage.uncached else ""
    return (
        f"Sent as a session's first request, it writes {usage.write:,} tokens to the cache "
        f"({' and '.join(parts)}){uncached}."
    )
