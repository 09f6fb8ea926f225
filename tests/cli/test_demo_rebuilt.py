"""The demo's session, opened in the inspector: every request it rebuilds is the one the demo sent, byte for byte.

The demo's own pieces (its sample workspace, script and session) run in-process with the scripted
provider, which keeps each request body as the engine rendered it; the inspector's downloadable
body of the same request (`/sessions/{id}/requests/{n}/body.json`) must be those bytes.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import msgspec
import pytest
from starlette.testclient import TestClient

from lamina.cachesim import AnthropicCacheSimulator
from lamina.cli._demo import TARGET, _Events, _sample_workspace, _script, _session
from lamina.providers import ScriptedProvider
from lamina.serve import create_app
from lamina.session import LocalSessionStore


@pytest.mark.slow
def test_the_inspector_rebuilds_every_request_of_the_demo_byte_for_byte(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path / "store")
    clock = [time.time()]

    def tick() -> float:
        clock[0] += 20.0
        return clock[0]

    provider = ScriptedProvider(_script(), target=TARGET, simulator=AnthropicCacheSimulator(), clock=tick)
    rows = asyncio.run(_session(store, _sample_workspace(tmp_path), provider, _Events(tmp_path / "store")))
    session_id = rows[0][1].turn.session_id
    sent = provider.requests
    assert len(sent) >= 5  # the fifth (2,167 rebuilt against 3,107 reported before tools were recorded) among them
    client = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
    for index, request in enumerate(sent):
        rebuilt = client.get(f"/sessions/{session_id}/requests/{index}/body.json")
        assert rebuilt.status_code == 200, rebuilt.text
        assert rebuilt.content == msgspec.json.encode(request), f"request #{index}"
        assert "tools" in msgspec.json.decode(rebuilt.content)
    rows = client.get(f"/api/sessions/{session_id}/requests").json()["requests"]
    assert len(rows) == len(sent)
    for row in rows:  # the simulator's figures on the rebuilt requests are the ones billed when they were sent
        assert row["simulated"]["total"] == row["provider"]["total"]
        assert row["simulated"]["read"] == row["provider"]["read"]
