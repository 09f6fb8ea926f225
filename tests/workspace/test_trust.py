"""The user's trust file: keyed by resolved path, exact (a parent does not count), revocable, listed, never lossy."""

from __future__ import annotations

import os
import string
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lamina.errors import ConfigError, UsageError
from lamina.workspace import WorkspaceTrust, revoke_trust, trust_workspace, trusted_workspaces, workspace_trust
from lamina.workspace._trust import default_trust_path


def test_trust_is_kept_in_the_user_config_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    assert default_trust_path() == tmp_path / "config" / "lamina" / "trusted.toml"
    project = tmp_path / "project"
    project.mkdir()
    assert workspace_trust(project) is WorkspaceTrust.UNTRUSTED  # no file yet: nothing is trusted
    entry = trust_workspace(project, now=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert entry.path == project.resolve() and entry.trusted_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert workspace_trust(project) is WorkspaceTrust.TRUSTED
    assert "lamina trust --revoke" in default_trust_path().read_text()


def test_the_key_is_the_resolved_path_and_only_that_folder(tmp_path: Path) -> None:
    file = tmp_path / "trusted.toml"
    parent = tmp_path / "src"
    child = parent / "clone"
    child.mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(child)
    trust_workspace(link, file=file)
    assert [w.path for w in trusted_workspaces(file=file)] == [child.resolve()]
    assert workspace_trust(child, file=file) is WorkspaceTrust.TRUSTED
    assert workspace_trust(parent, file=file) is WorkspaceTrust.UNTRUSTED
    (child / "inner").mkdir()
    assert workspace_trust(child / "inner", file=file) is WorkspaceTrust.UNTRUSTED  # a subfolder is its own workspace


def test_trusting_twice_keeps_one_entry_and_revoking_removes_it(tmp_path: Path) -> None:
    file = tmp_path / "trusted.toml"
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    first = trust_workspace(a, file=file, now=datetime(2026, 1, 1, tzinfo=UTC))
    trust_workspace(b, file=file)
    assert trust_workspace(a, file=file).trusted_at == first.trusted_at
    assert [w.path for w in trusted_workspaces(file=file)] == [a.resolve(), b.resolve()]
    assert revoke_trust(a, file=file) is True
    assert revoke_trust(a, file=file) is False
    assert [w.path for w in trusted_workspaces(file=file)] == [b.resolve()]
    b.rmdir()  # a folder that is gone can still be revoked by the path listed
    assert revoke_trust(b, file=file) is True and trusted_workspaces(file=file) == ()


def test_only_a_folder_can_be_trusted_and_a_bad_file_is_named(tmp_path: Path) -> None:
    file = tmp_path / "trusted.toml"
    with pytest.raises(UsageError, match="not a folder"):
        trust_workspace(tmp_path / "missing", file=file)
    file.write_text("[[workspace]]\npath = 3\n")
    with pytest.raises(ConfigError, match=r"trusted\.toml"):
        workspace_trust(tmp_path, file=file)
    file.write_text("not toml = = =")
    with pytest.raises(ConfigError, match="not valid TOML"):
        trusted_workspaces(file=file)


_NAME = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="/\x00"), min_size=1, max_size=12
).filter(lambda name: name not in (".", "..") and len(os.fsencode(name)) < 200)


@given(names=st.lists(_NAME, min_size=1, max_size=4, unique=True))
def test_any_folder_name_round_trips(tmp_path_factory: pytest.TempPathFactory, names: list[str]) -> None:
    root = tmp_path_factory.mktemp("names")
    file = root / "trusted.toml"
    folders = []
    for name in names:
        folder = root / "ws" / name
        folder.mkdir(parents=True, exist_ok=True)
        trust_workspace(folder, file=file)
        folders.append(folder.resolve())
    assert [w.path for w in trusted_workspaces(file=file)] == list(dict.fromkeys(folders))
    for folder in folders:
        assert workspace_trust(folder, file=file) is WorkspaceTrust.TRUSTED
        assert revoke_trust(folder, file=file)
    assert trusted_workspaces(file=file) == ()


def test_a_printable_name_is_written_as_is(tmp_path: Path) -> None:
    file = tmp_path / "trusted.toml"
    folder = tmp_path / (string.ascii_letters + " é")
    folder.mkdir()
    trust_workspace(folder, file=file)
    assert f'path = "{folder}"' in file.read_text(encoding="utf-8")
