"""The cost model: a context decision priced by its expected bill over the likely rest of the session (pure).

Prices and TTLs come from a provider's cache rules (`lamina.cachesim`), the pace from the gaps
seen so far (`_pace`), the cache's state from the clock. Described in docs/compaction.md ("The cost model").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, TypeAlias, assert_never

import msgspec

from lamina.placement import (
    AnthropicTarget,
    CacheTtl,
    OpenAIChatTarget,
    OpenAIResponsesTarget,
    RenderTarget,
    SdkManagedTarget,
)
from lamina.session import CompactionBoundary, CostDecision, LogEntry, ToolOutputPruned, TurnRecord

if TYPE_CHECKING:  # the simulator loads on first use (importing the engine must not load it)
    from lamina.cachesim import AnthropicCacheRules, OpenAIBreakpointRules, OpenAICacheRules

__all__ = [
    "DEFAULT_PRICES",
    "CachePrices",
    "CacheState",
    "Outlook",
    "PruneItem",
    "SessionPace",
    "choose_turn_ttl",
    "decision_on",
    "describe_decision",
    "price_compaction",
    "price_prune",
    "price_reasoning_replay",
]

_MIN_TURNS_LEFT: Final = 4.0
"""However young the session, expect at least this many more turns."""
_CALLS_PER_TURN: Final = 2.0
"""Model calls per turn before the session has shown its own."""
_EXTRA_CALL_WRITE: Final = 200
"""Tokens a re-read's own model call writes besides the result (the call, the model's words)."""
_PRIOR_GAPS: Final = ((60.0, 0.5), (600.0, 0.5), (7_200.0, 0.25))
"""Gaps assumed before the session shows its own, with their weights: a minute, ten minutes, two hours."""
_OUTPUT_PRICE: Final = 5.0
"""An output token in base-price input tokens (Anthropic's output costs 5x its input; OpenAI's 4x to 8x)."""
_SUMMARY_TOKENS: Final = 2_000
"""A compaction summary's size before one is written: the template's sections, filled."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CachePrices:
    """A provider's cache prices in base-price tokens per token, and how long its entries live.

    The `_5m` and `_1h` figures are the provider's short and long TTL: Anthropic's 5 minutes and 1
    hour, OpenAI's 30 minutes and 12 hours on GPT-5.6 and later (`ttl_names` says which).
    """

    read: float = 0.1
    write_5m: float = 1.25
    """Writing (or sending uncached) under the short TTL."""
    write_1h: float = 2.0
    ttl_5m_seconds: float = 300.0
    ttl_1h_seconds: float = 3600.0
    min_tokens: int = 1024
    """The smallest prefix the provider caches."""
    choose_ttl: bool = True
    """Whether a breakpoint can ask for the long TTL (Anthropic; OpenAI Responses on GPT-5.6 and later;
    OpenAI's automatic cache and Chat Completions have one lifetime)."""
    ttl_names: tuple[str, str] = ("5m", "1h")
    """The short and the long TTL as the provider names them (the logged decision says `ttl_<name>`)."""
    long_default: bool = True
    """Whether the long TTL is what a breakpoint gets unless the cost model saves by the short one
    (Lamina's default on Anthropic); False: the short one unless the long one saves (OpenAI's `30m`)."""

    @classmethod
    def anthropic(cls, rules: AnthropicCacheRules | None = None) -> CachePrices:
        """Anthropic's prices and TTLs (`rules`: the current published ones unless given)."""
        from lamina.cachesim import AnthropicCacheRules

        rules = rules if rules is not None else AnthropicCacheRules()
        return cls(
            read=rules.read_multiplier,
            write_5m=rules.write_5m_multiplier,
            write_1h=rules.write_1h_multiplier,
            ttl_5m_seconds=rules.ttl_5m_seconds,
            ttl_1h_seconds=rules.ttl_1h_seconds,
            min_tokens=rules.min_tokens,
        )

    @classmethod
    def openai(cls, rules: OpenAICacheRules | None = None) -> CachePrices:
        """OpenAI's automatic caching: writes at the base price, one idle lifetime."""
        from lamina.cachesim import OpenAICacheRules

        rules = rules if rules is not None else OpenAICacheRules()
        return cls(
            read=rules.read_multiplier,
            write_5m=1.0,
            write_1h=1.0,
            ttl_5m_seconds=rules.idle_ttl_seconds,
            ttl_1h_seconds=rules.idle_ttl_seconds,
            min_tokens=rules.min_tokens,
            choose_ttl=False,
        )

    @classmethod
    def openai_breakpoints(cls, rules: OpenAIBreakpointRules | None = None, *, long_ttl: bool = True) -> CachePrices:
        """OpenAI's breakpoint regime (GPT-5.6 and later): writes at 1.25x for 30 minutes, or for 12 hours.

        The 12-hour write price is not published: `OpenAIBreakpointRules.write_12h_multiplier`
        assumes 2x. `long_ttl` False: the API takes 30 minutes only (Chat Completions).
        """
        from lamina.cachesim import OpenAIBreakpointRules

        rules = rules if rules is not None else OpenAIBreakpointRules()
        return cls(
            read=rules.read_multiplier,
            write_5m=rules.write_30m_multiplier,
            write_1h=rules.write_12h_multiplier,
            ttl_5m_seconds=rules.ttl_30m_seconds,
            ttl_1h_seconds=rules.ttl_12h_seconds,
            min_tokens=rules.min_tokens,
            choose_ttl=long_ttl,
            ttl_names=("30m", "12h"),
            long_default=False,
        )

    @classmethod
    def for_target(cls, target: RenderTarget) -> CachePrices:
        """The prices of the provider `target` renders for: Anthropic's or OpenAI's cache rules.

        Anthropic Messages and an SDK-managed backend (the Claude Agent SDK) are Anthropic's: a
        write premium, a 5-minute and a 1-hour TTL. OpenAI Chat Completions (an OpenAI-compatible
        server's too) and Responses are OpenAI's: writes at the base price, one cache lifetime; on a
        model of the breakpoint regime (`cache_breakpoints`), writes at 1.25x and, on Responses, a
        choice of 30 minutes or 12 hours.
        """
        match target:
            case AnthropicTarget() | SdkManagedTarget():
                return cls.anthropic()
            case OpenAIChatTarget(cache_breakpoints=True):
                return cls.openai_breakpoints(long_ttl=False)
            case OpenAIResponsesTarget(cache_breakpoints=True):
                return cls.openai_breakpoints()
            case OpenAIChatTarget() | OpenAIResponsesTarget():
                return cls.openai()
            case _:
                assert_never(target)

    def write(self, ttl: CacheTtl) -> float:
        """The price of writing a token under `ttl`."""
        return self.write_1h if ttl == "1h" and self.choose_ttl else self.write_5m


