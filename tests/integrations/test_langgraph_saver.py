"""`LaminaCheckpointSaver` against LangGraph's `InMemorySaver`: the same graph, the same checkpoints.

A graph with a tool runs the same turns on both savers; their checkpoint histories (`list`, with
`limit`, `before` and a metadata `filter`), `get_tuple` and the async twins agree, also after the
Lamina saver is closed and the thread reopened from disk (pending writes included).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from lamina.integrations.langgraph import THREAD_SESSION_PREFIX, LaminaCheckpointSaver
from lamina.session import InMemorySessionStore, LocalSessionStore, SessionStore
from tests.support.postgres import fresh_schema, schema_url


@tool
def weather(city: str) -> str:
    """The weather of a city."""
    return f"sunny in {city}"


def _graph(saver: BaseCheckpointSaver[Any]) -> Any:
    responses: list[BaseMessage] = []
    for n in range(3):
        call = {"name": "weather", "args": {"city": f"c{n}"}, "id": f"call_{n}"}
        responses += [
            AIMessage(content="", tool_calls=[call], id=f"ai_{n}a"),
            AIMessage(content=f"ok {n}", id=f"ai_{n}b"),
        ]
    model = FakeMessagesListChatModel(responses=responses)

    def agent(state: MessagesState, config: RunnableConfig) -> dict[str, list[BaseMessage]]:
        messages = (
            saver.model_input(config, state["messages"])
            if isinstance(saver, LaminaCheckpointSaver)
            else state["messages"]
        )
        return {"messages": [model.invoke(messages)]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([weather]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


def _shape(t: CheckpointTuple) -> tuple[Any, ...]:
    """What must agree: the step, the source, the writes and the channel values (ids and times differ)."""
    values = t.checkpoint["channel_values"]
    messages = [(type(m).__name__, m.content) for m in values.get("messages", [])]
    writes = [(channel, str(value)[:40]) for _, channel, value in t.pending_writes or []]
    return (t.metadata.get("step"), t.metadata.get("source"), messages, sorted(writes), t.parent_config is None)


def _run(saver: BaseCheckpointSaver[Any], thread_id: str) -> RunnableConfig:
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    graph = _graph(saver)
    for n in range(3):
        graph.invoke({"messages": [HumanMessage(f"weather {n}?", id=f"h{n}")]}, config)
    return config


def _history(saver: BaseCheckpointSaver[Any], config: RunnableConfig, **options: Any) -> list[tuple[Any, ...]]:
    return [_shape(t) for t in saver.list(config, **options)]


async def test_same_checkpoints_as_in_memory_saver_also_after_a_reopen(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    peer = InMemorySaver()
    peer_config = _run(peer, "peer")
    ours = LaminaCheckpointSaver(store)
    config = _run(ours, ours.new_thread())
    thread_id = config["configurable"]["thread_id"]
    ours.close()

    reopened = LaminaCheckpointSaver(store)
    try:
        saver, cfg = reopened, config
        full = _history(saver, cfg)
        assert full == _history(peer, peer_config)
        assert len(full) > 10
        assert _history(saver, cfg, limit=3) == _history(peer, peer_config, limit=3)
        assert _history(saver, cfg, filter={"source": "input"}) == _history(
            peer, peer_config, filter={"source": "input"}
        )
        ours_list, peer_list = list(saver.list(cfg)), list(peer.list(peer_config))
        before, peer_before = ours_list[4].config, peer_list[4].config
        assert _history(saver, cfg, before=before) == _history(peer, peer_config, before=peer_before)
        latest = saver.get_tuple(cfg)
        assert latest is not None
        assert _shape(latest) == _shape(peer.get_tuple(peer_config))  # type: ignore[arg-type]
        middle = saver.get_tuple(ours_list[5].config)
        assert middle is not None and _shape(middle) == _shape(peer.get_tuple(peer_list[5].config))  # type: ignore[arg-type]
        assert [_shape(t) async for t in saver.alist(cfg)] == full
        again = await saver.aget_tuple(cfg)
        assert again is not None and _shape(again) == _shape(latest)
        # the graph goes on from the reopened thread
        state = _graph(reopened).get_state(config)
        assert [m.content for m in state.values["messages"]][-1] == "ok 2"
        assert reopened.thread(thread_id).id == thread_id
    finally:
        reopened.close()


@contextlib.contextmanager
def _two_hosts(kind: str, tmp_path: Path) -> Iterator[tuple[SessionStore, SessionStore]]:
    """Two stores on one place, as two hosts see it (the in-memory store: one store, shared)."""
    if kind == "memory":
        with InMemorySessionStore(files_root=tmp_path) as memory:
            yield memory, memory
    elif kind == "jsonl":
        yield LocalSessionStore(tmp_path), LocalSessionStore(tmp_path)
    else:
        from lamina.session.postgres import PostgresSessionStore

        with (
            fresh_schema("lgthread") as schema,
            PostgresSessionStore(schema_url(schema), files_root=tmp_path / "a") as a,
            PostgresSessionStore(schema_url(schema), files_root=tmp_path / "b") as b,
        ):
            yield a, b


@pytest.mark.parametrize(
    "kind", ["memory", pytest.param("jsonl", marks=pytest.mark.slow), pytest.param("postgres", marks=pytest.mark.slow)]
)
def test_a_callers_own_thread_id_is_made_on_first_use_and_found_again_on_another_host(
    kind: str, tmp_path: Path
) -> None:
    with _two_hosts(kind, tmp_path) as (here, there):
        saver = LaminaCheckpointSaver(here)
        config = _run(saver, "user-42")  # the caller's own thread id
        session_id = saver.thread("user-42").id
        assert session_id.startswith(THREAD_SESSION_PREFIX) and session_id != "user-42"
        history = _history(saver, config)
        saver.close()

        elsewhere = LaminaCheckpointSaver(there)
        try:
            assert _history(elsewhere, config) == history  # found by the id alone, checkpoints and writes
            assert elsewhere.thread("user-42").id == session_id
            state = _graph(elsewhere).get_state(config)
            assert [m.content for m in state.values["messages"]][-1] == "ok 2"
            assert [s.id for s in there.list()] == [session_id]  # one session, made once
        finally:
            elsewhere.close()


@pytest.mark.slow
async def test_an_async_graph_on_a_callers_thread_id_checkpoints_as_the_in_memory_saver(tmp_path: Path) -> None:
    peer, peer_config = InMemorySaver(), {"configurable": {"thread_id": "peer"}}
    config: RunnableConfig = {"configurable": {"thread_id": "conversation-7f3a"}}
    async with LaminaCheckpointSaver(LocalSessionStore(tmp_path)) as saver:
        for graph, cfg in ((_graph(peer), peer_config), (_graph(saver), config)):
            for n in range(3):
                await graph.ainvoke({"messages": [HumanMessage(f"weather {n}?", id=f"h{n}")]}, cfg)
        assert [_shape(t) async for t in saver.alist(config)] == _history(peer, peer_config)  # type: ignore[arg-type]
    async with LaminaCheckpointSaver(LocalSessionStore(tmp_path)) as reopened:
        latest = await reopened.aget_tuple(config)
        assert latest is not None and _shape(latest) == _shape(peer.get_tuple(peer_config))  # type: ignore[arg-type]


def test_reading_an_unknown_thread_makes_no_session(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    saver = LaminaCheckpointSaver(store)
    try:
        for thread_id in ("1", "a thread/with ../ odd chars é", "20260101-000000-abcdef"):
            config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
            assert saver.get_tuple(config) is None
            assert list(saver.list(config)) == []
            saver.delete_thread(thread_id)
        assert store.list() == []
        _run(saver, "a thread/with ../ odd chars é")
        (made,) = store.list()
        assert made.id == saver.thread("a thread/with ../ odd chars é").id and "odd chars" in made.title
    finally:
        saver.close()


def test_a_number_as_thread_id_is_the_same_thread_as_its_text_also_after_a_reopen(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    with LaminaCheckpointSaver(store) as saver:
        numbered: RunnableConfig = {"configurable": {"thread_id": 42}}  # thread_id=user_id
        graph = _graph(saver)
        graph.invoke({"messages": [HumanMessage("weather 0?", id="h0")]}, numbered)
        history = _history(saver, numbered)
        assert history == _history(saver, {"configurable": {"thread_id": "42"}})
    with LaminaCheckpointSaver(store) as reopened:
        assert _history(reopened, numbered) == history
        assert [s.id for s in store.list()] == [reopened.thread("42").id]


def test_a_thread_id_new_thread_made_is_its_session_id(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    saver = LaminaCheckpointSaver(store)
    thread_id = saver.new_thread()
    _run(saver, thread_id)
    saver.close()
    reopened = LaminaCheckpointSaver(store)
    try:
        assert reopened.thread(thread_id).id == thread_id
        assert reopened.get_tuple({"configurable": {"thread_id": thread_id}}) is not None
        assert [s.id for s in store.list()] == [thread_id]
    finally:
        reopened.close()


def test_delete_thread_forgets_checkpoints_but_the_log_keeps_them(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    saver = LaminaCheckpointSaver(store)
    config = _run(saver, saver.new_thread())
    thread_id = config["configurable"]["thread_id"]
    saver.delete_thread(thread_id)
    assert saver.get_tuple(config) is None
    saver.close()
    reopened = LaminaCheckpointSaver(store)
    try:
        assert reopened.get_tuple(config) is None
    finally:
        reopened.close()
    assert "langgraph.checkpoint" in (store.folder_of(thread_id) / "log.jsonl").read_text()
