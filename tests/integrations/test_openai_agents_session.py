"""`LaminaSession` against the SDK's own `SQLiteSession`: the same operations, the same answers.

The Session protocol re-stated side by side over random operation sequences: add_items (items as
the SDK writes them, any JSON value, items that are not JSON, empty batches), get_items with no,
zero, negative and positive limits, pop_item and clear_session (empty sessions included), close
and every method after it, under random session settings; each answer and each exception's type
compared. Then what only Lamina adds: a resume from disk, the log keeping what was popped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from agents import SQLiteSession
from agents.memory import Session, SessionSettings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lamina.errors import UsageError
from lamina.integrations.openai_agents import ItemTypeError, LaminaSession, SessionClosedError
from lamina.session import LocalSessionStore
from tests.conftest import examples


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


def _not_json(kind: int) -> object:
    """An item `json.dumps` refuses (a fresh one per call): a set, bytes, a tuple key, an object."""
    match kind:
        case 0:
            return {"role": "user", "content": {"a", "b"}}
        case 1:
            return {"type": "function_call_output", "call_id": "c", "output": b"bytes"}
        case 2:
            return {("tuple", "key"): 1}
        case _:
            return object()


# JSON as json.dumps writes it; NaN and the infinities are left out (nan != nan, and the log has no NaN).
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
Spec = tuple[str, Any]
_sdk = st.tuples(st.just("sdk"), st.integers(0, 4))
_spec = st.one_of(  # each branch is as likely: the SDK's own items three times as often, a bad one rarely
    _sdk,
    _sdk,
    _sdk,
    st.tuples(st.just("user"), st.text()),  # a user message of any text
    st.tuples(st.just("output"), _json),  # a tool output of any JSON
    st.tuples(st.just("json"), _json),  # any JSON value as an item: strings, lists and null included
    st.tuples(st.just("bad"), st.integers(0, 3)),
)
Op = tuple[str, Any]
_add = st.tuples(st.just("add"), st.lists(_spec, min_size=0, max_size=4))
_get = st.tuples(st.just("get"), st.sampled_from([None, 0, -1, -3, 1, 2, 3, 7]))
_ops = st.lists(  # a close is rare, so most sequences go on long enough to reach the other edges first
    st.one_of(
        *(_add,) * 4,
        *(_get,) * 4,
        st.tuples(st.just("pop"), st.none()),
        st.tuples(st.just("clear"), st.none()),
        st.tuples(st.just("close"), st.none()),
    ),
    max_size=16,
)
_limit = st.one_of(st.none(), st.integers(-2, 4))
_settings: st.SearchStrategy[SessionSettings | dict[str, Any] | None] = st.one_of(
    st.none(), st.builds(SessionSettings, limit=_limit), st.fixed_dictionaries({"limit": _limit}), st.just({})
)


def _made(spec: Spec, n: int) -> object:
    match spec:
        case ("sdk", kind):
            return _item(kind, n)
        case ("user", text):
            return {"role": "user", "content": text}
        case ("output", value):
            return {"type": "function_call_output", "call_id": f"c{n}", "output": value}
        case ("json", value):
            return value
        case (_, kind):
            return _not_json(kind)


def _builtin(error: type[BaseException]) -> type[BaseException]:
    """The built-in exception class an error is (what code written against the SDK catches)."""
    return next(c for c in error.__mro__ if c.__module__ == "builtins")


async def _answer(call: Awaitable[Any]) -> tuple[str, Any]:
    try:
        return ("returned", await call)
    except Exception as exc:
        return ("raised", _builtin(type(exc)))


async def _close(session: Session) -> None:
    session.close()  # type: ignore[attr-defined]  # both have close(); the protocol does not


async def _apply(session: Session, ops: list[Op]) -> list[Any]:
    out: list[Any] = []
    n = 0
    for name, arg in ops:
        match name:
            case "add":
                items = []
                for spec in arg:
                    n += 1
                    items.append(_made(spec, n))
                out.append(await _answer(session.add_items(items)))  # type: ignore[arg-type]  # any JSON
            case "get":
                out.append(await _answer(session.get_items(arg)))
            case "pop":
                out.append(await _answer(session.pop_item()))
            case "clear":
                out.append(await _answer(session.clear_session()))
            case _:
                out.append(await _answer(_close(session)))
        out.append(await _answer(session.get_items()))
    return out


@pytest.mark.slow
@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_ops, session_settings=_settings)
async def test_same_answers_as_sqlite_session(
    ops: list[Op], session_settings: SessionSettings | dict[str, Any] | None, tmp_path_factory: pytest.TempPathFactory
) -> None:
    store = LocalSessionStore(tmp_path_factory.mktemp("store"))
    ours = LaminaSession.open(store, session_settings=session_settings)
    peer = SQLiteSession("peer", session_settings=session_settings)
    try:
        assert ours.session_settings == peer.session_settings
        assert await _apply(ours, ops) == await _apply(peer, ops)
    finally:
        ours.close()
        peer.close()


async def test_session_settings_default_as_sqlite_session(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    ours, peer = LaminaSession.open(store), SQLiteSession("peer")
    coerced = LaminaSession.open(store, session_settings={"limit": 1})
    try:
        assert isinstance(ours, Session)
        assert ours.session_settings == peer.session_settings == SessionSettings()
        assert coerced.session_settings == SessionSettings(limit=1)
    finally:
        ours.close()
        peer.close()
        coerced.close()


async def test_session_settings_limit_as_sqlite_session(tmp_path: Path) -> None:
    ours = LaminaSession.open(LocalSessionStore(tmp_path), session_settings=SessionSettings(limit=2))
    peer = SQLiteSession("peer", session_settings=SessionSettings(limit=2))
    try:
        for session in (ours, peer):
            await session.add_items([_item(k, k) for k in range(5)])  # type: ignore[misc]
        assert await ours.get_items() == await peer.get_items() == [_item(3, 3), _item(4, 4)]
        assert await ours.get_items(limit=3) == await peer.get_items(limit=3)
        assert await ours.get_items(limit=0) == await peer.get_items(limit=0) == []
        assert await ours.get_items(limit=-1) == await peer.get_items(limit=-1) == [_item(k, k) for k in range(5)]
        for session in (ours, peer):
            session.session_settings = None  # set after the fact: no limit
        assert await ours.get_items() == await peer.get_items() == [_item(k, k) for k in range(5)]
    finally:
        ours.close()
        peer.close()


async def test_a_closed_session_refuses_every_method_and_its_log_opens_again(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    session = LaminaSession.open(store)
    await session.add_items([_item(0, 1)])  # type: ignore[list-item]
    session.close()
    session.close()  # a second close does nothing, as SQLiteSession's
    calls: list[Callable[[], Awaitable[Any]]] = [
        session.get_items,
        lambda: session.add_items([]),
        lambda: session.add_items([_item(3, 1)]),  # type: ignore[list-item]
        session.pop_item,
        session.clear_session,
        session.compact,
    ]
    for call in calls:
        with pytest.raises(SessionClosedError, match=f"LaminaSession {session.session_id} is closed") as raised:
            await call()
        assert isinstance(raised.value, RuntimeError) and isinstance(raised.value, UsageError)
    again = LaminaSession.open(store, session.session_id)
    try:
        assert await again.get_items() == [_item(0, 1)]
    finally:
        again.close()


async def test_an_item_that_is_not_json_is_a_type_error_and_adds_nothing(tmp_path: Path) -> None:
    ours, peer = LaminaSession.open(LocalSessionStore(tmp_path)), SQLiteSession("peer")
    try:
        for session in (ours, peer):
            with pytest.raises(TypeError):
                await session.add_items([_item(0, 1), _not_json(0)])  # type: ignore[list-item]
            assert await session.get_items() == []
        with pytest.raises(ItemTypeError, match="not JSON: Object of type set is not JSON serializable"):
            await ours.add_items([_not_json(0)])  # type: ignore[list-item]
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
            instructions = [c.system_instructions or "" for c in model.calls]
            assert [i.rsplit("\n\n", 1)[-1] for i in instructions] == ["You route.", "You handle billing."]
            assert all(i.startswith("How to read this conversation") for i in instructions)
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