DEFAULT_PRICES: Final = CachePrices()
"""The prices a context engine decides with unless told otherwise: Anthropic's (`CachePrices.anthropic()`)."""


@dataclass(frozen=True, slots=True)
class SessionPace:
    """The session's pace so far: the idle gap before each turn, how many turns and model calls."""

    gaps: tuple[float, ...] = ()
    """Seconds between the last activity of a turn and the start of the next, oldest first."""
    turns: int = 0
    calls: int = 0

    def chance_longer(self, seconds: float) -> float:
        """The chance that the next gap is longer than `seconds`: the gaps seen, beside a few assumed ones."""
        longer = sum(1 for g in self.gaps if g > seconds) + sum(w for g, w in _PRIOR_GAPS if g > seconds)
        return longer / (len(self.gaps) + sum(w for _, w in _PRIOR_GAPS))

    @property
    def turns_left(self) -> float:
        """The turns to expect: as many again as so far (a session half way is the best guess), at least 4."""
        return max(float(self.turns), _MIN_TURNS_LEFT)

    @property
    def calls_per_turn(self) -> float:
        """Model calls per turn, as seen (2 before any)."""
        return max(1.0, self.calls / self.turns) if self.turns and self.calls else _CALLS_PER_TURN

    @property
    def requests_left(self) -> float:
        """The model calls to expect over the rest of the session."""
        return self.turns_left * self.calls_per_turn


