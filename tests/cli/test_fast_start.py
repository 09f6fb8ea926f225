"""A fast start, held without timing anything: what `lamina --version`, `--help` and `chat` import.

Each subprocess runs `lamina.cli.main` as the console script does and prints which of the heavy
modules it loaded; a module imported at the top of a command again shows up here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

import lamina.cli
from lamina.cli import app

SDKS = ("anthropic", "openai", "mcp", "httpx", "claude_agent_sdk")
"""The provider and source SDKs: a command imports one only to use it."""
_COMMANDS = ("_chat", "_config", "_console", "_context", "_run", "_serve", "_sessions_commands", "_store_commands")
COMMAND_MODULES = tuple(f"lamina.cli.{name}" for name in _COMMANDS)
HEAVY = (
    *SDKS,
    "rich",
    "prompt_toolkit",
    "pydantic",
    "markdown_it",
    "yaml",
    "lamina.agent",
    "lamina.engine",
    "lamina.session",
    *COMMAND_MODULES,
)


def _imported(args: list[str], tmp_path: Path, *, stdin: str = "", heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """The `heavy` modules a `lamina ARGS` process (in an empty workspace) had imported when it ended."""
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    code = (
        "import json, sys\n"
        f"sys.argv = ['lamina', *{args!r}]\n"
        "from lamina.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print('imported:', json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)), file=sys.stderr)\n"
    )
    env = {
        **os.environ,
        "LAMINA_STORE": str(tmp_path / "store"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "ANTHROPIC_API_KEY": "unused",
    }
    done = subprocess.run(
        [sys.executable, "-c", code], input=stdin, capture_output=True, text=True, env=env, cwd=workspace, timeout=120
    )
    _, marker, listed = done.stderr.rpartition("imported: ")
    assert marker, done.stderr
    imported: list[str] = json.loads(listed)
    return imported


@pytest.mark.slow
def test_version_imports_neither_typer_nor_anything_heavy(tmp_path: Path) -> None:
    assert _imported(["--version"], tmp_path, heavy=(*HEAVY, "typer")) == []


@pytest.mark.slow
def test_help_imports_no_command_module_no_rich_and_no_sdk(tmp_path: Path) -> None:
    assert _imported(["--help"], tmp_path) == []


@pytest.mark.slow
def test_a_command_imports_its_own_module_and_not_the_others(tmp_path: Path) -> None:
    imported = _imported(["store", "--help"], tmp_path)
    assert "lamina.cli._store_commands" in imported
    assert not {"lamina.cli._chat", "lamina.cli._sessions_commands", "lamina.cli._serve"} & set(imported)


@pytest.mark.slow
def test_a_chat_with_an_sdk_provider_reaches_its_prompt_without_the_sdk(tmp_path: Path) -> None:
    # the prompt reads stdin (a pipe here): `/quit` ends the chat before any request is sent
    imported = _imported(["chat", "--model", "anthropic:claude-sonnet-5"], tmp_path, stdin="/quit\n")
    assert "lamina.cli._chat" in imported and "lamina.agent" in imported  # the chat did run
    assert not set(SDKS) & set(imported)
    assert not {"markdown_it", "yaml"} & set(imported)  # no skill was read, no answer shown


def test_version_needs_nothing_of_the_cli_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "typer" else real(name, *a))
    monkeypatch.setattr(sys, "argv", ["lamina", "--version"])
    lamina.cli.main()
    assert capsys.readouterr().out == f"lamina {version('lamina')}\n"


def test_the_root_help_lists_each_command_by_the_first_line_of_its_own_help() -> None:
    helped = CliRunner().invoke(app, ["--help"], terminal_width=100, env={"COLUMNS": "100"})
    assert helped.exit_code == 0, helped.output
    listed = " ".join(helped.stdout.split())
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    assert list(commands) == [
        "context",
        "chat",
        "run",
        "serve",
        "demo",
        "models",
        "sessions",
        "config",
        "store",
        "proxy",
        "trust",
    ]
    for name, command in commands.items():
        first = " ".join((command.help or "").split("\n\n")[0].split())
        assert f"{name} {first}" in listed
