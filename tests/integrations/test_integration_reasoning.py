"""Reasoning through the integrations: each framework's own reasoning type survives a round trip through Lamina's log,
and the log's typed entries carry it as `Reasoning` blocks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents.items import TResponseInputItem
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, MessagesState, StateGraph
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ThinkingPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from lamina.integrations.langgraph import LaminaCheckpointSaver
from lamina.integrations.openai_agents import LaminaSession
from lamina.integrations.pydantic_ai import LaminaHistory
from lamina.session import AssistantMessage, LocalSessionStore, Reasoning, SessionLog, ToolCall


def _reasoning(session: SessionLog) -> list[tuple[str, tuple[Reasoning, ...]]]:
    """The text and reasoning of each assistant message with reasoning on the session's path."""
    return [(e.text, e.reasoning) for e in session.path() if isinstance(e, AssistantMessage) and e.reasoning]


# --- pydantic-ai ------------------------------------------------------------------------------------

_ANTHROPIC_PARTS = [
    ThinkingPart("Check the weather tool first.", signature="EqQBsig/+==", provider_name="anthropic"),
    ThinkingPart("", id="redacted_thinking", signature="EmwKredacted==", provider_name="anthropic"),
]
_OPENAI_PARTS = [  # one Responses item with two summaries, as pydantic-ai maps it
    ThinkingPart("Summary one.", id="rs_9", signature="gAAAAAenc", provider_name="openai"),
    ThinkingPart("Summary two.", id="rs_9", provider_name="openai"),
]
_SERVER_PART = ThinkingPart("Thinking out loud.", id="reasoning_content", provider_name="deepseek")


def _scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if any(p.part_kind == "tool-return" for p in messages[-1].parts):
        return ModelResponse(parts=[*_OPENAI_PARTS, _SERVER_PART, TextPart("Sunny.")])
    return ModelResponse(parts=[*_ANTHROPIC_PARTS, ToolCallPart("weather", {"city": "Oslo"}, tool_call_id="c1")])


