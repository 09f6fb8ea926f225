"""The one folder walk (`walk_folders`): its policy, its order and the pure decisions inside it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from lamina.tools import walk_files
from lamina.workspace import FolderListing, SkippedPath, WalkPolicy, find_context_files, walk_folders
from lamina.workspace._ignore import compile_rules, parse_ignore
from lamina.workspace._walk import kept_files, split_folders


def put(root: Path, relative: str, text: str = "x\n") -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def walked(root: Path, policy: WalkPolicy) -> list[tuple[str, list[str], bool]]:
    skipped: list[SkippedPath] = []
    return [
        (folder.relative, [f.relative for f in folder.files], folder.held)
        for folder in walk_folders(str(root), policy, skipped=skipped)
    ]


def test_depth_first_lists_each_folders_files_before_its_sub_folders(tmp_path: Path) -> None:
    for relative in ("b.txt", "a/z.txt", "a/b/y.txt", "c/x.txt"):
        put(tmp_path, relative)
    assert walked(tmp_path, WalkPolicy()) == [
        ("", ["b.txt"], False),
        ("a", ["a/z.txt"], False),
        ("a/b", ["a/b/y.txt"], False),
        ("c", ["c/x.txt"], False),
    ]


def test_breadth_first_lists_the_shallowest_folders_first(tmp_path: Path) -> None:
    for relative in ("a/b/y.txt", "c/x.txt"):
        put(tmp_path, relative)
    assert [relative for relative, _, _ in walked(tmp_path, WalkPolicy(breadth_first=True))] == ["", "a", "c", "a/b"]


def test_file_names_match_in_any_letter_case(tmp_path: Path) -> None:
    for relative in ("AGENTS.md", "sub/Claude.MD", "sub/other.md", "agents.md.bak"):
        put(tmp_path, relative)
    policy = WalkPolicy(file_names=frozenset({"agents.md", "claude.md"}))
    assert [f for _, files, _ in walked(tmp_path, policy) for f in files] == ["AGENTS.md", "sub/Claude.MD"]


def test_held_names_and_dot_folders_wait_for_git(tmp_path: Path) -> None:
    for relative in ("node_modules/a.js", ".cache/b", "src/c.py", "env/pyvenv.cfg", "env/lib.py"):
        put(tmp_path, relative)
    policy = WalkPolicy(held_names=frozenset({"node_modules"}), hold_dot_folders=True)
    # Outside a git work tree nothing held is entered; the virtual environment is listed, held.
    assert walked(tmp_path, policy) == [("", [], False), ("env", [], True), ("src", ["src/c.py"], False)]


@pytest.mark.skipif(sys.platform == "win32", reason="FIFOs")
def test_regular_files_only_leaves_out_pipes_and_broken_links(tmp_path: Path) -> None:
    put(tmp_path, "a.txt")
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "broken").symlink_to(tmp_path / "nowhere")
    (tmp_path / "link.txt").symlink_to(tmp_path / "a.txt")
    skipped: list[SkippedPath] = []
    files = [
        f
        for folder in walk_folders(str(tmp_path), WalkPolicy(regular_files_only=True), skipped=skipped)
        for f in folder.files
    ]
    assert [(f.relative, f.symlink) for f in files] == [("a.txt", False), ("link.txt", True)]
    everything = [
        f.relative for folder in walk_folders(str(tmp_path), WalkPolicy(), skipped=skipped) for f in folder.files
    ]
    assert everything == ["a.txt", "broken", "link.txt", "pipe"]


def test_a_symlinked_gitignore_applies_to_both_walks(tmp_path: Path) -> None:
    put(tmp_path, "rules", "hidden/\n")
    (tmp_path / ".gitignore").symlink_to(tmp_path / "rules")
    put(tmp_path, "AGENTS.md")
    put(tmp_path, "hidden/AGENTS.md")
    scan = find_context_files(tmp_path)
    assert [f.relative for f in scan.files] == ["AGENTS.md"]
    assert scan.skipped == ()
    assert {f.relative for f in walk_files(str(tmp_path))} == {".gitignore", "AGENTS.md", "rules"}


def test_inputs_name_the_rule_files_read(tmp_path: Path) -> None:
    put(tmp_path, "a/.gitignore", "*.log\n")
    inputs: list[str] = []
    list(walk_folders(str(tmp_path), WalkPolicy(), skipped=[], inputs=inputs))
    assert str(tmp_path / "a" / ".gitignore") in inputs


def test_the_decisions_are_pure() -> None:
    patterns = parse_ignore(b"*.log\nbuild/\n", path="/r/.gitignore", relative=".gitignore", skipped=[])
    rules = compile_rules(patterns, strip=0, prefix="")
    assert rules is not None
    listing = FolderListing(key=None, ctime_ns=0, folders=["build", "node_modules", "src"], files=["a.log", "b.py"])
    listing.symlinks.add("b.py")
    kept = kept_files(listing, (rules,), "", "/r/")
    assert [(f.relative, f.path, f.symlink) for f in kept] == [("b.py", "/r/b.py", True)]
    policy = WalkPolicy(held_names=frozenset({"node_modules"}))
    assert split_folders(listing, (rules,), policy, "") == (["src"], ["node_modules"])


def test_a_folder_swapped_for_a_link_after_its_parent_was_listed_is_not_entered(tmp_path: Path) -> None:
    put(tmp_path, "ws/sub/inside.txt")
    put(tmp_path, "out/outside.txt")
    ws = tmp_path / "ws"

    def swap(folder: str) -> None:
        if folder.endswith(os.sep + "sub"):  # between the parent's listing and this folder's
            (ws / "sub").rename(ws / "moved")
            (ws / "sub").symlink_to(tmp_path / "out", target_is_directory=True)

    skipped: list[SkippedPath] = []
    files = [
        f.relative
        for folder in walk_folders(str(ws), WalkPolicy(), skipped=skipped, before_listing=swap)
        for f in folder.files
    ]
    assert files == []
    assert [s.reason for s in skipped] == ["the folder changed while it was walked (another put in its place)"]


def test_a_root_that_is_no_longer_the_folder_checked_is_not_walked(tmp_path: Path) -> None:
    put(tmp_path, "ws/inside.txt")
    put(tmp_path, "out/outside.txt")
    st = os.stat(tmp_path / "ws")
    (tmp_path / "ws").rename(tmp_path / "moved")
    (tmp_path / "ws").symlink_to(tmp_path / "out", target_is_directory=True)
    assert list(walk_files(str(tmp_path / "ws"), root_key=(st.st_dev, st.st_ino))) == []
