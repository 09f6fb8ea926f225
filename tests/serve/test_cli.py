"""`lamina serve` as a command: it starts, serves the store read-only, stops on Ctrl-C."""

from __future__ import annotations

import os
import re
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


@pytest.mark.slow
def test_serve_on_every_address_needs_the_token_it_prints(stored: Stored) -> None:
    # bound to every address, asked on loopback as another machine would ask: by its address or a name
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(lamina.__file__).parents[1]), "NO_COLOR": "1"}
    command = [sys.executable, "-m", "lamina.cli", "--store", str(stored.store.root), "serve"]
    command += ["--host", "0.0.0.0", "--port", str(port), "--allow-host", "inspector.internal"]
    server = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        printed = re.fullmatch(rf"lamina serve: http://0\.0\.0\.0:{port}/\?token=([A-Za-z0-9_-]{{43}})  \(.*\)\n", line)
        assert printed is not None, line
        token = printed.group(1)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                refused = httpx.get(f"{base}/api/sessions", timeout=2)
                break
            except httpx.TransportError:
                assert server.poll() is None, server.stderr.read()
                assert time.monotonic() < deadline, "lamina serve did not answer"
                time.sleep(0.1)
        assert refused.status_code == 401 and stored.rich.id not in refused.text
        for path in ("/", f"/sessions/{stored.rich.id}", "/api/openapi.json", "/static/app.js"):
            assert httpx.get(base + path, timeout=5).status_code == 401, path
        bearer = {"authorization": f"Bearer {token}"}
        assert stored.rich.id in httpx.get(f"{base}/api/sessions", headers=bearer, timeout=5).text
        # the printed address: a cookie, then the pages on it alone
        with httpx.Client(base_url=base, timeout=5) as browser:
            first = browser.get("/", params={"token": token})
            assert first.status_code == 200 and "<meta http-equiv='refresh' content='0; url=/'>" in first.text
            assert "HttpOnly" in first.headers["set-cookie"] and "SameSite=strict" in first.headers["set-cookie"]
            assert stored.rich.id in browser.get(f"/sessions/{stored.rich.id}").text
        # the Host allow-list follows --host: a rebinding page's name is refused, token or not
        foreign = {"host": f"evil.example:{port}"}
        assert httpx.get(f"{base}/api/sessions", headers={**foreign, **bearer}, timeout=5).status_code == 400
        named = {"host": f"inspector.internal:{port}"}
        assert httpx.get(f"{base}/api/sessions", headers={**named, **bearer}, timeout=5).status_code == 200
        assert httpx.get(f"{base}/api/sessions", headers=named, timeout=5).status_code == 401
    finally:
        server.send_signal(signal.SIGINT)
        _, stderr = server.communicate(timeout=30)
    assert server.returncode in (0, 130), stderr
    assert "Traceback" not in stderr