@dataclass(frozen=True, slots=True)
class CacheState:
    """What of the history the provider's cache still holds, from the clock and the last requests."""

    idle_seconds: float | None
    """Since the history was last read or written (None: never sent)."""
    history_tokens: int
    """The history's tokens now (the provider view, the stable prefix apart)."""
    since_request: int
    """Tokens added since the last request (not in the cache yet)."""
    since_turn_mark: int
    """Tokens after the last turn's breakpoint (the part a long-TTL turn breakpoint does not hold)."""
    turn_mark_ttl: CacheTtl = "1h"

    def cold_tokens(self, prices: CachePrices) -> int:
        """The tokens at the end of the history the next request cannot read from the cache."""
        h = self.history_tokens
        if self.idle_seconds is None:
            return h
        if self.idle_seconds < prices.ttl_5m_seconds:
            return min(h, self.since_request)
        if self.turn_mark_ttl == "1h" and prices.choose_ttl and self.idle_seconds < prices.ttl_1h_seconds:
            return min(h, self.since_turn_mark)
        return h

    def label(self, prices: CachePrices) -> str:
        """`warm`, `partly warm` or `cold`."""
        cold = self.cold_tokens(prices)
        if cold >= self.history_tokens and self.history_tokens:
            return "cold"
        return "warm" if cold <= self.since_request else "partly warm"


@dataclass(frozen=True, slots=True)
class Outlook:
    """Everything a decision is priced from: the prices, the session's pace, the cache's state now."""

    prices: CachePrices
    pace: SessionPace
    cache: CacheState

    def long_ttl(self) -> CacheTtl:
        """The TTL the history is held under between turns (the long one where the provider has it)."""
        return "1h" if self.prices.choose_ttl else "5m"

    def per_token_later(self) -> float:
        """What one token in the history costs over the rest of the session: a read per call, a write per cold start."""
        p = self.prices
        ttl = p.ttl_1h_seconds if self.long_ttl() == "1h" else p.ttl_5m_seconds
        cold_starts = self.pace.turns_left * self.pace.chance_longer(ttl)
        return self.pace.requests_left * p.read + cold_starts * (p.write_5m - p.read)

    def nothing_bill(self) -> float:
        """The expected bill of the history if nothing changes: this request, then every later one."""
        p, h = self.prices, self.cache.history_tokens
        cold = self.cache.cold_tokens(p)
        return (h - cold) * p.read + cold * p.write_5m + h * self.per_token_later()

    def decision(self, action: str, saving: float, *, reread: float = 0.0) -> CostDecision:
        """The logged record of `action`, expected to save `saving` base-price tokens against doing nothing."""
        nothing = self.nothing_bill()
        return CostDecision(
            action=action,
            expected=round(nothing - saving, 1),
            expected_nothing=round(nothing, 1),
            horizon=round(self.pace.requests_left),
            cache=self.cache.label(self.prices),
            reread_chance=round(reread, 3),
        )


@dataclass(frozen=True, slots=True)
class PruneItem:
    """One result a prune may take: where it ends in the history, what it frees, the chance it is needed again."""

    call_id: str
    suffix_tokens: int
    """Tokens from this result to the end of the history, the result included."""
    tokens: int
    """The result's tokens."""
    freed: int
    """Tokens a prune frees (the result less its note)."""
    reread_chance: float


def _item_value(item: PruneItem, outlook: Outlook, later: float) -> float:
    """What pruning `item` saves once the prune is made: its write or read now and later, less a re-read's price."""
    p, q = outlook.prices, item.reread_chance
    kept_for = 1.0 - q / 2.0  # a re-read brings it back, on average half way through what is left
    saved = item.freed * (p.write_5m + later * kept_for)
    # a re-read is a model call of its own (the history read once more) and the result sent again as new output
    reread = item.tokens * p.write_5m + outlook.cache.history_tokens * p.read + _EXTRA_CALL_WRITE * p.write_5m
    return saved - q * reread


def price_prune(items: list[PruneItem], outlook: Outlook, *, minimum_tokens: int = 0) -> tuple[list[str], CostDecision]:
    """The results to prune now (none: keep everything) and the decision's expected figures.

    A prune rewrites the cached history from its first result on (what the cache still holds of
    it, at the write price); each result it takes saves its own tokens now and at every later call,
    less the price of reading it again times the chance that is needed. Every start is tried (the
    results from there on whose value is positive); the cheapest expected bill wins, keeping
    everything included, so the choice is never worse than doing nothing on this estimate.

    Args:
        items: The results the policy allows to prune, oldest first.
        outlook: The prices, the pace and the cache's state.
        minimum_tokens: A prune frees at least this many tokens (the policy's floor).

    Returns:
        The call ids to prune (empty: keep), and the decision to log.
    """
    p = outlook.prices
    later = outlook.per_token_later()
    cold = outlook.cache.cold_tokens(p)
    values = [_item_value(item, outlook, later) for item in items]
    best_saving, best_start = 0.0, -1
    gain = 0.0
    freed = 0
    for j in range(len(items) - 1, -1, -1):  # suffix sums of what the positive items save
        if values[j] <= 0:
            continue
        gain += values[j]
        freed += items[j].freed
        rewrite = max(0, items[j].suffix_tokens - cold) * (p.write_5m - p.read)  # what the cache held from here on
        saving = gain - rewrite
        if freed >= minimum_tokens and saving > best_saving:
            best_saving, best_start = saving, j
    if best_start < 0:
        return [], outlook.decision("keep", 0.0, reread=_mean_chance(items))
    chosen = [it for it, v in zip(items[best_start:], values[best_start:], strict=True) if v > 0]
    return [it.call_id for it in chosen], outlook.decision("prune", best_saving, reread=_mean_chance(chosen))


