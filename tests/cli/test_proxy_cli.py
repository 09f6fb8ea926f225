"""`lamina proxy --print-env`, its refusals, and that nothing else imports the proxy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.proxy import CLIENTS

runner = CliRunner()


def test_print_env_prints_each_clients_line() -> None:
    lines = {}
    for client in CLIENTS:
        result = runner.invoke(app, ["proxy", "--print-env", client, "--port", "9001"])
        assert result.exit_code == 0, result.output
        lines[client] = result.stdout
    assert lines["claude"] == "export ANTHROPIC_BASE_URL=http://127.0.0.1:9001\n"
    assert (
        lines["aider"] == "export ANTHROPIC_BASE_URL=http://127.0.0.1:9001 OPENAI_API_BASE=http://127.0.0.1:9001/v1\n"
    )
    assert 'base_url="http://127.0.0.1:9001/v1"' in lines["codex"] and lines["codex"].startswith("codex -c ")
    pi = lines["pi"].split("echo '", 1)[1].split("' >", 1)[0]
    assert json.loads(pi)["providers"]["anthropic"]["baseUrl"] == "http://127.0.0.1:9001"
    opencode = lines["opencode"].split("=", 1)[1].strip().strip("'")
    assert json.loads(opencode)["provider"]["anthropic"]["options"]["baseURL"] == "http://127.0.0.1:9001/v1"


def test_an_unknown_client_is_refused_with_the_known_ones() -> None:
    result = runner.invoke(app, ["proxy", "--print-env", "cursor"])
    assert result.exit_code == 2
    assert "unknown client 'cursor'; one of claude, codex, pi, aider, opencode" in result.output


def test_the_report_of_a_missing_session_is_one_error_line(tmp_path: object) -> None:
    result = runner.invoke(app, ["--store", str(tmp_path), "proxy", "report", "proxy-nothing"])
    assert result.exit_code != 0
    assert "proxy-nothing" in result.output


@pytest.mark.slow
def test_version_and_help_do_not_import_the_proxy() -> None:
    code = (
        "import sys\n"
        "from lamina.cli import main\n"
        "for argv in (['lamina', '--version'], ['lamina', '--help']):\n"
        "    sys.argv = argv\n"
        "    try:\n        main()\n    except SystemExit:\n        pass\n"
        "proxy = ('lamina.proxy', 'lamina.cli._proxy', 'starlette', 'uvicorn')\n"
        "print('loaded', [m for m in proxy if m in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip().endswith("loaded []")


def test_the_address_printed_takes_connections_before_the_server_accepts_them() -> None:
    """`lamina proxy` and `lamina serve` print their address once bound: a client that connects at once waits
    in the backlog instead of being refused (a killed-proxy test was refused there once)."""
    import socket

    from lamina.cli._serve import _bind

    listening = _bind("127.0.0.1", 0)
    try:
        with socket.create_connection(listening.getsockname()[:2], timeout=5):
            pass
    finally:
        listening.close()
