"""The inspector shows which backend wrote a compaction's summary, and why (the boundary's `backend`)."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from lamina.agent import AgentOptions, open_agent
from lamina.compaction import DeterministicSummariser, ServerSummariser
from lamina.providers import Capabilities
from lamina.serve import create_app
from lamina.session import LocalSessionStore
from tests.wire.fixtures import anthropic_provider
from tests.wire.script import Reply
from tests.wire.server import WireServer

WORDS = "compacted by the provider: the compaction backend setting is `server`"


async def test_the_compaction_and_the_decisions_show_the_backend(tmp_path: Path, wire: WireServer) -> None:
    wire.script(*[Reply(text=f"Answer {n}: " + "detail " * 200) for n in range(3)])
    store = LocalSessionStore(tmp_path / "store")
    async with anthropic_provider(wire, capabilities=Capabilities(server_compaction=frozenset({"summarize"}))) as p:
        options = AgentOptions(
            keep_tokens=300, summariser=ServerSummariser(p, backend="server", fallback=DeterministicSummariser())
        )
        with open_agent(store, p, workspace=tmp_path, options=options) as agent:
            for n in range(3):
                await agent.run_turn(f"Question {n}: " + "context " * 200)
            await agent.compact()
            sid = agent.engine.session.id
    client = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
    detail = client.get(f"/api/sessions/{sid}").json()
    backend = detail["compactions"][-1]["backend"]
    assert (backend["on"], backend["action"], backend["words"]) == ("compaction backend", "server_compaction", WORDS)
    assert [d["action"] for d in detail["decisions"] if d["on"] == "compaction backend"] == ["server_compaction"]
    page = client.get(f"/sessions/{sid}")
    assert page.status_code == 200 and "backend: compacted by the provider" in page.text
