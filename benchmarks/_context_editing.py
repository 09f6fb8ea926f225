"""The cache benchmark's Anthropic scenarios with the provider's context editing on and off (`--context-editing`).

Each scenario runs through a context engine whose prunes may choose the server's clearing
(`server`: whenever it saves; `priced`: when it is the cheapest) or Lamina's prune only (`off`),
and is billed by the Anthropic cache simulator on what the model read: the results the server
clears shown as its placeholder, as the server caches them (docs/providers.md, "Context editing").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Final

from benchmarks import Figure
from benchmarks._billing import FIRST_BYTE_S, PRICES, simulator_for
from benchmarks._scenario import ScriptedTurn, scripted_session
from lamina.cachesim import TimedRequest, summarise
from lamina.compaction import server_cleared, show_server_clearing
from lamina.context import TurnContext
from lamina.placement import CLEAR_TOOL_USES, AnthropicTarget, render
from lamina.pricing import ContextEditing
from lamina.session import ToolOutputPruned

_TARGET: Final = AnthropicTarget(model="claude-sonnet-5", context_edits=frozenset({CLEAR_TOOL_USES}))
_MODES: Final[tuple[ContextEditing, ...]] = ("off", "server", "priced")


def _seen(turn: TurnContext) -> TurnContext:
    """`turn` as the model read it: the results the server clears shown as its placeholder."""
    if not server_cleared(turn.history):
        return turn
    return dataclasses.replace(turn, history=show_server_clearing(turn.history))


def _bill(script: Sequence[ScriptedTurn], mode: ContextEditing) -> tuple[float, int, int]:
    """The billed input tokens of `script` with context editing `mode`, and its prunes: Lamina's, the server's."""
    simulator = simulator_for("anthropic")
    usages = []
    prunes: dict[str, ToolOutputPruned] = {}
    for call in scripted_session(script, cache_prices=PRICES["anthropic"], context_editing=mode):
        continuation = call.engine.continuation(call.turn)
        body = dict(render(_seen(call.turn), _TARGET, continuation=continuation))
        usages.append(simulator.submit(TimedRequest(call.t_start, body, call.t_start + FIRST_BYTE_S)))
        prunes.update((e.id, e) for e in call.turn.history if isinstance(e, ToolOutputPruned))
    server = sum(1 for p in prunes.values() if p.server is not None)
    return summarise(usages).weighted_tokens, len(prunes) - server, server


def context_editing_figures(
    scenarios: dict[str, Sequence[ScriptedTurn]], *, progress: Callable[[str], None]
) -> list[Figure]:
    """Per scenario: the bill with each mode, its prunes, and each mode's bill over `off`'s."""
    figures: list[Figure] = []
    for scenario, script in scenarios.items():
        progress(f"the {scenario} session with context editing off, server and priced")
        bills: dict[str, float] = {}
        for mode in _MODES:
            billed, lamina, server = _bill(script, mode)
            bills[mode] = billed
            note = f"{lamina} Lamina prunes, {server} server clearings"
            name = f"billed_input_tokens_anthropic_context_editing_{mode}_{scenario}"
            figures.append(Figure(name, round(billed), "tokens", note=note))
        for mode in ("server", "priced"):
            figures.append(
                Figure(
                    f"billed_input_context_editing_{mode}_vs_off_ratio_{scenario}",
                    round(bills[mode] / bills["off"], 4) if bills["off"] else 0.0,
                    "ratio",
                    note=f"context editing {mode} / off, Anthropic, same session",
                )
            )
    return figures
