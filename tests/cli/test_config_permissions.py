"""The `[permissions]` table of the config files: loading, errors, `config show`, saving an "always" rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.cli._config import load_settings, save_allowed
from lamina.cli._permissions import parse_rule
from lamina.errors import ConfigError
from lamina.session import LocalSessionStore, ToolResult
from lamina.workspace import WorkspaceTrust, trust_workspace
from tests.wire.fixtures import API_KEY
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

runner = CliRunner()
TRUSTED = WorkspaceTrust.TRUSTED
MODEL = "anthropic:claude-sonnet-5"


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    workspace = tmp_path / "ws"
    (workspace / ".lamina").mkdir(parents=True)
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    trust_workspace(workspace)  # these tests are about a trusted workspace's file (tests/cli/test_trust_cli.py: not)
    return workspace


def test_rules_of_both_files_add_up_and_show_where_they_came_from(tmp_path: Path, ws: Path) -> None:
    user = tmp_path / "config" / "lamina" / "config.toml"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text('[permissions]\nallow = ["Read"]\n')
    workspace_file = ws / ".lamina" / "config.toml"
    workspace_file.write_text(
        'mode = "ask"\n[permissions]\nallow = ["Bash(git status:*)"]\ndeny = ["Bash(rm:*)", "Edit(.env)"]\n'
    )
    settings = load_settings(ws, trust=TRUSTED)
    assert [(r.text, r.origin) for r in settings.permissions.allow] == [
        ("Read", str(user)),
        ("Bash(git status:*)", str(workspace_file)),
    ]
    assert [r.text for r in settings.permissions.deny] == ["Bash(rm:*)", "Edit(.env)"]
    shown = runner.invoke(app, ["config", "show", "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["permissions"] == [
        {"list": "allow", "rule": "Read", "from": str(user)},
        {"list": "allow", "rule": "Bash(git status:*)", "from": str(workspace_file)},
        {"list": "deny", "rule": "Bash(rm:*)", "from": str(workspace_file)},
        {"list": "deny", "rule": "Edit(.env)", "from": str(workspace_file)},
    ]
    human = runner.invoke(app, ["config", "show"])
    assert "Bash(rm:*)" in human.stdout and "deny" in human.stdout


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ('[permissions]\ndeny = ["Read", "Bash("]\n', "permissions.deny[1]"),
        ('[permissions]\nallow = "Read"\n', "permissions.allow"),
        ('[permissions]\nask = ["Read"]\n', "ask"),
    ],
)
def test_a_bad_rule_is_one_error_line_naming_file_and_rule(ws: Path, table: str, named: str) -> None:
    (ws / ".lamina" / "config.toml").write_text(table)
    with pytest.raises(ConfigError, match=r"config\.toml"):
        load_settings(ws, trust=TRUSTED)
    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 2
    assert "config.toml" in result.stderr and named in result.stderr
    assert "Traceback" not in result.stderr


def test_saving_a_rule_makes_the_file_and_then_keeps_everything_else(ws: Path) -> None:
    path = ws / ".lamina" / "config.toml"
    assert save_allowed(ws, [parse_rule("Bash(git status:*)")]) == path
    assert load_settings(ws, trust=TRUSTED).permissions.allow[0].text == "Bash(git status:*)"
    text = '# my settings\nmodel = "anthropic:claude-sonnet-5"  # the usual\n\n[permissions]\n'
    text += 'deny = ["Bash(rm:*)"]\nallow = [\n  "Read",  # reading is fine\n  "Bash(ls:*)",\n]\n# the end\n'
    path.write_text(text)
    save_allowed(ws, [parse_rule("Bash(npm test:*)"), parse_rule('Bash("my tool" run:*)')])
    saved = path.read_text()
    assert saved.startswith('# my settings\nmodel = "anthropic:claude-sonnet-5"  # the usual\n')
    assert saved.endswith("# the end\n")
    settings = load_settings(ws, trust=TRUSTED)
    assert [r.text for r in settings.permissions.allow] == [
        "Read",
        "Bash(ls:*)",
        "Bash(npm test:*)",
        "Bash('my tool' run:*)",
    ]
    assert [r.text for r in settings.permissions.deny] == ["Bash(rm:*)"]
    before = path.read_text()
    save_allowed(ws, [parse_rule("Read")])  # already there: the file is not touched
    assert path.read_text() == before


def test_saving_adds_the_table_or_the_key_when_missing(ws: Path) -> None:
    path = ws / ".lamina" / "config.toml"
    path.write_text('mode = "ask"')  # no final newline
    save_allowed(ws, [parse_rule("Edit(src/**)")])
    assert load_settings(ws, trust=TRUSTED).mode == "ask"
    assert [r.text for r in load_settings(ws, trust=TRUSTED).permissions.allow] == ["Edit(src/**)"]
    path.write_text('[permissions]\ndeny = ["Bash(rm:*)"]\n\n[other]\n')
    with pytest.raises(ConfigError):  # an unknown table: the file was invalid before, it is left alone
        save_allowed(ws, [parse_rule("Read")])
    path.write_text('[permissions]\ndeny = ["Bash(rm:*)"]\n')
    save_allowed(ws, [parse_rule("Read")])
    assert [r.text for r in load_settings(ws, trust=TRUSTED).permissions.allow] == ["Read"]


@pytest.mark.parametrize(
    ("written", "saved"),
    [
        (
            'permissions = { allow = ["Read"] }  # inline\n',
            'permissions = { allow = ["Read", "Bash(ls:*)"] }  # inline\n',
        ),
        (
            '# dotted\npermissions.deny = ["Bash(rm:*)"]\npermissions.allow = ["Read"]  # mine\n',
            '# dotted\npermissions.deny = ["Bash(rm:*)"]\npermissions.allow = ["Read", "Bash(ls:*)"]  # mine\n',
        ),
        ("permissions.deny = []\n", 'permissions.deny = []\npermissions.allow = ["Bash(ls:*)"]\n'),
    ],
)
def test_dotted_keys_and_inline_tables_are_edited_in_place(ws: Path, written: str, saved: str) -> None:
    path = ws / ".lamina" / "config.toml"
    path.write_text(written)
    save_allowed(ws, [parse_rule("Bash(ls:*)")])
    assert path.read_text() == saved
    assert "Bash(ls:*)" in [r.text for r in load_settings(ws, trust=TRUSTED).permissions.allow]


def test_permissions_that_are_not_a_table_are_refused_and_the_file_kept(ws: Path) -> None:
    path = ws / ".lamina" / "config.toml"
    path.write_text('permissions = "all"\n')
    with pytest.raises(ConfigError):
        save_allowed(ws, [parse_rule("Bash(ls:*)")])
    assert path.read_text() == 'permissions = "all"\n'


def test_deny_rules_refuse_in_execute_mode_in_lamina_run(
    tmp_path: Path, ws: Path, wire: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", wire.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    config = ws / ".lamina" / "config.toml"
    config.write_text('[permissions]\ndeny = ["Bash(rm:*)"]\n')
    (ws / "keep.txt").write_text("kept")
    wire.script(
        Reply(tool_calls=[ToolUse("Bash", {"command": "echo ok && rm keep.txt"})]),
        Reply(tool_calls=[ToolUse("Bash", {"command": "echo ran > ran.txt"})]),
        Reply(text="Could not remove it."),
    )
    store = str(tmp_path / "store")
    result = runner.invoke(app, ["--store", store, "run", "remove keep.txt", "--mode", "execute", "--model", MODEL])
    assert result.exit_code == 0, result.output
    assert (ws / "keep.txt").read_text() == "kept"
    assert (ws / "ran.txt").read_text() == "ran\n"  # what no rule denies runs, in execute mode
    sessions = LocalSessionStore(tmp_path / "store")
    with sessions.open(sessions.list()[0].id, writable=False) as session:
        results = [e for e in session.entries() if isinstance(e, ToolResult)]
    assert results[0].is_error
    assert results[0].content.startswith(f"The deny rule Bash(rm:*) (in {config}) refuses this call")