def _mean_chance(items: list[PruneItem]) -> float:
    return sum(it.reread_chance for it in items) / len(items) if items else 0.0


def choose_turn_ttl(outlook: Outlook, *, turn_tokens: float) -> tuple[CacheTtl, CostDecision]:
    """The TTL for this turn's breakpoint, and why: the long one pays when a gap of the middle kind is likely.

    The long TTL costs its premium on what this turn's first request writes (the whole history
    when the cache is cold); it saves, after a gap longer than the short TTL but shorter than the
    long one, rewriting the whole history (only the turn's own tool loop is written again). When
    the two are within a cache minimum's read of each other, the default stays (the long one on
    Anthropic, the short one on OpenAI: `CachePrices.long_default`), so the choice is never worse
    than the default on this estimate. The returned TTL names the short (`5m`) or long (`1h`) TTL;
    the decision names the provider's own (`ttl_30m`, `ttl_12h` on OpenAI).

    Args:
        outlook: The prices, the pace and the cache's state (after any prune).
        turn_tokens: The tokens a turn adds, as seen (what the long TTL leaves to write again).

    Returns:
        The TTL and the decision to log.
    """
    p, cache = outlook.prices, outlook.cache
    short, long = (f"ttl_{name}" for name in p.ttl_names)
    if not p.choose_ttl:
        return "5m", outlook.decision(short, 0.0)
    written = cache.cold_tokens(p)
    middle = outlook.pace.chance_longer(p.ttl_5m_seconds) - outlook.pace.chance_longer(p.ttl_1h_seconds)
    # after a middle gap the next turn writes under its own TTL either way: the turn's loop, or everything
    long_bill = written * (p.write_1h - p.write_5m) + middle * turn_tokens * p.write_5m
    short_bill = middle * (cache.history_tokens + turn_tokens) * p.write_5m
    margin = p.min_tokens * p.read
    if long_bill <= short_bill + (margin if p.long_default else -margin):
        return "1h", outlook.decision(long, short_bill - long_bill)
    return "5m", outlook.decision(short, long_bill - short_bill)


