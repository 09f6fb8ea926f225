"""Fixtures of the inspector's tests: a store with real sessions, a running server, a headless Chromium."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn

from lamina.pricing import cost_of
from lamina.serve import create_app
from lamina.session import LocalSessionStore, SessionStore
from tests.serve.sessions import RichSession, hostile_session, rich_session

CHROMIUM = os.environ.get("LAMINA_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
OUTPUT = Path(os.environ.get("LAMINA_TEST_OUTPUT", Path(__file__).parents[2] / "test-output")) / "serve"
"""Where the browser tests write their screenshots."""


@dataclass(frozen=True)
class Stored:
    root: Path
    store: LocalSessionStore
    rich: RichSession
    hostile: str


@pytest.fixture(scope="session")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Stored:
    """The store of the inspector's tests, made once per process (the slow tests run first, apart from the rest)."""
    root = tmp_path_factory.mktemp("serve")
    store = LocalSessionStore(root / "store")
    rich = rich_session(store, root)
    hostile = hostile_session(store)
    return Stored(root, store, rich, hostile)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Running:
    url: str
    port: int


@contextmanager
def running_server(store: SessionStore, token: str | None = None) -> Iterator[Running]:
    """The inspector over `store`, served by uvicorn in a thread on a free port.

    With `token`, the inspector as bound to every address (`--host 0.0.0.0`) needs it, while the
    socket listens on loopback only (a test reaches no other address).
    """
    # the server gets the socket already bound: no other test (or xdist worker) can take its port meanwhile
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    port = int(listening.getsockname()[1])
    host = "127.0.0.1" if token is None else "0.0.0.0"
    app = create_app(store, host=host, port=port, poll_seconds=0.2, prices=cost_of, token=token)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=1)
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not running.started:
        if time.monotonic() > deadline or not thread.is_alive():
            pytest.fail("the inspector's server did not start")
        time.sleep(0.02)
    yield Running(f"http://127.0.0.1:{port}", port)
    running.should_exit = True
    thread.join(10)
    listening.close()


@pytest.fixture(scope="session")
def server(stored: Stored) -> Iterator[Running]:
    with running_server(stored.store) as running:
        yield running


def chromium_or_skip() -> str:
    """Debian's chromium; under CI its absence fails the run (the Makefile installs it), elsewhere it skips."""
    if Path(CHROMIUM).exists():
        return CHROMIUM
    found = shutil.which("chromium")
    if found:
        return found
    message = f"no Chromium at {CHROMIUM} (`make test` installs Debian's chromium package as root)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
