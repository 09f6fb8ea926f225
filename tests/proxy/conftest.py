"""A running proxy in front of the wire server, for tests through the official SDK clients."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn

from lamina.proxy import EditSettings, ProxySessions, Upstreams, create_proxy_app
from lamina.session import SessionStore, open_store
from tests.wire.server import WireServer


@dataclass
class RunningProxy:
    url: str
    store: SessionStore
    sessions: ProxySessions

    @property
    def openai_url(self) -> str:
        return f"{self.url}/v1"


def start_proxy(
    wire: WireServer,
    root: Path,
    edits: EditSettings | None = None,
    clock: Callable[[], float] = time.time,
    location: str | None = None,
) -> Iterator[RunningProxy]:
    """A proxy in front of `wire`, its store the JSONL one at `root` (or the one `location` names)."""
    store = open_store(location or str(root))
    sessions = ProxySessions(store, cwd=str(root.parent), clock=clock)
    app = create_proxy_app(Upstreams(wire.url, wire.url), sessions=sessions, edits=edits)
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listening.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", server_header=False, date_header=False, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield RunningProxy(f"http://127.0.0.1:{listening.getsockname()[1]}", store, sessions)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        listening.close()
        sessions.close()
        store.close()


@pytest.fixture
def proxy(wire: WireServer, tmp_path: Path) -> Iterator[RunningProxy]:
    """A proxy with every edit off, logging into a JSONL store under `tmp_path`, in front of `wire`."""
    yield from start_proxy(wire, tmp_path / "store")
