"""Lamina inside the OpenAI Agents SDK, offline: a tool, several turns, a compaction, a resume.

The SDK's own test model (`agents.testing.ScriptedModel`) plays the model; `LaminaSession` keeps the
history in a Lamina session and `session.run_config()` places Lamina's context in every request.

    python examples/openai_agents_session.py               # a temporary store, removed at the end
    python examples/openai_agents_session.py /tmp/store    # kept: continue it with --resume ID --first-turn 3

It prints the questions, the answers, whether a compaction ran; `--json`: each model call as sent (its input).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")  # offline: no trace export
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
from agents import Agent, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from lamina.integrations.openai_agents import LaminaSession
from lamina.session import LocalSessionStore


@function_tool
def weather(city: str) -> str:
    """The hourly weather of a city today."""
    return weather_report(city)


async def main() -> None:
    args = arguments(__doc__ or "")
    clock = SteppingClock(args.first_turn)
    session = LaminaSession.open(
        LocalSessionStore(args.store),
        args.resume,
        workspace=workspace(args.store),
        compaction=EXAMPLE_COMPACTION,
        clock=clock,
    )
    turns = range(args.first_turn, args.first_turn + args.turns)
    steps: list[Any] = []
    for turn in turns:
        steps += [
            {"output": [function_call("weather", {"city": f"city {turn}"}, call_id=f"call_{turn}")]},
            {"output": [assistant_message(f"Sunny in city {turn}, 21 C.")]},
        ]
    model = ScriptedModel(steps)
    agent = Agent(name="forecaster", instructions="You answer weather questions.", model=model, tools=[weather])
    answers = []
    try:
        for turn in turns:
            config = session.run_config(tracing_disabled=True)  # no traces sent to OpenAI from an example
            result = await Runner.run(agent, question(turn), session=session, run_config=config)
            answers.append(str(result.final_output))
            clock.next_turn()
        compacted = session.thread.engine.boundary is not None
    finally:
        session.close()
    requests = [{"instructions": c.system_instructions, "input": c.input} for c in model.calls]
    report(args, session.session_id, answers, compacted, requests)


if __name__ == "__main__":
    asyncio.run(main())
