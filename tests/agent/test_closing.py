"""`ContextEngine` and `Agent` end cleanly: `close()`, `with` (and `async with` for the agent).

Each closes what it owns and nothing else: an engine made with `owns_session=True` (as
`open_agent` makes it) closes its session, and `open_agent`'s agent closes its engine; a session
or engine the caller passed in stays open. Whether a session is still open is seen the way
another writer sees it: a second `store.open` is refused while the first writer holds it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lamina.agent import Agent, open_agent
from lamina.engine import ContextEngine
from lamina.errors import SessionLockedError, UsageError
from lamina.session import Custom, LocalSessionStore, SessionStore, UserMessage
from tests.wire.fixtures import anthropic_provider
from tests.wire.script import Reply
from tests.wire.server import WireServer


@pytest.fixture
def store(tmp_path: Path) -> LocalSessionStore:
    return LocalSessionStore(tmp_path / "store")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("Run the tests before you finish.\n")
    return root


def _still_open(store: SessionStore, session_id: str) -> bool:
    try:
        store.open(session_id).close()
    except SessionLockedError:
        return True
    return False


def test_an_engine_leaves_open_the_session_its_caller_passed_in(store: LocalSessionStore, workspace: Path) -> None:
    session = store.create(cwd=str(workspace))
    with ContextEngine(session, stable_source=tuple) as engine:
        engine.prepare_turn("hello")
    assert engine.closed
    assert _still_open(store, session.id)  # the caller's session: the caller closes it
    session.append(Custom(name="after", data=1))  # and may go on using it
    with pytest.raises(UsageError, match=f"session {session.id} is closed"):
        engine.prepare_turn("again")
    with pytest.raises(UsageError, match="is closed"):
        engine.record(Custom(name="late"))
    with pytest.raises(UsageError, match="is closed"):
        engine.preview_turn("a preview")
    engine.close()  # twice: harmless
    session.close()
    assert not _still_open(store, session.id)


def test_an_engine_closes_the_session_it_owns(store: LocalSessionStore, workspace: Path) -> None:
    session = store.create(cwd=str(workspace))
    engine = ContextEngine(session, stable_source=tuple, owns_session=True)
    engine.prepare_turn("hello")
    assert _still_open(store, session.id)
    engine.close()
    engine.close()
    assert engine.closed
    assert not _still_open(store, session.id)
    reopened = store.open(session.id)  # what the engine logged is there
    assert [e.text for e in reopened.entries() if isinstance(e, UserMessage)] == ["hello"]
    reopened.close()


async def test_open_agents_agent_closes_its_session_and_refuses_use(
    store: LocalSessionStore, workspace: Path, wire: WireServer
) -> None:
    wire.script(Reply(text="Hi."))
    async with anthropic_provider(wire) as provider:
        with open_agent(store, provider, workspace=workspace) as agent:
            assert agent.session is agent.engine.session
            session_id = agent.session.id
            assert (await agent.run_turn("hello")).text == "Hi."
            assert _still_open(store, session_id)
        assert agent.closed and agent.engine.closed
        assert not _still_open(store, session_id)
        with pytest.raises(UsageError, match=f"agent of session {session_id} is closed"):
            await agent.run_turn("again")
        with pytest.raises(UsageError, match="is closed"):
            agent.budget("a look")
        agent.close()  # twice: harmless
        assert len(wire.requests) == 1  # the refused turn sent nothing


async def test_async_with_closes_the_agent(store: LocalSessionStore, workspace: Path, wire: WireServer) -> None:
    async with anthropic_provider(wire) as provider:
        async with open_agent(store, provider, workspace=workspace) as agent:
            session_id = agent.session.id
            assert _still_open(store, session_id)
        assert agent.closed
        assert not _still_open(store, session_id)


async def test_an_agent_leaves_open_the_engine_its_caller_passed_in(
    store: LocalSessionStore, workspace: Path, wire: WireServer
) -> None:
    async with anthropic_provider(wire) as provider:
        with open_agent(store, provider, workspace=workspace) as owner:
            with Agent(owner.engine, owner.provider, owner.tools) as borrowed:
                assert borrowed.session is owner.session
            assert borrowed.closed
            with pytest.raises(UsageError, match="agent of session"):
                borrowed.set_mode("execute")
            assert not owner.engine.closed  # the engine is the owner's
            owner.engine.prepare_turn("still usable")
            assert _still_open(store, owner.session.id)
        assert not _still_open(store, owner.session.id)
