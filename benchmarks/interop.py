"""`python -m benchmarks interop`: Lamina inside the OpenAI Agents SDK, pydantic-ai and LangGraph.

Two questions per framework, each answered side by side with the framework's default:

- **Overhead per turn** (`interop_overhead_us_<framework>`): a turn (a tool call and an answer,
  the model played by the framework's own test model, which answers at once) with Lamina's
  integration, minus the same turn with the framework's default persistence: the Agents SDK's
  `SQLiteSession` on a file, pydantic-ai's `message_history` from the previous result, LangGraph's
  `InMemorySaver`. Lamina's turn includes its fsyncs (one per batch of items, per checkpoint).
- **Cache efficiency** of a 40-turn scripted session (12 with `--quick`), every request the model
  received billed by the OpenAI cache simulator (Chat Completions shape, one `prompt_cache_key`, two
  minutes between turns). Without Lamina, the session's per-turn facts (the date and time) sit
  where each framework's documentation puts dynamic context, the instructions (a dynamic
  instructions function, a system message); the project's AGENTS.md is in the instructions too.
  With Lamina, the same facts go in the tail of the user message and AGENTS.md in the stable
  prefix. `interop_cache_efficiency_<framework>_lamina` vs `..._default`, and the input billed
  (base-price tokens) of each.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks import Figure, ratio
from lamina.cachesim import OpenAICacheSimulator, TimedRequest, summarise
from lamina.integrations import CompactionPolicy

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

AGENTS_MD = "# Project rules\n\nAnswer in English. Temperatures in Celsius. " + "Keep the style guide in mind. " * 40
TURN_GAP_S = 120.0
_NO_COMPACTION = CompactionPolicy(context_window=1_000_000)


def _report(city: str) -> str:
    return "\n".join(f"{city} hour {h:02d}: 21 C, light wind from the west, humidity 40%" for h in range(24))


def _question(turn: int) -> str:
    return f"What is the weather in city {turn}?"


class _Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now

    def stamp(self) -> str:
        return datetime.fromtimestamp(self.now, UTC).strftime("%A %Y-%m-%d %H:%M UTC")


def _workspace(root: Path) -> Path:
    folder = root / "workspace"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "AGENTS.md").write_text(AGENTS_MD)
    return folder


def _bill(requests: list[tuple[float, dict[str, Any]]]) -> tuple[float, float]:
    simulator = OpenAICacheSimulator()
    usages = [simulator.submit(TimedRequest(t, body, t + 1.0)) for t, body in requests]
    summary = summarise(usages)
    return summary.cache_efficiency, summary.weighted_tokens


def _chat(system: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "model": "gpt-5",
        "messages": [{"role": "system", "content": system}, *messages],
        "prompt_cache_key": "bench",
    }


def _text_parts(texts: list[str]) -> list[dict[str, str]]:
    return [{"type": "text", "text": t} for t in texts]


# -- OpenAI Agents SDK -------------------------------------------------------------------------------


def _agents_body(instructions: str | None, items: list[Any]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "function_call":
            call = {
                "id": item["call_id"],
                "type": "function",
                "function": {"name": item["name"], "arguments": item["arguments"]},
            }
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]})
        else:
            content = item["content"]
            texts = [content] if isinstance(content, str) else [p["text"] for p in content]
            messages.append({"role": item["role"], "content": _text_parts(texts)})
    return _chat(instructions or "", messages)


async def _agents_session(turns: int, root: Path, *, lamina: bool) -> tuple[float, list[tuple[float, dict[str, Any]]]]:
    from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    from lamina.integrations.openai_agents import LaminaSession
    from lamina.session import LocalSessionStore

    @function_tool
    def weather(city: str) -> str:
        """The hourly weather of a city today."""
        return _report(city)

    clock = _Clock()
    steps: list[Any] = []
    for turn in range(turns):
        steps += [
            {"output": [function_call("weather", {"city": f"city {turn}"}, call_id=f"call_{turn}")]},
            {"output": [assistant_message(f"Sunny in city {turn}.")]},
        ]
    model = ScriptedModel(steps)
    if lamina:
        session: Any = LaminaSession.open(
            LocalSessionStore(root / "store"), workspace=_workspace(root), compaction=_NO_COMPACTION, clock=clock
        )
        agent = Agent(name="a", instructions="You answer weather questions.", model=model, tools=[weather])
        config = session.run_config()
    else:
        session = SQLiteSession("bench", str(root / "sessions.db"))

        def instructions(_ctx: Any, _agent: Any) -> str:  # the SDK's dynamic instructions
            return f"You answer weather questions.\n\n{AGENTS_MD}\n\nNow: {clock.stamp()}"

        agent = Agent(name="a", instructions=instructions, model=model, tools=[weather])
        config = RunConfig()
    started = time.perf_counter()
    for turn in range(turns):
        await Runner.run(agent, _question(turn), session=session, run_config=config)
        clock.now += TURN_GAP_S
    elapsed = time.perf_counter() - started
    session.close()
    requests = [
        (1_800_000_000.0 + TURN_GAP_S * (i // 2) + 2.0 * (i % 2), _agents_body(c.system_instructions, c.input))
        for i, c in enumerate(model.calls)
    ]
    return elapsed, requests


# -- pydantic-ai ---------------------------------------------------------------------------------------


def _pydantic_body(instructions: str | None, messages: list[Any]) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.kind == "request":
            texts = [p.content for p in message.parts if p.part_kind == "user-prompt"]
            for part in message.parts:
                if part.part_kind == "tool-return":
                    out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": str(part.content)})
            if texts:
                out.append({"role": "user", "content": _text_parts(texts)})
        else:
            for part in message.parts:
                if part.part_kind == "tool-call":
                    fn = {"name": part.tool_name, "arguments": json.dumps(part.args_as_dict())}
                    out.append(
                        {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [{"id": part.tool_call_id, "type": "function", "function": fn}],
                        }
                    )
                elif part.part_kind == "text":
                    out.append({"role": "assistant", "content": part.content})
    return _chat(instructions or "", out)


async def _pydantic_session(
    turns: int, root: Path, *, lamina: bool
) -> tuple[float, list[tuple[float, dict[str, Any]]]]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from lamina.integrations.pydantic_ai import LaminaHistory
    from lamina.session import LocalSessionStore

    clock = _Clock()
    captured: list[tuple[float, dict[str, Any]]] = []
    state = {"turn": 0, "call": 0}

    def model_fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        t = 1_800_000_000.0 + TURN_GAP_S * state["turn"] + 2.0 * state["call"]
        captured.append((t, _pydantic_body(info.instructions, messages)))
        state["call"] += 1
        if any(p.part_kind == "tool-return" for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart(f"Sunny in city {state['turn']}.")])
        return ModelResponse(
            parts=[ToolCallPart("weather", {"city": f"city {state['turn']}"}, tool_call_id=f"call_{state['turn']}")]
        )

    history = None
    if lamina:
        history = LaminaHistory.open(
            LocalSessionStore(root / "store"), workspace=_workspace(root), compaction=_NO_COMPACTION, clock=clock
        )
        agent: Agent[None, str] = Agent(
            FunctionModel(model_fn), instructions="You answer weather questions.", capabilities=[history.capability()]
        )
    else:

        def instructions() -> str:  # pydantic-ai's dynamic instructions function
            return f"You answer weather questions.\n\n{AGENTS_MD}\n\nNow: {clock.stamp()}"

        agent = Agent(FunctionModel(model_fn), instructions=instructions)

    @agent.tool_plain
    def weather(city: str) -> str:
        """The hourly weather of a city today."""
        return _report(city)

    messages: list[ModelMessage] = []
    started = time.perf_counter()
    for turn in range(turns):
        state["turn"], state["call"] = turn, 0
        if history is not None:
            await agent.run(_question(turn), message_history=history.messages())
        else:
            result = await agent.run(_question(turn), message_history=messages)
            messages = result.all_messages()
        clock.now += TURN_GAP_S
    elapsed = time.perf_counter() - started
    if history is not None:
        history.close()
    return elapsed, captured


# -- LangGraph -----------------------------------------------------------------------------------------


def _langgraph_body(messages: list[Any]) -> dict[str, Any]:
    system = ""
    out: list[dict[str, Any]] = []
    for m in messages:
        texts = [m.content] if isinstance(m.content, str) else [p["text"] for p in m.content]
        if m.type == "system":
            system += "\n".join(texts)
        elif m.type == "human":
            out.append({"role": "user", "content": _text_parts(texts)})
        elif m.type == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": texts[0]})
        elif m.tool_calls:
            calls = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["args"])}}
                for c in m.tool_calls
            ]
            out.append({"role": "assistant", "content": None, "tool_calls": calls})
        else:
            out.append({"role": "assistant", "content": texts[0]})
    return _chat(system, out)


def _langgraph_session(turns: int, root: Path, *, lamina: bool) -> tuple[float, list[tuple[float, dict[str, Any]]]]:
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from lamina.integrations.langgraph import LaminaCheckpointSaver
    from lamina.session import LocalSessionStore

    @tool
    def weather(city: str) -> str:
        """The hourly weather of a city today."""
        return _report(city)

    clock = _Clock()
    responses: list[BaseMessage] = []
    for turn in range(turns):
        call = {"name": "weather", "args": {"city": f"city {turn}"}, "id": f"call_{turn}"}
        responses += [AIMessage(content="", tool_calls=[call]), AIMessage(content=f"Sunny in city {turn}.")]
    model = FakeMessagesListChatModel(responses=responses)
    captured: list[tuple[float, dict[str, Any]]] = []
    state = {"turn": 0, "call": 0}
    saver: Any
    if lamina:
        saver = LaminaCheckpointSaver(
            LocalSessionStore(root / "store"), workspace=_workspace(root), compaction=_NO_COMPACTION, clock=clock
        )
        thread_id = saver.new_thread()
    else:
        saver, thread_id = InMemorySaver(), "bench"

    def agent(graph_state: MessagesState, config: RunnableConfig) -> dict[str, list[BaseMessage]]:
        if lamina:
            messages = saver.model_input(config, graph_state["messages"])
        else:  # the usual way: a system message with the instructions and today's date, then the state
            system = SystemMessage(f"You answer weather questions.\n\n{AGENTS_MD}\n\nNow: {clock.stamp()}")
            messages = [system, *graph_state["messages"]]
        t = 1_800_000_000.0 + TURN_GAP_S * state["turn"] + 2.0 * state["call"]
        captured.append((t, _langgraph_body(messages)))
        state["call"] += 1
        return {"messages": [model.invoke(messages)]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([weather]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    app = graph.compile(checkpointer=saver)
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    started = time.perf_counter()
    for turn in range(turns):
        state["turn"], state["call"] = turn, 0
        app.invoke({"messages": [HumanMessage(_question(turn))]}, config)
        clock.now += TURN_GAP_S
    elapsed = time.perf_counter() - started
    if lamina:
        saver.close()
    return elapsed, captured


# -- the figures ---------------------------------------------------------------------------------------

Runner_ = Callable[[int, Path, bool], tuple[float, list[tuple[float, dict[str, Any]]]]]


def _runners() -> dict[str, Runner_]:
    return {
        "openai_agents": lambda n, root, lamina: asyncio.run(_agents_session(n, root, lamina=lamina)),
        "pydantic_ai": lambda n, root, lamina: asyncio.run(_pydantic_session(n, root, lamina=lamina)),
        "langgraph": lambda n, root, lamina: _langgraph_session(n, root, lamina=lamina),
    }


def run(*, quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    turns = 12 if quick else 40
    timed_turns = 10 if quick else 30
    repeats = 3
    figures: list[Figure] = []
    for name, session in _runners().items():
        progress(f"{name}: overhead per turn")
        ours, theirs = [], []
        for _ in range(repeats):  # median of alternating runs: the machine is shared
            with tempfile.TemporaryDirectory() as tmp:
                theirs.append(session(timed_turns, Path(tmp), False)[0] / timed_turns)
            with tempfile.TemporaryDirectory() as tmp:
                ours.append(session(timed_turns, Path(tmp), True)[0] / timed_turns)
        ours_s, theirs_s = sorted(ours)[repeats // 2], sorted(theirs)[repeats // 2]
        overhead_us = (ours_s - theirs_s) * 1e6
        figures.append(
            Figure(
                f"interop_overhead_us_{name}",
                round(overhead_us, 1),
                "us/turn",
                note=f"turn with Lamina {ours_s * 1e3:.2f} ms, default {theirs_s * 1e3:.2f} ms",
            )
        )
        figures.append(Figure(f"interop_turn_ms_{name}_default", round(theirs_s * 1e3, 3), "ms"))
        figures.append(
            Figure(
                f"interop_turn_ms_{name}_lamina",
                round(ours_s * 1e3, 3),
                "ms",
                ratio(ours_s, theirs_s, f"interop_turn_ms_{name}_default"),
            )
        )
        progress(f"{name}: {turns}-turn session, billed by the cache simulator")
        bills = {}
        for lamina in (False, True):
            with tempfile.TemporaryDirectory() as tmp:
                _, requests = session(turns, Path(tmp), lamina)
            bills[lamina] = _bill(requests)
        for lamina, label in ((False, "default"), (True, "lamina")):
            efficiency, billed = bills[lamina]
            versus = ratio(efficiency, bills[False][0], f"interop_cache_efficiency_{name}_default") if lamina else None
            figures.append(Figure(f"interop_cache_efficiency_{name}_{label}", round(efficiency, 4), "ratio", versus))
            versus = ratio(billed, bills[False][1], f"interop_billed_input_tokens_{name}_default") if lamina else None
            figures.append(Figure(f"interop_billed_input_tokens_{name}_{label}", round(billed), "tokens", versus))
    return figures
