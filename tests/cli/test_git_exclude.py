"""The personal config file named in the repository's exclude file, never through a symbolic link."""

from __future__ import annotations

from pathlib import Path

import pytest

from lamina.cli._git_exclude import exclude_from_git


def test_names_the_file_once(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    target = tmp_path / ".lamina" / "config.local.toml"
    assert exclude_from_git(target) == tmp_path / ".git" / "info" / "exclude"
    exclude_from_git(target)
    assert (tmp_path / ".git" / "info" / "exclude").read_text() == "/.lamina/config.local.toml\n"


def test_a_linked_exclude_file_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_text("kept\n")
    repo = tmp_path / "repo"
    (repo / ".git" / "info").mkdir(parents=True)
    (repo / ".git" / "info" / "exclude").symlink_to(outside)
    with pytest.raises(OSError, match="symbolic link"):
        exclude_from_git(repo / ".lamina" / "config.local.toml")
    assert outside.read_text() == "kept\n"


def test_a_linked_info_folder_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "info").symlink_to(outside)
    with pytest.raises(OSError, match="symbolic link"):
        exclude_from_git(repo / ".lamina" / "config.local.toml")
    assert not (outside / "exclude").exists()
