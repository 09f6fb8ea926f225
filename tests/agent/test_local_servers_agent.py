"""The agent loop through the local servers' recorded shapes: tool calls, windows, a prefix that cannot fit."""

from __future__ import annotations

from pathlib import Path

import pytest

from lamina.agent import prefix_problem
from lamina.agent._priced import CompactionTiming
from lamina.compaction import DEFAULT_RESERVE
from lamina.context import Tier
from lamina.errors import ContextOverflowError
from lamina.providers import Capabilities, OpenAIChatProvider, discover_capabilities, provider_from_spec
from lamina.reports import BudgetReport, TierTokens
from tests.support.quick_agent import quick_agent
from tests.wire.local_servers import KINDS, Kind, play
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "notes.md").write_text("# notes\n")
    return tmp_path / "ws"


def _compat(wire: WireServer) -> OpenAIChatProvider:
    provider = provider_from_spec(f"openai-compat:{wire.openai_url}#smollm2")
    assert isinstance(provider, OpenAIChatProvider)
    return provider


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
async def test_a_tool_call_turn_runs_through_each_server(
    tmp_path: Path, workspace: Path, wire: WireServer, kind: Kind
) -> None:
    local = play(wire, kind, n_ctx=32768)
    wire.script(Reply(text="Looking.", tool_calls=[ToolUse("Glob", {"pattern": "*.md"})]), Reply(text="Two files."))
    async with _compat(wire) as provider:
        await discover_capabilities(provider)
        agent = quick_agent(tmp_path, workspace, provider)
        outcome = await agent.run_turn("What is here?")
    assert outcome.text == "Two files." and outcome.tools_run == ("Glob",)
    assert local.template_failures == 0 and [r.status for r in wire.requests if r.api == "chat"] == [200, 200]
    first = next(r.body for r in wire.requests if r.api == "chat")
    assert first["tool_choice"] == "auto" and first["max_tokens"] == 32768 // 4
    assert all(isinstance(m["content"], str) for m in first["messages"] if m["role"] != "assistant")


@pytest.mark.slow
async def test_a_prefix_that_cannot_fit_the_server_is_said_as_such(
    tmp_path: Path, workspace: Path, wire: WireServer
) -> None:
    play(wire, "llama.cpp", n_ctx=1024)
    wire.script(Reply(text="never sent"))
    async with _compat(wire) as provider:
        agent = quick_agent(tmp_path, workspace, provider)
        with pytest.raises(ContextOverflowError) as raised:
            await agent.run_turn("hi")
    said = str(raised.value)
    assert "system prompt and tools alone are about" in said and "context window is 1,024 tokens" in said
    assert "--preset mini" in said and "exceeds the available context size" in said


def test_the_default_reserve_scales_with_a_small_window() -> None:
    timing = CompactionTiming(DEFAULT_RESERVE)
    assert timing.threshold(8192) == 8192 - 2048 and not timing.due(4000, 8192)
    assert timing.threshold(200_000) == 200_000 - DEFAULT_RESERVE
    assert CompactionTiming(20_000).threshold(60_000) == 40_000  # a set reserve stays as set


def _budget(rules: int, tools: int, history: int) -> BudgetReport:
    sizes = {Tier.RULES: rules, Tier.CATALOGUE: tools, Tier.HISTORY: history}
    return BudgetReport(tuple(TierTokens(tier, sizes.get(tier, 0), ()) for tier in Tier))


def test_the_prefix_problem_names_the_window_and_what_would_fit() -> None:
    small = Capabilities(context_window=1024, source="http://127.0.0.1:8080/v1/props")
    said = prefix_problem(_budget(900, 1000, 50_000), small)
    assert said is not None and "about 1,900 tokens" in said and "1,024 tokens, http://127.0.0.1:8080" in said
    assert prefix_problem(_budget(900, 1000, 50_000), Capabilities(context_window=8192)) is None
