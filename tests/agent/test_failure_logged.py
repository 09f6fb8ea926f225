"""A turn that fails with an error leaves the error in the log (`TURN_FAILED`), for the inspector to show."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from lamina.agent import open_agent
from lamina.errors import ProviderError
from lamina.providers import ScriptedError, ScriptedProvider, ScriptedResponse
from lamina.session import TURN_FAILED, Custom, LocalSessionStore, UserMessage


def _workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("Run the tests.\n")
    return root


def test_a_failed_turn_logs_its_error_after_the_message(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path / "store")
    provider = ScriptedProvider([ScriptedError("auth", message="invalid x-api-key"), ScriptedResponse(text="Hi.")])
    with open_agent(store, provider, workspace=_workspace(tmp_path)) as agent:
        with pytest.raises(ProviderError):
            asyncio.run(agent.run_turn("hello"))
        session_id = agent.engine.session.id
        entries = agent.engine.session.entries()
        failed = [e for e in entries if isinstance(e, Custom) and e.name == TURN_FAILED]
        assert len(failed) == 1
        assert "invalid x-api-key" in failed[0].data["error"]
        assert failed[0].data["kind"].endswith("Error")
        user = next(e for e in entries if isinstance(e, UserMessage))
        assert entries.index(failed[0]) > entries.index(user)
        # the next turn goes on as before: the failure is no part of any request
        outcome = asyncio.run(agent.run_turn("again"))
        assert outcome.text == "Hi."
    with store.open(session_id, writable=False) as session:
        assert sum(isinstance(e, Custom) and e.name == TURN_FAILED for e in session.entries()) == 1
