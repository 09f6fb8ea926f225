"""Path rules apply to every tool that reads or writes the path: Read rules to Grep and Glob, Edit rules to Write.

The issue's cases: Grep printed a file a `Read(.env)` deny rule denies; Write wrote where
`Edit(secrets/**)` is denied. Through the pipeline with the config's `DenyRules`, and through
`lamina run` against the wire server.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from lamina.cli import app
from lamina.cli._approval import DenyRules, allowed_by
from lamina.cli._permissions import READERS, WRITERS, Permissions, read_rules
from lamina.tools import (
    Allow,
    Deny,
    PermissionMode,
    PermissionRequest,
    ToolContext,
    ToolExecution,
    ToolPipeline,
    default_tools,
)
from tests.wire.fixtures import API_KEY
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

MODEL = "anthropic:claude-sonnet-5"


def _permissions(*allow: str, deny: tuple[str, ...] = ()) -> Permissions:
    return read_rules([("test", list(allow), list(deny))])


def _pipeline(root: Path, permissions: Permissions, **context: Any) -> ToolPipeline:
    ctx = ToolContext(cwd=root, data_dir=root.parent / "data", mode=PermissionMode.EXECUTE, **context)
    return ToolPipeline(default_tools(), ctx, rules=[DenyRules(permissions)])


async def _call(pipeline: ToolPipeline, name: str, **input: Any) -> ToolExecution:
    return await pipeline.execute("call-1", name, input)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "config").mkdir(parents=True)
    (root / "secrets").mkdir()
    (root / ".env").write_text("API_KEY=sk-live-123\n")
    (root / "config" / ".env").write_text("API_KEY=sk-nested-456\n")
    (root / "app.py").write_text("API_KEY = settings.get('API_KEY')\n")
    (root / "secrets" / "key.pem").write_text("-----BEGIN KEY-----\n")
    return root.resolve()


@pytest.mark.parametrize("mode", ["content", "files_with_matches", "count"])
async def test_grep_never_shows_a_file_a_read_deny_rule_denies(project: Path, mode: str) -> None:
    pipeline = _pipeline(project, _permissions(deny=("Read(.env)",)))
    result = await _call(pipeline, "Grep", pattern="API_KEY", output_mode=mode)
    assert not result.is_error
    assert "sk-live" not in result.content and "sk-nested" not in result.content
    assert ".env" not in result.content
    assert "app.py" in result.content


async def test_grep_does_not_show_a_denied_file_through_a_link_to_it(project: Path) -> None:
    (project / "notes.txt").symlink_to(project / ".env")
    pipeline = _pipeline(project, _permissions(deny=("Read(.env)",)))
    result = await _call(pipeline, "Grep", pattern="sk-live", output_mode="content")
    assert "API_KEY=sk-live" not in result.content and "notes.txt" not in result.content
    read = await _call(pipeline, "Read", path="notes.txt")
    assert read.is_error and "sk-live" not in read.content


async def test_glob_never_lists_a_file_a_read_deny_rule_denies(project: Path) -> None:
    pipeline = _pipeline(project, _permissions(deny=("Read(.env)", "Grep(secrets/**)")))
    result = await _call(pipeline, "Glob", pattern="**/*")
    assert result.content.splitlines() == ["app.py"]


async def test_a_read_deny_rule_refuses_grep_on_the_file_and_edit_of_it(project: Path) -> None:
    pipeline = _pipeline(project, _permissions(deny=("Read(.env)",)))
    for name, input in [
        ("Grep", {"pattern": "API", "path": ".env"}),
        ("Edit", {"path": ".env", "old_string": "sk-live", "new_string": "x"}),
    ]:
        result = await _call(pipeline, name, **input)
        assert isinstance(result.decision, Deny) and result.decision.by == "rule:permissions", name
        assert "Read(.env)" in result.content
    assert (project / ".env").read_text() == "API_KEY=sk-live-123\n"


@pytest.mark.parametrize(("rule", "name"), [("Edit(secrets/**)", "Write"), ("Write(secrets/**)", "Edit")])
async def test_an_edit_rule_refuses_write_and_a_write_rule_refuses_edit(project: Path, rule: str, name: str) -> None:
    pipeline = _pipeline(project, _permissions("Edit", "Write", deny=(rule,)))
    input = {"content": "replaced\n"} if name == "Write" else {"old_string": "BEGIN", "new_string": "END"}
    for path in ("secrets/key.pem", "secrets/new.pem"):
        result = await _call(pipeline, name, path=path, **input)
        assert isinstance(result.decision, Deny) and rule in result.content
    assert (project / "secrets" / "key.pem").read_text() == "-----BEGIN KEY-----\n"
    assert not (project / "secrets" / "new.pem").exists()


async def test_a_link_named_by_a_denied_path_is_refused_under_that_name(project: Path) -> None:
    (project / "config" / "env").write_text("TOKEN=abc\n")
    (project / "config" / ".env").unlink()
    (project / "config" / ".env").symlink_to("env")
    pipeline = _pipeline(project, _permissions(deny=("Read(.env)",)))
    result = await _call(pipeline, "Read", path="config/.env")
    assert isinstance(result.decision, Deny) and "TOKEN" not in result.content


async def test_a_link_repointed_at_a_denied_file_during_the_approval_is_refused(project: Path) -> None:
    (project / "notes.md").write_text("notes\n")
    (project / "link.md").symlink_to(project / "notes.md")

    async def ask(request: PermissionRequest) -> Allow | Deny:
        (project / "link.md").unlink()
        (project / "link.md").symlink_to(project / "secrets" / "key.pem")
        return Allow()

    ctx = ToolContext(cwd=project, data_dir=project.parent / "data", mode=PermissionMode.ASK)
    pipeline = ToolPipeline(default_tools(), ctx, rules=[DenyRules(_permissions(deny=("Edit(secrets/**)",)))], ask=ask)
    result = await _call(pipeline, "Write", path="link.md", content="overwritten\n")
    assert result.is_error and "changed after it was checked" in result.content
    assert (project / "secrets" / "key.pem").read_text() == "-----BEGIN KEY-----\n"


async def test_an_edit_allow_rule_allows_write_there_and_a_read_allow_rule_allows_no_change(project: Path) -> None:
    pipeline = _pipeline(project, Permissions())
    permissions = _permissions("Edit(src/**)", "Read(docs/**)")
    write = pipeline.bind("c", "Write", {"path": "src/new.py", "content": ""})
    elsewhere = pipeline.bind("c", "Write", {"path": "app.py", "content": ""})
    edit_docs = pipeline.bind("c", "Edit", {"path": "docs/a.md", "old_string": "a", "new_string": "b"})
    grep_docs = pipeline.bind("c", "Grep", {"pattern": "a", "path": "docs/a.md"})
    assert write is not None and elsewhere is not None and edit_docs is not None and grep_docs is not None
    assert [rule.text for rule in allowed_by(permissions, write)] == ["Edit(src/**)"]
    assert not allowed_by(permissions, elsewhere)
    assert not allowed_by(permissions, edit_docs)
    assert [rule.text for rule in allowed_by(permissions, grep_docs)] == ["Read(docs/**)"]


PATHS = st.lists(st.sampled_from(["src", "docs", ".env", "secrets", "a.py", "key.pem"]), min_size=1, max_size=3).map(
    "/".join
)


@given(
    rule_tool=st.sampled_from(sorted(READERS | WRITERS)), tool=st.sampled_from(sorted(READERS | WRITERS)), path=PATHS
)
def test_a_deny_rule_speaks_for_every_tool_that_does_the_same_to_the_file(rule_tool: str, tool: str, path: str) -> None:
    """A file tool's deny rule refuses each tool of its kind, and a reader's refuses Edit (which reads) too."""
    permissions = _permissions(deny=(f"{rule_tool}({path})",))
    same_kind = (rule_tool in READERS) == (tool in READERS)
    expected = same_kind or (rule_tool in READERS and tool == "Edit")
    assert (permissions.denying(tool, None, (path,)) is not None) == expected
    assert permissions.denying(tool, None, (path + ".other",)) is None
    assert permissions.denying("Bash", f"cat {path}", ()) is None  # Bash commands are not path rules


# Through `lamina run`, as the issue tried it: a scripted model calls the tools, the user's config denies.
runner = CliRunner()


@pytest.fixture
def ws(tmp_path: Path, wire: WireServer, monkeypatch: pytest.MonkeyPatch, project: Path) -> Path:
    monkeypatch.chdir(project)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", wire.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    config = tmp_path / "config" / "lamina" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[permissions]\ndeny = ["Read(.env)", "Edit(secrets/**)"]\n')
    return project


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="POSIX paths")
def test_lamina_run_keeps_denied_files_from_grep_and_write(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    calls = [
        ToolUse("Grep", {"pattern": "API_KEY", "output_mode": "content"}, id="call_grep"),
        ToolUse("Write", {"path": "secrets/key.pem", "content": "mine\n"}, id="call_write"),
    ]
    wire.script(Reply(text="Looking.", tool_calls=calls), Reply(text="Done."))
    result = runner.invoke(
        app, ["--store", str(tmp_path / "store"), "run", "find the key", "--mode", "execute", "--model", MODEL]
    )
    assert result.exit_code == 0, result.output
    sent = wire.tool_results()
    assert "app.py" in sent["call_grep"] and "sk-live" not in sent["call_grep"] and "sk-nested" not in sent["call_grep"]
    assert "Edit(secrets/**)" in sent["call_write"]
    assert (ws / "secrets" / "key.pem").read_text() == "-----BEGIN KEY-----\n"
