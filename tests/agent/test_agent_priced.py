"""The agent's context decisions priced with its provider's cache rules, and by the clock, against the wire server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from lamina.agent import Agent, AgentOptions, open_agent
from lamina.compaction import PrunePolicy
from lamina.pricing import CachePrices
from lamina.providers import Provider, RetryPolicy
from lamina.session import CompactionBoundary, CostDecision, ToolOutputPruned, TurnRecord
from tests.support.engine import Clock, memory_store
from tests.wire.fixtures import anthropic_provider, openai_chat_provider, openai_responses_provider
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

_THRESHOLD = 30_000
"""The context's tokens at which these sessions compact (a small window's worth, so a few turns reach it)."""


async def _no_sleep(_: float) -> None:
    return None


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("Run the tests before you finish.\n")
    (root / "big.py").write_text("".join(f"value_{n} = compute({n}, limit=42)  # a line of code\n" for n in range(900)))
    return root


def _agent(tmp_path: Path, workspace: Path, provider: Provider, clock: Clock, **options: Any) -> Agent:
    store = memory_store(tmp_path, clock)
    retry = RetryPolicy(sleep=_no_sleep)
    return open_agent(
        store, provider, workspace=workspace, options=AgentOptions(retry=retry, clock=clock, mode="execute", **options)
    )


def _boundaries(agent: Agent) -> list[CompactionBoundary]:
    return [e for e in agent.session.entries() if isinstance(e, CompactionBoundary)]


async def _turn(agent: Agent, wire: WireServer, clock: Clock, n: int, *, gap_minutes: float) -> None:
    clock.advance(gap_minutes)
    wire.script(Reply(text=f"Answer {n}: " + "detail " * 250))
    await agent.run_turn(f"Question {n}: keep total() correct. " + "context " * 500)


@pytest.mark.slow
async def test_a_session_in_the_band_compacts_after_a_long_gap_and_not_while_the_cache_is_warm(
    tmp_path: Path, workspace: Path, wire: WireServer
) -> None:
    clock = Clock()
    async with anthropic_provider(wire) as provider:
        agent = _agent(tmp_path, workspace, provider, clock, keep_tokens=2_000, prune=None)
        agent.compaction_reserve = provider.capabilities.context_window - _THRESHOLD
        n = 0
        while agent.engine.compactor.calibrated_context_tokens() < 0.8 * _THRESHOLD:  # half a minute apart: always warm
            await _turn(agent, wire, clock, n, gap_minutes=0.5)
            n += 1
        assert (
            agent.engine.compactor.calibrated_context_tokens() < _THRESHOLD - 4_000
        )  # in the band, a turn below the threshold
        await _turn(agent, wire, clock, n, gap_minutes=0.5)
        assert _boundaries(agent) == []  # warm: compacting now would throw away the history just written

        clock.advance(120)  # two hours: the cache holds none of it any more
        wire.script(Reply(text="## Goal\nKeep total() correct.\n## Next steps\n- continue"))  # the summary
        wire.script(Reply(text="Back after the break."))
        outcome = await agent.run_turn("Where were we?")
        assert outcome.text == "Back after the break."
        (boundary,) = _boundaries(agent)
        assert boundary.trigger == "threshold" and boundary.summary.startswith("## Goal")
        assert isinstance(boundary.decision, CostDecision)
        assert boundary.decision.action == "compact" and boundary.decision.cache == "cold"
        assert boundary.decision.expected < boundary.decision.expected_nothing
        assert boundary.tokens_before < _THRESHOLD  # below the threshold: the cost model's call, not the rule's
        assert [r.status for r in wire.requests] == [200] * len(wire.requests)
        agent.close()


@pytest.mark.slow
async def test_without_the_band_the_same_session_waits_for_the_threshold(
    tmp_path: Path, workspace: Path, wire: WireServer
) -> None:
    clock = Clock()
    async with anthropic_provider(wire) as provider:
        agent = _agent(tmp_path, workspace, provider, clock, keep_tokens=2_000, prune=None, compaction_band=None)
        agent.compaction_reserve = provider.capabilities.context_window - _THRESHOLD
        n = 0
        while agent.engine.compactor.calibrated_context_tokens() < 0.8 * _THRESHOLD:
            await _turn(agent, wire, clock, n, gap_minutes=0.5)
            n += 1
        clock.advance(120)
        await _turn(agent, wire, clock, n, gap_minutes=0)
        assert _boundaries(agent) == []
        agent.close()


_PRUNE = PrunePolicy(protect_turns=2, protect_tokens=0, minimum_tokens=1_000)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("make", "prices", "pruned", "ttl"),
    [
        (anthropic_provider, CachePrices.anthropic(), False, "1h"),
        (openai_responses_provider, CachePrices.openai(), True, None),  # one cache lifetime: no TTL to choose
        (openai_chat_provider, CachePrices.openai(), True, None),
    ],
    ids=["anthropic", "openai-responses", "openai-chat"],
)
async def test_each_session_decides_with_its_providers_prices(
    tmp_path: Path, workspace: Path, wire: WireServer, make: Any, prices: CachePrices, pruned: bool, ttl: str | None
) -> None:
    clock = Clock()
    async with make(wire) as provider:
        agent = _agent(tmp_path, workspace, provider, clock, prune=_PRUNE)
        assert agent.engine.compactor.cache_prices == prices
        wire.script(
            Reply(text="Hello."),
            Reply(text="Reading.", tool_calls=[ToolUse("Read", {"path": "big.py"})]),
            Reply(text="Read it."),
            Reply(text="Noted."),
            Reply(text="Back."),
        )
        await agent.run_turn("Step 0")
        clock.advance(0.5)
        await agent.run_turn("Step 1: read big.py")  # its result may go from the turn after next on
        clock.advance(0.5)
        await agent.run_turn("Step 2 " + "context " * 1_500)
        # twenty minutes: Anthropic's 1-hour turn breakpoint still holds the history up to step 2, which a prune
        # would rewrite from the read on; OpenAI's cache has one lifetime, five minutes idle: it holds nothing
        clock.advance(20)
        await agent.run_turn("Step 3")
        prunes = [e for e in agent.session.entries() if isinstance(e, ToolOutputPruned)]
        assert bool(prunes) is pruned
        if prunes:
            (prune,) = prunes
            assert isinstance(prune.decision, CostDecision) and prune.decision.cache == "cold"
        records = [e for e in agent.session.entries() if isinstance(e, TurnRecord)]
        assert {e.turn_ttl if isinstance(e.turn_ttl, str) else None for e in records} == {ttl}
        assert all(isinstance(e.decision, CostDecision) == (ttl is not None) for e in records)  # logged when decided
        agent.close()


@pytest.mark.slow
async def test_the_prices_follow_a_provider_switched_mid_session(
    tmp_path: Path, workspace: Path, wire: WireServer
) -> None:
    clock = Clock()
    async with anthropic_provider(wire) as anthropic, openai_responses_provider(wire) as responses:
        agent = _agent(tmp_path, workspace, anthropic, clock)
        assert agent.engine.compactor.cache_prices == CachePrices.anthropic()
        wire.script(Reply(text="On Anthropic."), Reply(text="On Responses."))
        await agent.run_turn("First")
        agent.provider = responses  # what `/model openai-responses:gpt-5` does
        await agent.run_turn("Second")
        assert agent.engine.compactor.cache_prices == CachePrices.openai()
        first, second = (e for e in agent.session.entries() if isinstance(e, TurnRecord))
        assert first.turn_ttl == "1h"  # decided with Anthropic's rules
        assert second.turn_ttl is msgspec.UNSET and second.decision is msgspec.UNSET  # OpenAI's: nothing to choose
        agent.close()


def test_a_target_gets_its_providers_prices() -> None:
    from lamina.placement import AnthropicTarget, OpenAIChatTarget, OpenAIResponsesTarget, SdkManagedTarget

    assert CachePrices.for_target(AnthropicTarget("claude-sonnet-5")) == CachePrices.anthropic()
    assert CachePrices.for_target(SdkManagedTarget()) == CachePrices.anthropic()
    assert CachePrices.for_target(OpenAIResponsesTarget("gpt-5")) == CachePrices.openai()
    assert CachePrices.for_target(OpenAIChatTarget("local-model")) == CachePrices.openai()  # a compatible server
    assert not CachePrices.openai().choose_ttl and CachePrices.openai().write_5m == 1.0