def price_compaction(
    outlook: Outlook,
    *,
    tokens_after: int,
    threshold_tokens: int | None = None,
    turn_tokens: float = 2_000.0,
    summarised_tokens: int | None = None,
    summary_tokens: int = _SUMMARY_TOKENS,
) -> tuple[Literal["compact", "wait"], CostDecision]:
    """Whether compacting now (the history down to `tokens_after`) is cheaper than waiting for the threshold.

    Now or later, a compaction writes the compacted history once (where it would be read), and
    makes a summarising call (its input priced by `summarised_tokens` in base-price tokens: a fresh
    request reads the summarised history at the base price, one on the session's cached prefix
    reads it at the read price; the summary written as output). Compacting before the threshold compacts more often:
    now costs the extra share `1 - (now - after) / (threshold - after)` of a compaction (a whole
    one without a threshold, none at it). Against that, compacting now saves:

    - the write of the history the cache no longer holds: after a gap longer than the TTL that
      holds it, the next request writes all of it again anyway (a warm cache saves only what was
      added since the last request: the compaction throws away what was paid for);
    - the longer history (now less after) at every call until the threshold, on the session's
      growth, read and written again at each cold start, given back after it: waiting then
      compacts, and the history compacted earlier has grown since (without a threshold, never
      given back). Looked ahead as far as the session's expected calls.

    Token counts are of the history, as `outlook.cache.history_tokens` counts them. The expected
    saving of the action taken is never negative, so the choice is never worse than doing nothing
    on this estimate.

    Args:
        outlook: The prices, the pace and the cache's state.
        tokens_after: The history's tokens after the compaction (summary and kept entries).
        threshold_tokens: The history's tokens at which waiting compacts (None: never).
        turn_tokens: The tokens a turn adds, as seen (how soon the threshold comes).
        summarised_tokens: What the summarising call's input costs, in base-price tokens (default: the
            history less `tokens_after`, read fresh).
        summary_tokens: The summary it writes (an estimate before it is written).

    Returns:
        `compact` or `wait`, and the decision to log.
    """
    p, cache, pace = outlook.prices, outlook.cache, outlook.pace
    now, after = cache.history_tokens, tokens_after
    freed = max(0, now - after)
    read = summarised_tokens if summarised_tokens is not None else freed
    compaction = after * (p.write_5m - p.read) + read + summary_tokens * _OUTPUT_PRICE  # its write, its own call
    calls = pace.requests_left
    per_call = outlook.per_token_later() / calls  # a history token's price per call: its read, its share of cold starts
    if threshold_tokens is None:
        extra, shorter = 1.0, freed * calls
    else:
        span = max(1, threshold_tokens - after)
        extra = min(1.0, max(0.0, 1.0 - freed / span))
        growth = max(1.0, turn_tokens / pace.calls_per_turn)  # tokens a call adds
        until = min(calls, max(0.0, threshold_tokens - now) / growth)  # calls until waiting compacts
        given_back = min(calls - until, span / growth - until) * max(0, threshold_tokens - now)
        shorter = freed * until - max(0.0, given_back)
    rewrite = cache.cold_tokens(p) * (p.write_5m - p.read)  # what the next request writes again if nothing changes
    saving = rewrite + shorter * per_call - extra * compaction
    if saving > 0:
        return "compact", outlook.decision("compact", saving)
    return "wait", outlook.decision("wait", -saving)


def price_reasoning_replay(
    outlook: Outlook, *, reasoning_tokens: int, drop_rewrite_tokens: int, keep_rewrite_tokens: int = 0
) -> tuple[Literal["keep", "drop"], CostDecision]:
    """Whether completed turns' reasoning should go back (`ReasoningConfig.history`), priced.

    Kept, the reasoning is `R` more tokens in every later request (read at each call, written again
    at each cold start: `Outlook.per_token_later`) and in this one; dropped, the history changes
    from the first block it removes, so what follows is written again instead of read. With `n`
    the history as kept, `c` its cold tail (`CacheState.cold_tokens`), `r_keep = max(keep_rewrite,
    min(c, n))` and `r_drop = max(drop_rewrite, min(c, n - R))` the tokens each choice writes now:

        saving of dropping = R x (read + later) + (r_keep - r_drop) x (write - read)

    Dropping wins when it saves more than nothing; a tie keeps (no prefix change). The saving grows
    with the requests to come, so a longer outlook only ever turns keep into drop.

    Args:
        outlook: The prices, the pace and the cache's state; `cache.history_tokens` counts the
            history with its reasoning kept.
        reasoning_tokens: The completed turns' reasoning tokens, as sent when kept (`R`).
        drop_rewrite_tokens: What dropping changes of the prefix the last request sent: the
            tokens from the first reasoning block it removes to the end of the history, the removed
            reasoning not counted (0: the last request sent none of it).
        keep_rewrite_tokens: What keeping changes: the tokens from the first reasoning block the
            last request left out to the end of the history, reasoning counted (0: it sent it all).

    Returns:
        `keep` or `drop`, and the decision to log.
    """
    p, cache = outlook.prices, outlook.cache
    r, kept = max(0, reasoning_tokens), cache.history_tokens
    cold = cache.cold_tokens(p)
    write_keep = max(keep_rewrite_tokens, min(cold, kept))
    write_drop = max(drop_rewrite_tokens, min(cold, max(0, kept - r)))
    saving = r * (p.read + outlook.per_token_later()) + (write_keep - write_drop) * (p.write_5m - p.read)
    if saving > 0:
        return "drop", outlook.decision("reasoning_drop", saving)
    kept_bill = outlook.decision("reasoning_keep", 0.0)  # keeping is doing nothing; dropping costs `-saving` more
    return "keep", msgspec.structs.replace(kept_bill, expected_nothing=round(kept_bill.expected - saving, 1))


