"""Server compaction against Lamina's summariser: the cache benchmark's scenario compacted both ways, and fidelity.

Both backends run through our providers against the test suite's wire server: Lamina's
summariser (`ProviderSummariser`, the server scripted with a summary of the template's size) and
the provider's own (`ServerSummariser(backend="server")`: Anthropic's standalone `summarize`,
the block signed by the server). The scripted session (`benchmarks._scenario`) is compacted at a
third and at two thirds of its turns; every request, the compaction requests included, is billed
by the cache simulator on the scripted clock, Anthropic's rules.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Literal

from tests.wire.fixtures import anthropic_provider
from tests.wire.script import Reply
from tests.wire.server import WireServer

from benchmarks import Figure, _fidelity
from benchmarks._billing import ANTHROPIC, FIRST_BYTE_S, PRICES
from benchmarks._scenario import ScriptedTurn, scripted_session
from lamina.cachesim import AnthropicCacheSimulator, CacheUsage, TimedRequest, summarise
from lamina.compaction import DeterministicSummariser, ProviderSummariser, ServerSummariser, SummaryResult
from lamina.engine import ContextEngine
from lamina.placement import render
from lamina.providers import Capabilities
from lamina.session import CompactionBoundary, CostDecision, Ledger, LogEntry, ServerCompaction

Backend = Literal["lamina", "server"]
CAPABILITIES: Final = Capabilities(server_compaction=frozenset({"summarize"}))
_SUMMARY: Final = (
    "## Goal\nFix the failing checks module by module.\n\n## Progress\n### Done\n"
    + "".join(f"- Fixed module_{n}.py: the check passes.\n" for n in range(40))
    + "\n## Next steps\n- Continue with the next module."
)
"""What the scripted model answers Lamina's summary request with (a summary of about the template's size)."""
KEEP_TOKENS: Final = 4_000


class WireSummariser(ServerSummariser):
    """A `ServerSummariser` that opens a fresh provider on the wire server for each compaction.

    Each compaction runs in its own event loop (`asyncio.run`), and an SDK client's connections
    belong to the loop that opened them.
    """

    def __init__(self, wire: WireServer, backend: Backend) -> None:
        super().__init__(_Placeholder(), backend=backend, fallback=DeterministicSummariser())  # type: ignore[arg-type]
        self.wire = wire

    async def compact_server(
        self,
        previous: tuple[ServerCompaction | None, str | None],
        entries: Sequence[LogEntry],
        ledger: Ledger,
        *,
        focus: str | None,
        outlook: Any = None,
        rewrite_tokens: int = 0,
    ) -> tuple[SummaryResult, CostDecision]:
        """Compact as `ServerSummariser` does, over a provider opened for this call only."""
        if self.backend == "lamina":
            self.wire.script(Reply(text=_SUMMARY))
        async with anthropic_provider(self.wire, capabilities=CAPABILITIES) as provider:
            self.provider = provider
            self.fallback = ProviderSummariser(provider)
            return await super().compact_server(
                previous, entries, ledger, focus=focus, outlook=outlook, rewrite_tokens=rewrite_tokens
            )


class _Placeholder:
    """Stands for the provider until a compaction opens one."""

    capabilities = CAPABILITIES


def compacting(wire: WireServer, backend: Backend, turns: Sequence[int]) -> Callable[[ContextEngine, int], None]:
    """A hook compacting the engine before each of `turns`, with `backend`."""
    summariser = WireSummariser(wire, backend)

    def compact(engine: ContextEngine, turn: int) -> None:
        if turn in turns:
            outcome = asyncio.run(engine.compactor.compact(summariser, trigger="threshold", keep_tokens=KEEP_TOKENS))
            assert outcome.status == "compacted", outcome.message
            assert outcome.summary_by == ("server" if backend == "server" else "model"), outcome.message

    return compact


def _bill(script: Sequence[ScriptedTurn], backend: Backend, turns: Sequence[int]) -> tuple[list[CacheUsage], int, int]:
    """The session's requests and its compaction requests, billed in time order; the compactions' input tokens."""
    simulator = AnthropicCacheSimulator()
    usages: list[CacheUsage] = []
    with WireServer() as wire:
        seen = 0
        boundary_tokens = 0
        for call in scripted_session(
            script, cache_prices=PRICES["anthropic"], before_turn=compacting(wire, backend, turns)
        ):
            for received in wire.requests[seen:]:  # a compaction's own request, just before this call
                body = dict(received.body)
                body.setdefault("model", ANTHROPIC.model)
                usages.append(simulator.submit(TimedRequest(call.t_start - 30.0, body, call.t_start - 20.0)))
            seen = len(wire.requests)
            body = dict(render(call.turn, ANTHROPIC, continuation=call.engine.continuation(call.turn)))
            usages.append(simulator.submit(TimedRequest(call.t_start, body, call.t_start + FIRST_BYTE_S)))
            boundary = call.engine.boundary
            if isinstance(boundary, CompactionBoundary):
                boundary_tokens = boundary.tokens_after
        compactions = sum(1 for r in wire.requests if r.status == 200)
    return usages, compactions, boundary_tokens


def server_fidelity(root: Path) -> float:
    """The fidelity scenario (`benchmarks._fidelity`) compacted five times by the provider: the share kept verbatim."""
    with WireServer() as wire:
        last = _fidelity.run(root, WireSummariser(wire, "server"))[-1]
        used = sum(1 for r in wire.requests if "compaction" in r.body and r.status == 200)
    assert used == 5, f"{used} of 5 compactions were the server's"
    return len(last.verbatim) / len(last.expected)


def server_compaction_figures(script: Sequence[ScriptedTurn], *, progress: Callable[[str], None]) -> list[Figure]:
    """The coding scenario compacted twice by each backend on Anthropic: billed input and the ratio."""
    turns = (len(script) // 3, 2 * len(script) // 3)
    progress(f"the session compacted at turns {turns[0]} and {turns[1]}: Lamina's summariser, then the server's")
    bills: dict[str, float] = {}
    figures: list[Figure] = []
    for backend in ("lamina", "server"):
        usages, made, _ = _bill(script, backend, turns)
        bill = summarise(usages).weighted_tokens
        bills[backend] = bill
        figures.append(
            Figure(
                f"billed_input_tokens_coding_anthropic_compaction_{backend}",
                round(bill),
                "tokens",
                note=f"{made} compaction request(s) billed with the session",
            )
        )
    figures.append(
        Figure(
            "billed_input_server_vs_lamina_compaction_ratio",
            round(bills["server"] / bills["lamina"], 4) if bills["lamina"] else 0.0,
            "ratio",
            note="the provider's compaction / Lamina's summariser, same session, Anthropic",
        )
    )
    return figures