async def test_pydantic_ai_thinking_parts_round_trip_through_the_log(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path / "store")
    history = LaminaHistory.open(store)
    agent = Agent(FunctionModel(_scripted), capabilities=[history.capability()])

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather of a city."""
        return f"sunny in {city}"

    await agent.run("Weather in Oslo?", message_history=history.messages())
    session_id = history.session_id
    assert _reasoning(history.thread.session) == [
        (
            "",
            (
                Reasoning(
                    provider="anthropic", kind="thinking", text="Check the weather tool first.", signature="EqQBsig/+=="
                ),
                Reasoning(provider="anthropic", kind="redacted_thinking", data="EmwKredacted=="),
            ),
        ),
        (
            "Sunny.",
            (
                Reasoning(
                    provider="openai",
                    kind="reasoning",
                    item_id="rs_9",
                    summary=("Summary one.", "Summary two."),
                    data="gAAAAAenc",
                ),
                Reasoning(
                    provider="openai-compat",
                    kind="reasoning_content",
                    text="Thinking out loud.",
                    field="reasoning_content",
                ),
            ),
        ),
    ]
    # the thinking comes before the call it led to
    path = history.thread.session.path()
    first = next(i for i, e in enumerate(path) if isinstance(e, AssistantMessage) and e.reasoning)
    assert isinstance(path[first + 1], ToolCall)
    history.close()

    reopened = LaminaHistory.open(store, session_id)
    thinking = [p for m in reopened.messages() if isinstance(m, ModelResponse) for p in m.parts]
    assert [p for p in thinking if isinstance(p, ThinkingPart)] == [*_ANTHROPIC_PARTS, *_OPENAI_PARTS, _SERVER_PART]
    reopened.close()


# --- the OpenAI Agents SDK --------------------------------------------------------------------------

_ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Oslo?"},
    {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Call the tool."}],
        "encrypted_content": "gAAAAAencrypted/+=",
    },
    {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": '{"city": "Oslo"}'},
    {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    {"id": "rs_2", "type": "reasoning", "summary": [], "encrypted_content": "gAAAAAsecond"},
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}],
    },
]


async def test_agents_sdk_reasoning_items_round_trip_through_the_log(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path / "store")
    session = LaminaSession.open(store)
    items: list[TResponseInputItem] = [dict(i) for i in _ITEMS]  # type: ignore[misc]
    await session.add_items(items)
    session_id = session.session_id
    assert _reasoning(session.thread.session) == [
        (
            "",
            (
                Reasoning(
                    provider="openai",
                    kind="reasoning",
                    item_id="rs_1",
                    summary=("Call the tool.",),
                    data="gAAAAAencrypted/+=",
                ),
            ),
        ),
        ("", (Reasoning(provider="openai", kind="reasoning", item_id="rs_2", data="gAAAAAsecond"),)),
    ]
    session.close()
    reopened = LaminaSession.open(store, session_id)
    assert await reopened.get_items() == _ITEMS
    reopened.close()


# --- LangChain / LangGraph --------------------------------------------------------------------------

_AI_CONTENT: list[str | dict[str, Any]] = [
    {"type": "thinking", "thinking": "Answer from memory.", "signature": "EqQBlangchain=="},
    {"type": "redacted_thinking", "data": "EmwKopaque=="},
    {"type": "text", "text": "Sunny in Oslo."},
]
_RESPONSES_CONTENT: list[str | dict[str, Any]] = [
    {
        "type": "reasoning",
        "id": "rs_5",
        "summary": [{"type": "summary_text", "text": "Short."}],
        "encrypted_content": "gAAAA5",
    },
    {"type": "text", "text": "Still sunny."},
]
_STANDARD_CONTENT: list[str | dict[str, Any]] = [
    {"type": "reasoning", "reasoning": "Plain steps.", "id": "lc_1"},
    {"type": "text", "text": "Yes."},
]


def _graph(saver: LaminaCheckpointSaver) -> Any:
    model = FakeMessagesListChatModel(
        responses=[
            AIMessage(content=_AI_CONTENT, id="ai_1", response_metadata={"model_provider": "anthropic"}),
            AIMessage(content=_RESPONSES_CONTENT, id="ai_2", response_metadata={"model_provider": "openai"}),
            AIMessage(content=_STANDARD_CONTENT, id="ai_3", additional_kwargs={"reasoning_content": "Server side."}),
        ]
    )

    def agent(state: MessagesState, config: RunnableConfig) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(saver.model_input(config, state["messages"]))]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    return graph.compile(checkpointer=saver)


def test_langgraph_reasoning_blocks_round_trip_through_the_log(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path / "store")
    with LaminaCheckpointSaver(store) as saver:
        thread_id = saver.new_thread()
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        graph = _graph(saver)
        for n, question in enumerate(
            ("Weather?", "And now?", "Sure?", "Thanks")
        ):  # an answer is logged at the next call
            graph.invoke({"messages": [HumanMessage(question, id=f"h{n}")]}, config)
        assert _reasoning(saver.thread(thread_id).session)[:3] == [
            (
                "Sunny in Oslo.",
                (
                    Reasoning(
                        provider="anthropic", kind="thinking", text="Answer from memory.", signature="EqQBlangchain=="
                    ),
                    Reasoning(provider="anthropic", kind="redacted_thinking", data="EmwKopaque=="),
                ),
            ),
            (
                "Still sunny.",
                (Reasoning(provider="openai", kind="reasoning", item_id="rs_5", summary=("Short.",), data="gAAAA5"),),
            ),
            (
                "Yes.",
                (
                    Reasoning(
                        provider="openai-compat",
                        kind="reasoning_content",
                        text="Server side.",
                        field="reasoning_content",
                    ),
                    Reasoning(provider="openai-compat", kind="reasoning_content", text="Plain steps."),
                ),
            ),
        ]
    with LaminaCheckpointSaver(store) as reopened:
        state = _graph(reopened).get_state({"configurable": {"thread_id": thread_id}})
        answers = [m for m in state.values["messages"] if isinstance(m, AIMessage)]
        assert [m.content for m in answers][:3] == [_AI_CONTENT, _RESPONSES_CONTENT, _STANDARD_CONTENT]
        assert answers[2].additional_kwargs == {"reasoning_content": "Server side."}
