"""`LaminaSession` against the SDK's own `SQLiteSession`: the same operations, the same answers.

The Session protocol's behaviours re-stated side by side (add_items, get_items with and without a
limit, pop_item, clear_session, a session_settings limit), with items as the SDK really writes them
(user input, function calls and outputs, assistant output messages, reasoning items), over random
operation sequences; then what only Lamina adds: a resume from disk gives the same items, and the
log keeps what was popped or cleared.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents import SQLiteSession
from agents.memory import Session, SessionSettings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lamina.integrations.openai_agents import LaminaSession
from lamina.session import LocalSessionStore


def _item(kind: int, n: int) -> dict[str, Any]:
    match kind:
        case 0:
            return {"role": "user", "content": f'question {n} </untrusted> é 🎉\n\t"quoted"'}
        case 1:
            return {
                "type": "function_call",
                "call_id": f"c{n}",
                "name": "weather",
                "arguments": f'{{"city":"c{n}"}}',
                "id": f"fc{n}",
            }
        case 2:
            return {"type": "function_call_output", "call_id": f"c{n}", "output": f"sunny {n}"}
        case 3:
            text = {"type": "output_text", "text": f"answer {n}", "annotations": [], "logprobs": []}
            return {"id": f"msg{n}", "type": "message", "role": "assistant", "status": "completed", "content": [text]}
        case _:
            return {"type": "reasoning", "id": f"rs{n}", "summary": [{"type": "summary_text", "text": f"think {n}"}]}


Op = tuple[str, Any]
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(st.integers(0, 4), min_size=0, max_size=4)),
        st.tuples(st.just("get"), st.one_of(st.none(), st.integers(-1, 6))),
        st.tuples(st.just("pop"), st.none()),
        st.tuples(st.just("clear"), st.none()),
    ),
    max_size=12,
)


async def _apply(session: Session, ops: list[Op]) -> list[Any]:
    out: list[Any] = []
    n = 0
    for name, arg in ops:
        if name == "add":
            items = []
            for kind in arg:
                n += 1
                items.append(_item(kind, n))
            await session.add_items(items)  # type: ignore[arg-type]
        elif name == "get":
            out.append(await session.get_items(arg))
        elif name == "pop":
            out.append(await session.pop_item())
        else:
            await session.clear_session()
        out.append(await session.get_items())
    return out


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_ops)
async def test_same_answers_as_sqlite_session(ops: list[Op], tmp_path_factory: pytest.TempPathFactory) -> None:
    store = LocalSessionStore(tmp_path_factory.mktemp("store"))
    ours = LaminaSession.open(store)
    peer = SQLiteSession("peer")
    try:
        assert await _apply(ours, ops) == await _apply(peer, ops)
    finally:
        ours.close()
        peer.close()


async def test_session_settings_limit_as_sqlite_session(tmp_path: Path) -> None:
    ours = LaminaSession.open(LocalSessionStore(tmp_path), session_settings=SessionSettings(limit=2))
    peer = SQLiteSession("peer", session_settings=SessionSettings(limit=2))
    try:
        for session in (ours, peer):
            await session.add_items([_item(k, k) for k in range(5)])  # type: ignore[list-item]
        assert await ours.get_items() == await peer.get_items() == [_item(3, 3), _item(4, 4)]
        assert await ours.get_items(limit=3) == await peer.get_items(limit=3)
    finally:
        ours.close()
        peer.close()


async def test_resume_from_disk_gives_the_same_items(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    first = LaminaSession.open(store)
    items = [_item(k % 5, k) for k in range(9)]
    await first.add_items(items)  # type: ignore[arg-type]
    await first.pop_item()
    first.close()
    again = LaminaSession.open(store, first.session_id)
    try:
        assert await again.get_items() == items[:-1]
        assert again.session_id == first.session_id
    finally:
        again.close()


async def test_popped_and_cleared_items_stay_in_the_log(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    session = LaminaSession.open(store)
    try:
        await session.add_items([{"role": "user", "content": "keep me in the log"}, _item(3, 1)])  # type: ignore[list-item]
        assert await session.pop_item() == _item(3, 1)
        await session.clear_session()
        assert await session.get_items() == []
        assert await session.pop_item() is None
    finally:
        session.close()
    log = (store.folder_of(session.session_id) / "log.jsonl").read_text()
    assert "keep me in the log" in log and "answer 1" in log


async def test_a_handoff_is_logged_and_each_agent_keeps_its_instructions(tmp_path: Path) -> None:
    from agents import Agent, Runner
    from agents.testing import ScriptedModel, assistant_message, function_call

    steps = [
        {"output": [function_call("transfer_to_billing", {}, call_id="h1")]},
        {"output": [assistant_message("Billing here.")]},
    ]
    results = []
    for name in ("lamina", "sqlite"):
        model = ScriptedModel(steps)  # type: ignore[arg-type]
        billing = Agent(name="billing", instructions="You handle billing.", model=model)
        triage = Agent(name="triage", instructions="You route.", model=model, handoffs=[billing])
        if name == "lamina":
            session: Any = LaminaSession.open(LocalSessionStore(tmp_path))
            result = await Runner.run(triage, "I was charged twice", session=session, run_config=session.run_config())
            assert [c.system_instructions.rsplit("\n\n", 1)[-1] for c in model.calls] == [
                "You route.",
                "You handle billing.",
            ]
            assert all(c.system_instructions.startswith("How to read this conversation") for c in model.calls)
        else:
            session = SQLiteSession("peer")
            result = await Runner.run(triage, "I was charged twice", session=session)
        assert result.last_agent.name == "billing" and result.final_output == "Billing here."
        results.append(await session.get_items())
        session.close()
    assert results[0] == results[1]
    assert [i.get("type") for i in results[0]][1:3] == ["function_call", "function_call_output"]


async def test_sessions_of_one_store_are_isolated(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    first, second = LaminaSession.open(store), LaminaSession.open(store)
    try:
        assert first.session_id != second.session_id
        await first.add_items([_item(0, 1)])  # type: ignore[list-item]
        await second.add_items([_item(0, 2), _item(3, 2)])  # type: ignore[list-item]
        assert await first.get_items() == [_item(0, 1)]
        assert await second.pop_item() == _item(3, 2)
        await second.clear_session()
        assert await first.get_items() == [_item(0, 1)]
    finally:
        first.close()
        second.close()


async def test_a_session_on_the_postgresql_store_resumes_with_the_same_items(tmp_path: Path) -> None:
    from lamina.session.postgres import PostgresSessionStore
    from tests.support.postgres import fresh_schema, schema_url

    with fresh_schema("agents") as schema:
        store = PostgresSessionStore(schema_url(schema), files_root=tmp_path / "files")
        try:
            first = LaminaSession.open(store)
            items = [_item(k % 5, k) for k in range(7)]
            await first.add_items(items)  # type: ignore[arg-type]
            assert await first.pop_item() == items[-1]
            first.close()
            again = LaminaSession.open(store, first.session_id)
            try:
                assert await again.get_items() == items[:-1]
                await again.clear_session()
                assert await again.get_items() == []
            finally:
                again.close()
        finally:
            store.close()
