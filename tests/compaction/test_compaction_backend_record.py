"""Which backend wrote a compaction's summary, and why, on the boundary; the budget counts the block as sent."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import msgspec

from lamina.agent import Agent, AgentOptions, open_agent
from lamina.cachesim import AnthropicCacheSimulator, TimedRequest
from lamina.compaction import DeterministicSummariser, ServerSummariser
from lamina.placement import AnthropicTarget, render
from lamina.pricing import decisions_on, describe_decision
from lamina.providers import Capabilities, RetryPolicy
from lamina.reports import budget_of_turn
from lamina.session import CompactionBoundary, CostDecision, LocalSessionStore, server_block
from lamina.tokens import DEFAULT_ESTIMATOR
from tests.support.engine import memory_store
from tests.wire.compaction import Compact
from tests.wire.fixtures import anthropic_provider
from tests.wire.script import Reply
from tests.wire.server import WireServer

ANTHROPIC = Capabilities(server_compaction=frozenset({"summarize"}), vision=True)


async def _no_sleep(_: float) -> None:
    return None


def _summariser(provider: object, backend: str) -> ServerSummariser:
    return ServerSummariser(
        provider,  # type: ignore[arg-type]
        backend=backend,  # type: ignore[arg-type]
        fallback=DeterministicSummariser(),
        retry=RetryPolicy(max_attempts=1, sleep=_no_sleep),
    )


async def _compacted(agent: Agent) -> CompactionBoundary:
    await agent.run_turn("Question 0: never touch the tests folder. " + "context " * 200)
    for n in (1, 2):
        await agent.run_turn(f"Question {n}: " + "context " * 200)
    outcome = await agent.compact()
    assert outcome.boundary is not None
    return outcome.boundary


def _backend(boundary: CompactionBoundary) -> CostDecision:
    assert isinstance(boundary.backend, CostDecision)
    return boundary.backend


async def test_the_boundary_says_the_provider_compacted_because_the_setting_says_so(
    tmp_path: Path, wire: WireServer
) -> None:
    wire.script(*[Reply(text=f"Answer {n}: " + "detail " * 200) for n in range(3)])
    async with anthropic_provider(wire, capabilities=ANTHROPIC) as provider:
        options = AgentOptions(keep_tokens=300, summariser=_summariser(provider, "server"))
        with open_agent(memory_store(tmp_path, time.time), provider, workspace=tmp_path, options=options) as agent:
            boundary = await _compacted(agent)
    backend = _backend(boundary)
    assert backend.action == "server_compaction" and server_block(boundary.server) is not None
    assert describe_decision(backend) == "compacted by the provider: the compaction backend setting is `server`"
    assert [on for on, _ in decisions_on(boundary)] == ["compaction backend"]


async def test_a_failed_server_compaction_is_recorded_as_lamina_s_with_the_reason(
    tmp_path: Path, wire: WireServer
) -> None:
    wire.script(*[Reply(text=f"Answer {n}: " + "detail " * 200) for n in range(3)])
    wire.compactions.append(Compact(content=None))
    async with anthropic_provider(wire, capabilities=ANTHROPIC) as provider:
        options = AgentOptions(keep_tokens=300, summariser=_summariser(provider, "server"))
        with open_agent(memory_store(tmp_path, time.time), provider, workspace=tmp_path, options=options) as agent:
            boundary = await _compacted(agent)
    backend = _backend(boundary)
    assert backend.action == "lamina_compaction" and server_block(boundary.server) is None
    assert "server compaction failed: the provider returned no summary" in describe_decision(backend)


async def test_auto_records_the_priced_choice_and_a_model_without_the_form_says_so(
    tmp_path: Path, wire: WireServer
) -> None:
    wire.script(*[Reply(text=f"Answer {n}: " + "detail " * 200) for n in range(6)])
    async with anthropic_provider(wire, capabilities=ANTHROPIC) as provider:
        options = AgentOptions(keep_tokens=300, summariser=_summariser(provider, "auto"))
        with open_agent(memory_store(tmp_path, time.time), provider, workspace=tmp_path, options=options) as agent:
            priced = _backend(await _compacted(agent))
    async with anthropic_provider(wire, capabilities=Capabilities()) as provider:
        options = AgentOptions(keep_tokens=300, summariser=_summariser(provider, "server"))
        with open_agent(memory_store(tmp_path, time.time), provider, workspace=tmp_path, options=options) as agent:
            unable = _backend(await _compacted(agent))
    assert priced.action in ("server_compaction", "lamina_compaction")
    assert priced.expected <= priced.expected_nothing and priced.horizon > 0  # never dearer than the other
    assert isinstance(priced.reason, msgspec.UnsetType)
    assert unable.action == "lamina_compaction"
    assert describe_decision(unable).endswith("the model has no server compaction Lamina sends")


async def test_an_older_boundary_without_a_backend_reads_as_before(tmp_path: Path) -> None:
    old = b'{"type":"compaction","id":"b","parent_id":null,"ts":1.0,"summary":"s","first_kept_id":null,'
    old += b'"tokens_before":10,"tokens_after":5,"trigger":"manual"}'
    entry = msgspec.json.decode(old, type=CompactionBoundary)
    assert isinstance(entry, CompactionBoundary) and isinstance(entry.backend, msgspec.UnsetType)
    assert decisions_on(entry) == ()


async def test_the_budget_counts_the_block_as_sent_not_the_summary(tmp_path: Path, wire: WireServer) -> None:
    wire.script(*[Reply(text=f"Answer {n}: " + "detail " * 200) for n in range(3)])
    store = LocalSessionStore(tmp_path / "store")
    async with anthropic_provider(wire, capabilities=ANTHROPIC) as provider:
        options = AgentOptions(keep_tokens=300, summariser=_summariser(provider, "server"))
        with open_agent(store, provider, workspace=tmp_path, options=options) as agent:
            boundary = await _compacted(agent)
            turn = agent.engine.preview_turn("next")
    block = server_block(boundary.server)
    assert block is not None
    sent = budget_of_turn(turn)
    other = budget_of_turn(turn, owner="openai")  # another provider is sent the summary
    history = next(t for t in sent.tiers if t.tier.name == "HISTORY")
    assert "compaction block" in history.items
    assert "compaction block" not in next(t for t in other.tiers if t.tier.name == "HISTORY").items
    # the block's tokens as the cache simulator counts them: its first request block, as sent
    body: dict[str, Any] = dict(render(turn, AnthropicTarget(model="claude-sonnet-5")))  # type: ignore[arg-type]
    sent_block = body["messages"][0]["content"][0]
    assert sent_block == msgspec.json.decode(block.block)
    first = {"role": "assistant", "content": [sent_block]}
    alone = AnthropicCacheSimulator().submit(TimedRequest(0.0, {"model": "m", "messages": [first]}))
    summary = sum(p.token_count(DEFAULT_ESTIMATOR) for p in turn.parts() if p.key == "compaction.summary")
    assert not turn.server_prelude  # no file was read: no ledger follows the block
    assert sent.total - other.total == alone.total - summary  # the block as the simulator bills it, not the summary


def test_every_instruction_survives_five_server_compactions(tmp_path: Path) -> None:
    from benchmarks._server_backend import server_fidelity

    assert server_fidelity(tmp_path) == 1.0  # the server's summary keeps nothing: the lane after the block does
