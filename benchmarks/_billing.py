"""What the cache benchmark bills with: our run of a script on both formats, a peer's bill, the goal figures.

The goal figures (`goal_figures`) are the same set for every scenario and target, named
`<figure>_<scenario>_<target>` and tagged with both: billed input against each peer of that
format, the default policy against `prune=None`, cache efficiency, and the bill over the floor
(each token the session needs written once at the cheapest write price: the last request of the
never-pruned run holds every one of them). `bill_breakdown` splits a bill by what caused it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from benchmarks import Figure
from benchmarks._peers import PeerRun
from benchmarks._scenario import ScriptedTurn, scripted_session
from lamina.cachesim import (
    AnthropicCacheRules,
    AnthropicCacheSimulator,
    CacheSimulator,
    CacheSummary,
    CacheUsage,
    OpenAICacheRules,
    OpenAICacheSimulator,
    TimedRequest,
    summarise,
)
from lamina.compaction import DEFAULT_PRUNE, PrunePolicy
from lamina.placement import AnthropicTarget, OpenAIResponsesTarget, render
from lamina.pricing import CachePrices

ANTHROPIC: Final = AnthropicTarget(model="claude-sonnet-5")
RESPONSES: Final = OpenAIResponsesTarget(model="gpt-5")
FIRST_BYTE_S: Final = 2.0
TARGETS: Final = ("anthropic", "responses")
"""The two formats every goal figure is given for: Anthropic Messages and OpenAI Responses."""
PLACEMENTS: Final = {"anthropic": ANTHROPIC, "responses": RESPONSES}
PRICES: Final = {target: CachePrices.for_target(placement) for target, placement in PLACEMENTS.items()}
"""The prices each format's session decides with: its provider's cache rules, as an agent on it does."""
_PRUNED_MARK: Final = "call it again if you need it]"
"""The end of a pruned result's note (`lamina.compaction.pruned_note`)."""
_GAP_S: Final = 300.0


def simulator_for(target: str) -> CacheSimulator:
    """A fresh cache simulator for `target` ("anthropic" or "responses")."""
    return AnthropicCacheSimulator() if target == "anthropic" else OpenAICacheSimulator()


def write_price(target: str) -> float:
    """The cheapest price of writing a token to the cache, in base-price tokens (OpenAI's writes are free)."""
    return AnthropicCacheRules().write_5m_multiplier if target == "anthropic" else 1.0


def read_price(target: str) -> float:
    """The price of reading a token from the cache, in base-price tokens."""
    return AnthropicCacheRules().read_multiplier if target == "anthropic" else OpenAICacheRules().read_multiplier


@dataclass(frozen=True, slots=True)
class OurCall:
    """One model call of our run: when, in which turn, and what had just happened."""

    t_start: float
    turn: int
    after_reread: bool
    pruned: int
    """How many pruned results' notes the request shows."""


@dataclass(frozen=True, slots=True)
class OurRun:
    """Our runs of a script, one per target: each call, and its usage."""

    calls: Mapping[str, tuple[OurCall, ...]]
    usages: Mapping[str, tuple[CacheUsage, ...]]

    def rereads(self, target: str) -> int:
        """How many times the scripted model read a file again on `target`'s run."""
        return sum(1 for c in self.calls[target] if c.after_reread)

    def summary(self, target: str) -> CacheSummary:
        """The bill on `target`."""
        return summarise(self.usages[target])

    def floor(self, target: str) -> float:
        """Each token of the last request written once at the cheapest write price (meaningful unpruned)."""
        return self.usages[target][-1].total * write_price(target) if self.usages[target] else 0.0


def our_run(script: Sequence[ScriptedTurn], prune: PrunePolicy | None = DEFAULT_PRUNE) -> OurRun:
    """Run `script` through a context engine (old output pruned by `prune`) once per target, and bill each run.

    Each target's run decides with its provider's prices (`PRICES`), so the two may prune differently.
    """
    usages: dict[str, tuple[CacheUsage, ...]] = {}
    calls: dict[str, list[OurCall]] = {}
    for target in TARGETS:
        simulator, placement = simulator_for(target), PLACEMENTS[target]
        billed: list[CacheUsage] = []
        calls[target] = []
        for call in scripted_session(script, prune=prune, cache_prices=PRICES[target]):
            body = dict(render(call.turn, placement, continuation=call.engine.continuation(call.turn)))
            billed.append(simulator.submit(TimedRequest(call.t_start, body, call.t_start + FIRST_BYTE_S)))
            pruned = str(body["messages" if target == "anthropic" else "input"]).count(_PRUNED_MARK)
            calls[target].append(OurCall(call.t_start, call.turn_index, call.after_reread, pruned))
        usages[target] = tuple(billed)
    return OurRun({t: tuple(c) for t, c in calls.items()}, usages)