_WORDS: Final = {
    "prune": ("prune", "keeping everything"),
    "keep": ("keep everything", ""),
    "clear_tool_uses": ("clear on the server (context editing)", "keeping everything"),
    "compact": ("compact now", "waiting for the threshold"),
    "wait": ("wait for the threshold", "compacting now"),
    "ttl_5m": ("5-minute TTL", "with the 1-hour TTL"),
    "ttl_1h": ("1-hour TTL", "with the 5-minute TTL"),
    "ttl_30m": ("30-minute TTL", "with the 12-hour TTL"),
    "ttl_12h": ("12-hour TTL", "with the 30-minute TTL"),
    "reasoning_drop": ("drop completed turns' reasoning", "sending it back"),
    "reasoning_keep": ("send completed turns' reasoning back", "dropping it"),
    "server_compaction": ("compacted by the provider", "with Lamina's summariser"),
    "lamina_compaction": ("compacted by Lamina's summariser", "with the provider's compaction"),
    "lamina_cached_compaction": ("summarised on the session's cached prefix", "the next cheapest way"),
    "prewarm": ("pre-warm the cache", "not pre-warming"),
    "no_prewarm": ("no pre-warm", "pre-warming"),
}
"""Per action: its name, and the alternative its `expected_nothing` prices (keeping has none: it is doing nothing)."""


def describe_decision(decision: CostDecision) -> str:
    """A logged decision in words, its figures as `lamina context --session` prints them (base-price tokens).

    For example `prune: expected 12,345 base-price tokens against 20,000 keeping everything,
    38 calls ahead, cache cold, re-read chance 20%`. The alternative is the one the decision was
    weighed against: keeping everything for a prune, the other TTL for a turn's TTL (none where
    the provider has one lifetime), waiting for the threshold or compacting now for a compaction; an action this
    version does not know is weighed against doing nothing.
    """
    d = decision
    named, alternative = _WORDS.get(d.action, (d.action, "doing nothing"))
    reason = d.reason if isinstance(d.reason, str) else ""
    if reason and d.expected == d.expected_nothing == 0:  # chosen without figures: a setting, a model without it
        return f"{named}: {reason}"
    words = [f"{named}: expected {d.expected:,.0f} base-price tokens"]
    if d.action == "keep":
        words.append("no prune expected to cost less")
    elif d.action in ("ttl_5m", "ttl_30m") and d.expected == d.expected_nothing:  # the provider has one lifetime
        words.append("the provider has no other TTL")
    else:
        words[0] += f" against {d.expected_nothing:,.0f} {alternative}"
    if d.horizon > 0:
        words.append(f"{d.horizon:,} call{'s' if d.horizon != 1 else ''} ahead")
    if d.cache:
        words.append(f"cache {d.cache}")
    if d.action in ("prune", "keep", "clear_tool_uses") or d.reread_chance:
        words.append(f"re-read chance {d.reread_chance:.0%}")
    return ", ".join([*words, reason] if reason else words)


DecisionOn: TypeAlias = Literal["prune", "compaction", "compaction backend", "turn TTL"]


_DEFAULT_TURN_TTLS: Final = frozenset({"ttl_1h", "ttl_30m"})
"""A turn's TTL decision that kept its provider's default: Anthropic's 1 hour, OpenAI's 30 minutes."""


def kept_default_ttl(on: str, action: str) -> bool:
    """Whether a decision (what it was on, its action) kept a turn's default TTL: reports leave those out."""
    return on == "turn TTL" and action in _DEFAULT_TURN_TTLS


def decision_on(entry: LogEntry) -> tuple[DecisionOn, CostDecision] | None:
    """The priced decision `entry` logged and what it was on (a prune, a compaction, a turn's TTL), else None."""
    match entry:
        case ToolOutputPruned(decision=CostDecision() as d):  # Lamina's prune or the server's clearing
            return "prune", d
        case CompactionBoundary(decision=CostDecision() as d):
            return "compaction", d
        case TurnRecord(decision=CostDecision() as d):
            return "turn TTL", d
        case _:
            return None


def decisions_on(entry: LogEntry) -> tuple[tuple[DecisionOn, CostDecision], ...]:
    """Every decision `entry` logged: `decision_on`'s, then a compaction's backend (who wrote its summary, and why)."""
    found = decision_on(entry)
    first = () if found is None else (found,)
    if isinstance(entry, CompactionBoundary) and isinstance(entry.backend, CostDecision):
        return (*first, ("compaction backend", entry.backend))
    return first
