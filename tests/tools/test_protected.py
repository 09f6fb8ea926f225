"""Protected paths: a call writing `.git`, `.lamina`, `sources/` or the git config is asked about, in every mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from lamina.tools import Allow, Deny, PermissionMode, PermissionRequest, default_tools
from tests.tools.conftest import Session

FSMONITOR = "[core]\n\tfsmonitor = touch C\n"


class Recorder:
    """An `ask` callback that answers the same every time and keeps the requests."""

    def __init__(self, answer: Allow | Deny) -> None:
        self.answer = answer
        self.requests: list[PermissionRequest] = []

    async def __call__(self, request: PermissionRequest) -> Allow | Deny:
        self.requests.append(request)
        return self.answer


@pytest.mark.parametrize(
    ("name", "input", "protected"),
    [
        ("Edit", {"path": ".git/config", "old_string": "[core]\n", "new_string": FSMONITOR}, ".git/config"),
        ("Write", {"path": ".git/hooks/pre-commit", "content": "touch C\n"}, ".git/hooks/pre-commit"),
        ("Write", {"path": ".git/info/attributes", "content": "* filter=x\n"}, ".git/info/attributes"),
        ("Write", {"path": ".lamina/config.toml", "content": 'mode = "execute"\n'}, ".lamina/config.toml"),
        ("Write", {"path": "sources/evil/source.toml", "content": 'kind = "mcp"\n'}, "sources/evil/source.toml"),
        ("Write", {"path": "sub/.git/hooks/post-checkout", "content": "x\n"}, "sub/.git/hooks/post-checkout"),
        ("Bash", {"command": "printf '[core]\\n\\tfsmonitor = touch C\\n' >> .git/config"}, ".git/config"),
        ("Bash", {"command": "git config core.fsmonitor 'touch C'"}, ".git/config"),
        ("Bash", {"command": "cp evil.sh .git/hooks/pre-commit"}, ".git/hooks/pre-commit"),
        ("Bash", {"command": "cd .git/hooks && tee pre-push < ../../evil.sh"}, ".git/hooks/pre-push"),
        ("Bash", {"command": "echo x | sudo tee -a .lamina/config.toml"}, ".lamina/config.toml"),
        ("Bash", {"command": "chmod +x .gi?/hooks/*"}, ".gi?/hooks/*"),
        ("Bash", {"command": "echo 'mode = \"execute\"' > link"}, "link"),
    ],
)
@pytest.mark.parametrize("mode", [PermissionMode.ASK, PermissionMode.EXECUTE])
async def test_a_write_to_a_protected_path_is_asked_about_in_every_mode_naming_it(
    session: Session, name: str, input: dict[str, str], protected: str, mode: PermissionMode
) -> None:
    git = session.put(".git/config", "[core]\n")
    session.put(".git/hooks/.keep", "")
    session.put("evil.sh", "touch C\n")
    (session.root / "link").symlink_to(session.root / ".lamina" / "config.toml")
    ask = Recorder(Deny("no"))
    s = session.with_tools(default_tools(), ask=ask, mode=mode)
    if name == "Edit":
        await s.call("Read", path=".git/config")
    result = await s.call(name, **input)
    assert result.is_error and isinstance(result.decision, Deny) and result.decision.by == "user"
    (request,) = ask.requests  # one question, never a second for ask mode
    assert request.asked_by == "protected_path" and request.protected
    shown = protected if protected != "link" else ".lamina/config.toml"  # the link's target is what it writes
    assert f"It writes {shown}: a protected path" in request.question
    assert git.read_text() == "[core]\n"
    assert not (session.root / ".lamina").exists() and not (session.root / "sources").exists()


async def test_without_anyone_to_ask_a_protected_write_is_refused_even_in_execute_mode(session: Session) -> None:
    result = await session.call("Write", path=".lamina/config.toml", content="x = 1\n")
    assert result.is_error and "a protected path" in result.content and "no one can approve" in result.content
    assert not (session.root / ".lamina").exists()


async def test_an_approval_naming_the_path_lets_it_through(session: Session) -> None:
    ask = Recorder(Allow())
    s = session.with_tools(default_tools(), ask=ask, mode=PermissionMode.EXECUTE)
    result = await s.call("Bash", command="mkdir -p .lamina && echo 'mode = \"ask\"' > .lamina/config.toml")
    assert not result.is_error, result.content
    assert [r.protected for r in ask.requests] == [(session.root / ".lamina", session.root / ".lamina/config.toml")]


@pytest.mark.parametrize(
    "command",
    [
        "git status",
        "git commit -m 'touch .git/config'",
        "cat .git/config .lamina/config.toml",
        "echo x > notes.txt 2>/dev/null",
        "rm -rf build *",
        "touch src/sources.py docs/.gitignore",
    ],
)
async def test_reading_protected_paths_and_writing_elsewhere_asks_nothing(session: Session, command: str) -> None:
    session.put(".git/config", "[core]\n")
    ask = Recorder(Deny("no"))
    s = session.with_tools(default_tools(), ask=ask, mode=PermissionMode.EXECUTE)
    await s.call("Bash", command=command)
    assert ask.requests == []


async def test_rm_with_a_glob_asks_only_where_there_is_a_sources_folder(session: Session) -> None:
    session.put("sources/docs/source.toml", 'kind = "mcp"\n')
    ask = Recorder(Deny("no"))
    s = session.with_tools(default_tools(), ask=ask, mode=PermissionMode.EXECUTE)
    await s.call("Bash", command="rm -rf *")
    assert [r.protected for r in ask.requests] == [(session.root / "*",)]
    assert (session.root / "sources" / "docs" / "source.toml").exists()


async def test_the_users_git_config_is_protected(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    home = session.outside
    monkeypatch.setenv("HOME", str(home))
    ask = Recorder(Deny("no"))
    s = session.with_tools(default_tools(), ask=ask, mode=PermissionMode.EXECUTE)
    await s.call("Bash", command="git config --global core.pager 'touch C'")
    await s.call("Bash", command="echo '[core]' >> ~/.gitconfig")
    assert [r.protected for r in ask.requests] == [(Path(home, ".gitconfig"),)] * 2