def peer_bill(run: PeerRun, simulator: CacheSimulator) -> list[CacheUsage]:
    """A peer's captured requests billed by `simulator` on the scripted clock."""
    return [simulator.submit(TimedRequest(r.t_start, r.body, r.t_start + FIRST_BYTE_S)) for r in run.requests]


_PEER_TARGET: Final = {"pi": "anthropic", "claude_code": "anthropic", "codex": "responses"}


def goal_figures(
    scenario: str,
    target: str,
    ours: CacheSummary,
    unpruned: CacheSummary,
    floor: float,
    peers: Mapping[str, CacheSummary],
) -> list[Figure]:
    """The goal figures of one scenario on one target; `peers` by slug (`pi`, `claude_code`, `codex`)."""

    def figure(base: str, value: float, unit: str = "ratio", note: str = "") -> Figure:
        return Figure(f"{base}_{scenario}_{target}", value, unit, note=note, scenario=scenario, target=target)

    bill = ours.weighted_tokens
    figures = [figure("billed_input_tokens", round(bill), "tokens")]
    for slug in ("pi", "claude_code", "codex"):
        if _PEER_TARGET[slug] == target and slug in peers:
            theirs = peers[slug].weighted_tokens
            note = f"{bill:,.0f} / {theirs:,.0f} base-price tokens"
            figures.append(figure(f"billed_input_vs_{slug}_ratio", round(bill / theirs, 4), note=note))
    figures += [
        figure(
            "default_vs_unpruned_ratio",
            round(bill / unpruned.weighted_tokens, 4),
            note=f"{bill:,.0f} / {unpruned.weighted_tokens:,.0f} with prune=None",
        ),
        figure("efficiency", round(ours.cache_efficiency, 4)),
        figure("floor_tokens", round(floor), "tokens", note="each needed token written once"),
        figure("floor_ratio", round(bill / floor, 2) if floor else 0.0, note="the bill over the floor"),
    ]
    return figures


def _cause(i: int, calls: Sequence[OurCall], edit_turn: int | None) -> str:
    """Why call `i` writes what it writes: the first in priority order of the events before it."""
    if i == 0:
        return "first"
    now, before = calls[i], calls[i - 1]
    if now.t_start - before.t_start > _GAP_S:
        return "gap"
    if now.pruned > before.pruned:
        return "prune"
    if now.turn == edit_turn and before.turn != edit_turn:
        return "edit"
    return "reread" if now.after_reread else "growth"


CAUSES: Final = ("first", "gap", "prune", "edit", "reread", "growth")


def bill_breakdown(scenario: str, policy: str, run: OurRun, target: str, edit_turn: int | None) -> list[Figure]:
    """Where a bill goes, in base-price tokens: by price (reads, writes, uncached), and what was sent anew by cause.

    The first four add up to the bill. The rest splits what was not read from the cache (written
    or uncached) by the call that sent it, the first cause that applies: the session's first call,
    the first after an idle gap longer than 5 minutes, the first after a prune, the edit turn's
    first call, the call after a re-read, or the conversation's growth.
    """
    usages = run.usages[target]
    summary = summarise(usages)
    rules = AnthropicCacheRules()
    read = summary.read * read_price(target)
    writes = (summary.write_5m * rules.write_5m_multiplier, summary.write_1h * rules.write_1h_multiplier)
    new: dict[str, float] = dict.fromkeys(CAUSES, 0.0)
    for i, usage in enumerate(usages):
        new[_cause(i, run.calls[target], edit_turn)] += usage.weighted_tokens - usage.read * read_price(target)
    prefix = f"bill_{scenario}_{policy}_{target}"
    figures = [
        Figure(f"{prefix}_reads", round(read), "tokens", note=f"{summary.read:,} tokens read from the cache"),
        Figure(f"{prefix}_writes_5m", round(writes[0]), "tokens", note=f"{summary.write_5m:,} tokens written, 5 min"),
        Figure(f"{prefix}_writes_1h", round(writes[1]), "tokens", note=f"{summary.write_1h:,} tokens written, 1 h"),
        Figure(f"{prefix}_uncached", round(summary.uncached), "tokens", note="neither read nor written"),
    ]
    return figures + [
        Figure(f"{prefix}_new_{cause}", round(cost), "tokens", note="not read from the cache, base price")
        for cause, cost in new.items()
    ]


PeerRunner = Callable[..., PeerRun]
