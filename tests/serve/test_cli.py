"""`lamina serve` as a command: it starts, serves the store read-only, stops on Ctrl-C."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

import lamina
from lamina.cli import app
from tests.serve.conftest import Stored, free_port


@pytest.mark.slow
def test_serve_command_serves_the_store_and_stops_on_interrupt(stored: Stored) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(lamina.__file__).parents[1]), "NO_COLOR": "1"}
    command = [sys.executable, "-m", "lamina.cli", "--store", str(stored.store.root), "serve", "--port", str(port)]
    command += ["--session", stored.rich.id]
    server = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/api/sessions", timeout=2)
                break
            except httpx.TransportError:
                assert server.poll() is None, server.stderr.read() if server.stderr else ""
                assert time.monotonic() < deadline, "lamina serve did not answer"
                time.sleep(0.1)
        assert response.status_code == 200
        assert stored.rich.id in {row["id"] for row in response.json()["sessions"]}
        refused = httpx.get(f"http://127.0.0.1:{port}/api/sessions", headers={"host": "evil.example"}, timeout=2)
        assert refused.status_code == 400
    finally:
        server.send_signal(signal.SIGINT)
        _, stderr = server.communicate(timeout=30)
    assert server.returncode in (0, 130), stderr  # 130: stopped by Ctrl-C, as `lamina run` reports it
    assert f"lamina serve: http://127.0.0.1:{port}/sessions/{stored.rich.id}" in stderr
    assert "Traceback" not in stderr


def test_serve_refuses_an_unknown_session_before_any_url(stored: Stored) -> None:
    result = CliRunner().invoke(app, ["--store", str(stored.store.root), "serve", "--session", "nosuch"])
    assert result.exit_code == 3  # the session store, as docs/cli.md lists the exit codes
    assert result.stdout == ""
    assert result.stderr.splitlines() == [f"error: no session 'nosuch' in store {stored.store.root}"]


@pytest.mark.slow
def test_serve_refuses_a_port_in_use_before_any_url(stored: Stored) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(lamina.__file__).parents[1]), "NO_COLOR": "1"}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "lamina.cli", "--store", str(stored.store.root), "serve", "--port", str(port)]
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [f"error: cannot listen on 127.0.0.1 port {port}: already in use"]
