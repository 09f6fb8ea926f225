"""Lamina inside pydantic-ai, offline: a tool, several turns, a compaction, a resume.

pydantic-ai's own test model (`FunctionModel`) plays the model; `LaminaHistory` logs the history to a
Lamina session, places Lamina's context and compacts (its capability: history processor, instructions).

    python examples/pydantic_ai_history.py               # a temporary store, removed at the end
    python examples/pydantic_ai_history.py /tmp/store    # kept: continue it with --resume ID --first-turn 3

It prints the questions, the answers, whether a compaction ran; `--json`: each model call as sent (its messages).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _common import (
    EXAMPLE_COMPACTION,
    SteppingClock,
    arguments,
    question,
    report,
    weather_report,
    workspace,
)
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from lamina.integrations.pydantic_ai import LaminaHistory
from lamina.session import LocalSessionStore

requests: list[dict[str, Any]] = []


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Calls the tool once per question, then answers."""
    requests.append(
        {"instructions": info.instructions, "messages": ModelMessagesTypeAdapter.dump_python(messages, mode="json")}
    )
    asked = [
        p.content
        for m in messages
        for p in m.parts
        if p.part_kind == "user-prompt" and isinstance(p.content, str) and p.content.startswith("What is the weather")
    ]
    city = asked[-1].removeprefix("What is the weather in ").split("?")[0]
    if any(p.part_kind == "tool-return" for p in messages[-1].parts):
        return ModelResponse(parts=[TextPart(f"Sunny in {city}, 21 C.")])
    return ModelResponse(parts=[ToolCallPart("weather", {"city": city}, tool_call_id=f"call_{len(requests)}")])


async def main() -> None:
    args = arguments(__doc__ or "")
    clock = SteppingClock(args.first_turn)
    history = LaminaHistory.open(
        LocalSessionStore(args.store),
        args.resume,
        workspace=workspace(args.store),
        compaction=EXAMPLE_COMPACTION,
        clock=clock,
    )
    agent = Agent(
        FunctionModel(scripted_model), instructions="You answer weather questions.", capabilities=[history.capability()]
    )

    @agent.tool_plain
    def weather(city: str) -> str:
        """The hourly weather of a city today."""
        return weather_report(city)

    answers = []
    try:
        for turn in range(args.first_turn, args.first_turn + args.turns):
            result = await agent.run(question(turn), message_history=history.messages())
            answers.append(result.output)
            clock.next_turn()
        compacted = history.thread.engine.boundary is not None
    finally:
        history.close()
    report(args, history.session_id, answers, compacted, requests)


if __name__ == "__main__":
    asyncio.run(main())
