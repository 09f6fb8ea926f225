"""No escape through links: context files, memory, skills, sources and guides resolve inside the workspace.

A cloned repository can ship `AGENTS.md -> ../secret.txt`; one test per link shape.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lamina.sources import find_sources
from lamina.workspace import ProjectMemory, find_context_files, find_skills
from lamina.workspace._project_memory import load_memory

SECRET = "api_key = sk-do-not-leak\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET)
    (folder / "AGENTS.md").write_text(SECRET)
    return folder


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    return folder


def texts(root: Path, **kwargs: object) -> dict[str, str]:
    scan = find_context_files(root, **kwargs)  # type: ignore[arg-type]
    return {f.relative: f.text for f in scan.files}


def reasons(root: Path) -> dict[str, str]:
    return {s.relative: s.reason for s in find_context_files(root).skipped}


def test_a_context_file_linked_to_a_parent_folder_file_is_skipped(root: Path, outside: Path) -> None:
    (root / "AGENTS.md").symlink_to("../outside/secret.txt")
    assert texts(root) == {}
    assert reasons(root) == {"AGENTS.md": "resolves outside the working directory (to ../outside/secret.txt)"}


def test_a_context_file_linked_to_an_absolute_system_path_is_skipped(root: Path) -> None:
    (root / "CLAUDE.md").symlink_to("/proc/self/status" if os.path.exists("/proc/self/status") else "/etc/hosts")
    assert texts(root) == {}
    assert reasons(root)["CLAUDE.md"].startswith("resolves outside the working directory (to /")


def test_a_link_through_a_chain_that_ends_outside_is_skipped(root: Path, outside: Path) -> None:
    (root / "hop.md").symlink_to("../outside/secret.txt")
    (root / "AGENTS.md").symlink_to("hop.md")
    assert texts(root) == {}
    assert "resolves outside the working directory" in reasons(root)["AGENTS.md"]


def test_a_link_inside_the_working_directory_is_read(root: Path) -> None:
    (root / "AGENTS.md").write_text("rules\n")
    (root / "docs").mkdir()
    (root / "docs" / "CLAUDE.md").symlink_to("../AGENTS.md")
    assert texts(root) == {"AGENTS.md": "rules\n", "docs/CLAUDE.md": "rules\n"}


def test_a_link_into_an_allowed_root_is_read(root: Path, outside: Path) -> None:
    (root / "AGENTS.md").symlink_to(outside / "AGENTS.md")
    assert texts(root) == {}
    assert texts(root, allowed_roots=(outside,)) == {"AGENTS.md": SECRET}


def test_a_link_loop_is_skipped(root: Path) -> None:
    (root / "AGENTS.md").symlink_to("CLAUDE.md")
    (root / "CLAUDE.md").symlink_to("AGENTS.md")
    assert texts(root) == {}
    assert reasons(root) == {"AGENTS.md": "symlink loop", "CLAUDE.md": "symlink loop"}


def test_a_linked_folder_outside_is_never_entered(root: Path, outside: Path) -> None:
    (root / "vendor").symlink_to(outside, target_is_directory=True)
    (root / "up").symlink_to("..", target_is_directory=True)
    assert texts(root) == {}
    assert reasons(root) == {}


def test_memory_linked_outside_is_skipped(root: Path, outside: Path) -> None:
    (root / "MEMORY.md").symlink_to("../outside/secret.txt")
    memory = load_memory(root)
    assert not isinstance(memory, ProjectMemory) and memory is not None
    assert memory.reason == "resolves outside the working directory (to ../outside/secret.txt)"
    assert isinstance(load_memory(root, allowed_roots=(outside,)), ProjectMemory)


def test_memory_as_a_broken_link_is_skipped_with_a_reason(root: Path) -> None:
    (root / "MEMORY.md").symlink_to("nowhere.md")
    memory = load_memory(root)
    assert memory is not None and not isinstance(memory, ProjectMemory)
    assert memory.reason == "broken symlink"


def _skill(folder: Path, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {SECRET}---\nbody\n")


def test_workspace_skills_linked_outside_are_problems(root: Path, outside: Path, tmp_path: Path) -> None:
    skills = root / ".lamina" / "skills"
    _skill(skills / "fine", "fine")
    _skill(outside / "evil", "evil")
    (skills / "evil").symlink_to(outside / "evil", target_is_directory=True)
    (skills / "file").mkdir()
    (skills / "file" / "SKILL.md").symlink_to(outside / "evil" / "SKILL.md")
    scan = find_skills(root, user_dir=tmp_path / "no-user-skills-here", environ={})
    assert [s.name for s in scan.skills] == ["fine"]
    outside_problems = sorted(p.path.parent.name for p in scan.problems if "outside" in p.reason)
    assert outside_problems == ["evil", "file"]


def test_a_skills_folder_linked_outside_is_a_problem(root: Path, outside: Path, tmp_path: Path) -> None:
    _skill(outside / "skills" / "evil", "evil")
    (root / ".lamina").mkdir()
    (root / ".lamina" / "skills").symlink_to(outside / "skills", target_is_directory=True)
    scan = find_skills(root, user_dir=tmp_path / "none", environ={})
    assert scan.skills == ()
    assert any("skills folder resolves outside the working directory" in p.reason for p in scan.problems)
    assert [s.name for s in find_skills(root, user_dir=tmp_path / "none", allowed_roots=(outside,)).skills] == ["evil"]


_MCP = 'kind = "mcp"\ndescription = "d"\ncommand = "srv"\n'


def test_sources_and_guides_linked_outside_are_problems(root: Path, outside: Path) -> None:
    good = root / "sources" / "good"
    good.mkdir(parents=True)
    (good / "source.toml").write_text(_MCP)
    (good / "guide.md").write_text("how to\n")
    guide = root / "sources" / "guide-out"
    guide.mkdir()
    (guide / "source.toml").write_text(_MCP)
    (guide / "guide.md").symlink_to(outside / "secret.txt")
    away = outside / "away"
    away.mkdir()
    (away / "source.toml").write_text(_MCP)
    (away / "guide.md").write_text("how to\n")
    (root / "sources" / "folder-out").symlink_to(away, target_is_directory=True)
    scan = find_sources(root)
    assert [s.slug for s in scan.sources] == ["good"]
    assert sorted((p.path.name, "outside" in p.reason) for p in scan.problems) == [
        ("folder-out", True),
        ("guide.md", True),
    ]


def test_a_sources_folder_linked_outside_is_a_problem(root: Path, outside: Path) -> None:
    (outside / "sources" / "x").mkdir(parents=True)
    (root / "sources").symlink_to(outside / "sources", target_is_directory=True)
    scan = find_sources(root)
    assert scan.sources == ()
    assert [("outside" in p.reason) for p in scan.problems] == [True]
