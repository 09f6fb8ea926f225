"""A request rebuilt from the log is the request sent, byte for byte (SPEC invariant 1), tool definitions included.

Real agents with tools talk to the local wire server (Anthropic Messages and OpenAI Chat through
their SDKs); the server keeps every body it received. Each one, less the two transport fields the
provider adds when it sends (`stream`, `stream_options`), must encode to the same bytes as the
inspector's rebuild of that request from the stored log.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest

from lamina.agent import AgentOptions, open_agent
from lamina.cachesim import AnthropicCacheSimulator, TimedRequest
from lamina.providers import AnthropicProvider, OpenAIChatProvider
from lamina.serve._requests import NOT_LOGGED_TOOLS, SessionRequests
from lamina.session import LocalSessionStore, StateChange
from tests.wire.fixtures import anthropic_provider, openai_chat_provider, wire, wire_clock
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

__all__ = ["wire", "wire_clock"]  # the fixtures, imported for pytest

TRANSPORT = ("stream", "stream_options", "diagnostics")
"""What the provider adds to the rendered body when it sends it (not part of the request's content): the stream
options, and Anthropic's cache diagnostics opt-in, which changes no token the model reads."""


def _workspace(root: Path) -> Path:
    ws = root / "workspace"
    ws.mkdir()
    (ws / "AGENTS.md").write_text("# Rules\n- Run the tests after every change.\n")
    (ws / "app.py").write_text("def total(xs):\n    return sum(xs) + 1\n")
    return ws


def _script(wire: WireServer) -> None:
    wire.script(
        Reply(
            text="Reading first.",
            tool_calls=(ToolUse("Read", {"path": "AGENTS.md"}), ToolUse("Read", {"path": "app.py"})),
        ),
        Reply(
            text="Fixing it.",
            tool_calls=(
                ToolUse("Edit", {"path": "app.py", "old_string": "sum(xs) + 1", "new_string": "sum(xs)"}),
                ToolUse("Write", {"path": "NOTES.md", "content": "# Notes\n- total() is pure.\n"}),
            ),
        ),
        Reply(text="Fixed: total() no longer adds 1."),
        Reply(text="Nothing else to do.", tool_calls=(ToolUse("Glob", {"pattern": "*.py"}),)),
        Reply(text="Only app.py."),
    )


def _run(store: LocalSessionStore, ws: Path, provider: AnthropicProvider | OpenAIChatProvider) -> str:
    async def run() -> str:
        agent = open_agent(store, provider, workspace=ws, options=AgentOptions(mode="execute"))
        session_id = agent.engine.session.id
        await agent.run_turn("Why is total() wrong? Fix it, and note it in NOTES.md.")
        agent.engine.session.close()
        resumed = open_agent(store, provider, workspace=ws, session_id=session_id)
        await resumed.run_turn("Any other Python files?")
        resumed.engine.session.close()
        await provider.aclose()
        return session_id

    return asyncio.run(run())


def _requests(store: LocalSessionStore, session_id: str) -> SessionRequests:
    with store.open(session_id) as session:
        entries = list(session.entries())
        return SessionRequests(session_id, entries, data_dir=str(session.data_dir))


def _sent(body: Any, order: list[str]) -> bytes:
    """The received body less its transport fields, its top-level keys in the rebuilt body's `order`."""
    assert set(body) - set(TRANSPORT) == set(order)
    return msgspec.json.encode({k: body[k] for k in order})


@pytest.mark.parametrize("api", ["anthropic", "openai_chat"])
def test_every_rebuilt_request_is_the_body_the_provider_sent(tmp_path: Path, wire: WireServer, api: str) -> None:
    store = LocalSessionStore(tmp_path / "store")
    _script(wire)
    provider = anthropic_provider(wire) if api == "anthropic" else openai_chat_provider(wire)
    session_id = _run(store, _workspace(tmp_path), provider)
    received = [r for r in wire.requests if r.status == 200]
    assert len(received) == 5
    requests = _requests(store, session_id)
    assert requests.count == len(received)
    for index, request in enumerate(received):
        rebuilt = requests.rebuild(index)
        assert NOT_LOGGED_TOOLS not in rebuilt.notes
        assert requests.body(index) == _sent(request.body, list(rebuilt.body)), f"request #{index}"
        names = [t["name"] if api == "anthropic" else t["function"]["name"] for t in request.body["tools"]]
        assert {"Read", "Edit", "Write", "Bash"} <= set(names)


def test_the_simulators_figures_are_the_providers_on_the_rebuilt_requests(tmp_path: Path, wire: WireServer) -> None:
    store = LocalSessionStore(tmp_path / "store")
    _script(wire)
    session_id = _run(store, _workspace(tmp_path), anthropic_provider(wire))
    requests = _requests(store, session_id)
    simulator = AnthropicCacheSimulator()
    for index, request in enumerate(r for r in wire.requests if r.status == 200):
        assert request.usage is not None
        summary = requests.summary(index, on_path=True)
        assert summary.simulated.total == request.usage.total, f"request #{index}"
        assert summary.provider is not None and summary.provider.total == request.usage.total
        again = simulator.submit(TimedRequest(request.t, msgspec.json.decode(requests.body(index))))
        assert again.total == request.usage.total


def test_tool_definitions_are_recorded_once_per_version(tmp_path: Path, wire: WireServer) -> None:
    store = LocalSessionStore(tmp_path / "store")
    _script(wire)
    session_id = _run(store, _workspace(tmp_path), openai_chat_provider(wire))
    with store.open(session_id) as session:
        changes = [e for e in session.entries() if isinstance(e, StateChange) and e.key == "tools"]
    assert len(changes) == 1  # two turns, a resume in between, the same definitions: one record
    assert changes[0].value.startswith("1:") and changes[0].previous is None
    assert [t.name for t in changes[0].tools][:1] and all(t.input_schema.startswith("{") for t in changes[0].tools)
