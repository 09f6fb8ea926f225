"""Every command's help: flags without `<bool>`, help texts with square brackets printed literally."""

from __future__ import annotations

import re

import pytest
import typer.main
from rich.markup import render
from typer.testing import CliRunner

from lamina.cli import app

runner = CliRunner()


def _command_paths() -> list[list[str]]:
    paths: list[list[str]] = [[]]
    pending: list[tuple[list[str], object]] = [([], typer.main.get_command(app))]
    while pending:
        path, command = pending.pop()
        for name, sub in getattr(command, "commands", {}).items():
            paths.append([*path, name])
            pending.append(([*path, name], sub))
    return paths


def _help_texts(path: list[str]) -> list[str]:
    """The help texts of the command at `path` (its own and its parameters'), as the source writes them."""
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    texts = [command.help or "", *(getattr(param, "help", None) or "" for param in command.params)]
    return [render(text).plain for text in texts]


def _bracketed_help(path: list[str]) -> list[str]:
    """The `[...]` parts of the help texts of the command at `path`."""
    return [part for text in _help_texts(path) for part in re.findall(r"\[[^\]\[]+\]", text)]


@pytest.mark.parametrize("path", _command_paths(), ids=lambda path: " ".join(path) or "lamina")
def test_help_shows_no_bool_metavar_and_brackets_literally(path: list[str]) -> None:
    result = runner.invoke(app, [*path, "--help"], terminal_width=200, env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output
    for part in _bracketed_help(path):
        assert part in result.output


def test_run_help_keeps_the_skill_mention() -> None:
    result = runner.invoke(app, ["run", "--help"], terminal_width=200, env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert "as a [skill:NAME] mention" in result.output


@pytest.mark.parametrize("path", _command_paths(), ids=lambda path: " ".join(path) or "lamina")
def test_help_wraps_at_spaces_on_a_narrow_terminal(path: list[str]) -> None:
    result = runner.invoke(app, [*path, "--help"], terminal_width=60, env={"COLUMNS": "60", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    for word in {word for text in _help_texts(path) for word in text.split() if len(word) <= 12}:
        assert word in result.output  # whole on one line: not cut mid-word
