"""Lamina inside LangGraph, offline: a tool, several turns, a compaction, a resume.

A fake chat model from langchain-core plays the model; `LaminaCheckpointSaver` checkpoints the graph
into a Lamina session and `saver.model_input` places Lamina's context in every model call.

    python examples/langgraph_checkpointer.py               # a temporary store, removed at the end
    python examples/langgraph_checkpointer.py /tmp/store    # kept: continue it with --resume ID --first-turn 3

It prints the questions, the answers, whether a compaction ran; `--json`: each model call as sent (its messages).
"""

from __future__ import annotations

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
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from lamina.integrations.langgraph import LaminaCheckpointSaver
from lamina.session import LocalSessionStore


@tool
def weather(city: str) -> str:
    """The hourly weather of a city today."""
    return weather_report(city)


def main() -> None:
    args = arguments(__doc__ or "")
    clock = SteppingClock(args.first_turn)
    saver = LaminaCheckpointSaver(
        LocalSessionStore(args.store), workspace=workspace(args.store), compaction=EXAMPLE_COMPACTION, clock=clock
    )
    turns = range(args.first_turn, args.first_turn + args.turns)
    responses: list[BaseMessage] = []
    for turn in turns:
        call = {"name": "weather", "args": {"city": f"city {turn}"}, "id": f"call_{turn}"}
        responses += [AIMessage(content="", tool_calls=[call]), AIMessage(content=f"Sunny in city {turn}, 21 C.")]
    model = FakeMessagesListChatModel(responses=responses)
    requests: list[dict[str, Any]] = []

    def agent(state: MessagesState, config: RunnableConfig) -> dict[str, list[BaseMessage]]:
        messages = saver.model_input(config, state["messages"])
        requests.append({"messages": [m.model_dump(mode="json", include={"type", "content"}) for m in messages]})
        return {"messages": [model.invoke(messages)]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([weather]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    app = graph.compile(checkpointer=saver)
    thread_id = args.resume or saver.new_thread()
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    answers = []
    try:
        for turn in turns:
            state = app.invoke({"messages": [HumanMessage(question(turn))]}, config)
            answers.append(str(state["messages"][-1].content))
            clock.next_turn()
        compacted = saver.thread(thread_id).engine.boundary is not None
    finally:
        saver.close()
    report(args, thread_id, answers, compacted, requests)


if __name__ == "__main__":
    main()
