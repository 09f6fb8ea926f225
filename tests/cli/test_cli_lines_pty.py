"""Clear lines in a pty at 80 and 160 columns: a rule naming no tool, a missing store folder, `--continue` alone."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.cli.pty_session import Chat
from tests.wire.script import Reply
from tests.wire.server import WireServer

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")]
COLUMNS = [80, 160]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


def _lines(chat: Chat) -> list[str]:
    shown = [line for line in chat.screen() if line]
    assert all(len(line) <= chat.columns for line in shown)
    return shown


def _said(shown: list[str], start: str) -> str:
    """The message that starts with `start`, its wrapped lines joined (they hang two columns in)."""
    first = next(i for i, line in enumerate(shown) if line.startswith(start))
    rows = [shown[first]]
    for line in shown[first + 1 :]:
        if not line.startswith("  "):
            break
        rows.append(line)
    return " ".join(row.strip() for row in rows)


@pytest.mark.parametrize("columns", COLUMNS)
def test_a_rule_naming_no_tool_gets_one_line(tmp_path: Path, ws: Path, wire: WireServer, columns: int) -> None:
    config = tmp_path / "config" / "lamina" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[permissions]\nallow = ["Raed", "Bash(ls:*)"]\n')
    chat = Chat(tmp_path, wire, columns=columns)
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    said = _said(_lines(chat), "warning:")
    expected = f"warning: {config}: permissions.allow: Raed names no tool of this session"
    assert "".join(said.split()).startswith("".join(expected.split()))  # a path longer than a line is cut
    assert "Bash(ls:*)" not in said


@pytest.mark.parametrize("columns", COLUMNS)
def test_a_missing_store_folder_is_named(tmp_path: Path, ws: Path, wire: WireServer, columns: int) -> None:
    chat = Chat(tmp_path, wire, "list", model=None, command="sessions", columns=columns)
    assert chat.finish() == 0
    said = _said(_lines(chat), "no sessions")
    assert said == f"no sessions: the store folder {tmp_path / 'store'} does not exist (check --store or LAMINA_STORE)"


@pytest.mark.parametrize("columns", COLUMNS)
def test_run_continue_with_nothing_to_continue_says_so(
    tmp_path: Path, ws: Path, wire: WireServer, columns: int
) -> None:
    wire.script(Reply(text="A new session."))
    chat = Chat(tmp_path, wire, "--continue", "hello", command="run", columns=columns)
    assert chat.finish() == 0
    shown = _lines(chat)
    assert _said(shown, "--continue").startswith(f"--continue: no earlier session in {ws}: starting a new one")
    assert "A new session." in shown


@pytest.mark.parametrize("columns", COLUMNS)
def test_a_script_of_the_wrong_shape_says_a_number(tmp_path: Path, ws: Path, wire: WireServer, columns: int) -> None:
    script = tmp_path / "bad.json"
    script.write_text(json.dumps({"responses": 5}))
    chat = Chat(tmp_path, wire, model=f"scripted:{script}", columns=columns)
    assert chat.finish() != 0
    said = _said(_lines(chat), "error:")
    assert "expected a list of steps, got a number" in said and "a int" not in said
