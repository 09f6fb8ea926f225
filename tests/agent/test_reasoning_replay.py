"""The agent's priced choice of completed turns' reasoning: its figures, and the target it renders with."""

from __future__ import annotations

from pathlib import Path

from lamina.agent import open_agent
from lamina.agent._reasoning_replay import replay_figures
from lamina.placement import ReasoningConfig
from lamina.session import AssistantMessage, LocalSessionStore, LogEntry, Reasoning, ToolCall, ToolResult, UserMessage
from lamina.tokens import CharTokenEstimator
from tests.providers.support import long_workspace
from tests.wire.fixtures import anthropic_provider
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

EST = CharTokenEstimator(chars_per_token=1.0)  # one token a character: figures read as lengths


def _thought(provider: str = "anthropic", text: str = "t" * 10) -> Reasoning:
    return Reasoning(provider=provider, kind="thinking", text=text)  # type: ignore[arg-type]


PAST: list[LogEntry] = [
    UserMessage(id="u1", text="a" * 5),
    AssistantMessage(id="a1", text="", reasoning=(_thought(),)),
    ToolCall(id="c1", call_id="k1", name="R", input={}),
    ToolResult(id="r1", call_id="k1", name="R", content="x" * 20),
    AssistantMessage(id="a2", text="b" * 3),
    UserMessage(id="u2", text="c" * 4),
    AssistantMessage(id="a3", text="d" * 2, reasoning=(_thought(), _thought("openai"))),
]


def test_after_keeping_dropping_rewrites_from_the_first_block_and_keeping_rewrites_nothing() -> None:
    figures = replay_figures(PAST, "anthropic", EST, dropped_before=False)
    assert figures.reasoning == 20  # the two Anthropic blocks; the OpenAI one is never sent here
    # from the first block on, reasoning left out: the call, its result, the answers and the next message
    assert figures.drop_rewrite == EST.count("R") + EST.count("{}") + 20 + 3 + 4 + 2
    assert figures.keep_rewrite == 0


def test_after_dropping_only_the_turn_just_completed_was_sent_and_keeping_would_put_back_the_older() -> None:
    figures = replay_figures(PAST, "anthropic", EST, dropped_before=True)
    assert figures.drop_rewrite == 2  # from the last turn's block on: its answer's text
    older = EST.count("R") + EST.count("{}") + 20 + 3 + 4 + 2
    assert figures.keep_rewrite == older + 20
    assert replay_figures(PAST, "openai", EST, dropped_before=True).reasoning == 10


async def test_a_priced_session_on_anthropic_is_accepted_at_every_request_and_keeps_one_choice_per_turn(
    tmp_path: Path, wire: WireServer
) -> None:
    # the default reasoning history is priced: whatever the agent chooses, the API's rules hold
    workspace = long_workspace(tmp_path)
    (workspace / "app.py").write_text("print('hi')\n")
    steps = []
    for turn in range(3):
        steps += [
            Reply(reasoning=f"turn {turn}: look first", tool_calls=[ToolUse("Read", {"path": "app.py"})]),
            Reply(reasoning=f"turn {turn}: answer", text=f"answer {turn}"),
        ]
    wire.script(*steps)
    replays: list[tuple[str | None, str | None]] = []
    async with anthropic_provider(wire, reasoning=ReasoningConfig(thinking="adaptive")) as provider:
        assert provider.reasoning.history == "priced"
        with open_agent(LocalSessionStore(tmp_path / "store"), provider, workspace=workspace) as agent:
            for turn in range(3):
                await agent.run_turn(f"question {turn}")
                replays.append((agent._calls.replay.turn_id, agent._calls.replay.choice))
    assert [r.status for r in wire.requests] == [200] * 6  # no thinking refused, kept or dropped
    assert all(choice in ("keep", "drop") for _, choice in replays)
    assert len({turn_id for turn_id, _ in replays}) == 3  # decided once per turn
    for request in wire.requests[1::2]:  # the second call of each turn: its own thinking goes back whole
        assert request.body["messages"][-2]["content"][0]["type"] == "thinking"
