"""Ignore rules as git applies them: fixed cases from real repositories, and a differential test against git."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lamina.tools import walk_files
from lamina.workspace import CONTEXT_FILE_NAMES, find_context_files
from lamina.workspace._ignore import global_excludes_file

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed")
EXAMPLES = 400 if os.environ.get("LAMINA_EXHAUSTIVE") == "1" else 40


@contextmanager
def isolated_git_config(home: Path) -> Iterator[dict[str, str]]:
    """HOME and XDG_CONFIG_HOME pointed at `home`, for git and for us alike; yields git's environment."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        patch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
        patch.setenv("GIT_CONFIG_NOSYSTEM", "1")
        patch.delenv("GIT_CONFIG_GLOBAL", raising=False)
        yield dict(os.environ)


def git(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    assert GIT is not None
    done = subprocess.run([GIT, "-C", str(root), *args], capture_output=True, check=True, env=env)
    return done.stdout.decode("utf-8", errors="surrogateescape")


def git_visible(root: Path, env: dict[str, str]) -> set[str]:
    """The files git sees as untracked and not ignored: what a walk with git's rules must list."""
    listed = git(root, "ls-files", "-z", "--others", "--exclude-standard", env=env)
    return {name for name in listed.split("\0") if name}


def git_check_ignore(root: Path, paths: set[str], env: dict[str, str]) -> set[str]:
    """The paths `git check-ignore` calls ignored (a file below an ignored folder included)."""
    assert GIT is not None
    listed = "".join(f"{p}\0" for p in sorted(paths)).encode("utf-8", errors="surrogateescape")
    done = subprocess.run(
        [GIT, "-C", str(root), "check-ignore", "--stdin", "-z"], input=listed, capture_output=True, env=env
    )
    assert done.returncode in (0, 1), done.stderr  # 1: none ignored
    return {name for name in done.stdout.decode("utf-8", errors="surrogateescape").split("\0") if name}


def ours(root: Path) -> set[str]:
    return {f.relative for f in walk_files(str(root))}


def make_repo(root: Path, files: dict[str, bytes], env: dict[str, str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", env=env)
    for relative, data in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


# --- fixed cases: each is a disagreement git and pathspec had -------------------------------------

CASES: dict[str, tuple[dict[str, bytes], set[str]]] = {
    "whitelist": (
        {".gitignore": b"*\n!*/\n!AGENTS.md\n", "AGENTS.md": b"", "x.py": b"", "d/AGENTS.md": b"", "d/x.py": b""},
        {"AGENTS.md", "d/AGENTS.md"},
    ),
    "a folder's contents, then one file back": (
        {".gitignore": b"dir/**\n!dir/AGENTS.md\n", "dir/AGENTS.md": b"", "dir/x": b"", "dir/sub/AGENTS.md": b""},
        {".gitignore", "dir/AGENTS.md"},
    ),
    "byte order mark": ({".gitignore": b"\xef\xbb\xbfsecret\n", "secret": b"", "x": b""}, {".gitignore", "x"}),
    "crlf": ({".gitignore": b"secret\r\nlog \r\n", "secret": b"", "log": b"", "x": b""}, {".gitignore", "x"}),
    "posix classes": (
        {".gitignore": b"[[:digit:]]*.log\n[[:upper:]]x\n", "1a.log": b"", "a.log": b"", "Ax": b"", "ax": b""},
        {".gitignore", "a.log", "ax"},
    ),
    "three stars": (
        {".gitignore": b"***/foo\n", "foo": b"", "a/foo": b"", "a/b/foo": b"", "x": b""},
        {".gitignore", "x"},
    ),
    "a lone backslash": (
        {".gitignore": b"build\\\nkeep\n", "build\\": b"", "keep": b"", "x": b""},
        {".gitignore", "x", "build\\"},
    ),
    "a reversed range": ({".gitignore": b"[z-a]\nkeep\n", "z": b"", "a": b"", "keep": b""}, {".gitignore", "a"}),
    "two trailing slashes": ({".gitignore": b"a//\nb/\n", "a/x": b"", "b/x": b""}, {".gitignore", "a/x"}),
    "nested, deeper wins": (
        {".gitignore": b"*.md\n", "a/.gitignore": b"!AGENTS.md\n", "a/AGENTS.md": b"", "AGENTS.md": b"", "a/b.md": b""},
        {".gitignore", "a/.gitignore", "a/AGENTS.md"},
    ),
    "no re-include below an ignored folder": (
        {".gitignore": b"out/\n!out/AGENTS.md\n", "out/AGENTS.md": b"", "x": b""},
        {".gitignore", "x"},
    ),
}


@needs_git
@pytest.mark.parametrize("name", sorted(CASES))
def test_fixed_cases_match_git(name: str, tmp_path: Path) -> None:
    files, expected = CASES[name]
    with isolated_git_config(tmp_path / "home") as env:
        root = tmp_path / "repo"
        make_repo(root, files, env)
        assert git_visible(root, env) == expected  # the case says what git does
        assert ours(root) == expected


def test_a_broken_line_is_left_out_with_a_warning_naming_file_and_line(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_bytes(b"# build outputs\nbuild\\\n[[:nope:]]\ngen/\n")
    (tmp_path / "AGENTS.md").write_text("rules\n")
    (tmp_path / "gen").mkdir()
    (tmp_path / "gen" / "AGENTS.md").write_text("generated\n")
    scan = find_context_files(tmp_path)
    assert [f.relative for f in scan.files] == ["AGENTS.md"]  # the other lines still apply
    assert [(s.relative, s.line) for s in scan.skipped] == [(".gitignore", 2), (".gitignore", 3)]
    assert scan.skipped[0].reason.startswith('line 2 left out ("build\\"): ')
    assert "malformed bracket expression" in scan.skipped[1].reason


@needs_git
def test_info_exclude_and_the_global_excludes_file_apply(tmp_path: Path) -> None:
    with isolated_git_config(tmp_path / "home") as env:
        root = tmp_path / "repo"
        files = {"a/AGENTS.md": b"", "b/AGENTS.md": b"", "c/AGENTS.md": b"", "d/AGENTS.md": b""}
        make_repo(root, files, env)
        (root / ".git" / "info").mkdir(exist_ok=True)
        (root / ".git" / "info" / "exclude").write_text("a/\n")
        xdg = tmp_path / "home" / ".config" / "git"
        xdg.mkdir(parents=True)
        (xdg / "ignore").write_text("b/\n")
        assert global_excludes_file(str(root)) == str(xdg / "ignore")
        assert ours(root) == git_visible(root, env) == {"c/AGENTS.md", "d/AGENTS.md"}
        named = tmp_path / "home" / "my-excludes"
        named.write_text("c/\n")
        git(root, "config", "core.excludesFile", "~/my-excludes", env=env)
        assert global_excludes_file(str(root)) == str(named)
        assert ours(root) == git_visible(root, env) == {"b/AGENTS.md", "d/AGENTS.md"}
        found = find_context_files(root)
        assert [f.relative for f in found.files] == ["b/AGENTS.md", "d/AGENTS.md"]


@needs_git
def test_name_based_skips_apply_only_to_what_git_does_not_track(tmp_path: Path) -> None:
    with isolated_git_config(tmp_path / "home") as env:
        root = tmp_path / "repo"
        files = {
            "build/AGENTS.md": b"tracked: this build folder is source\n",
            "dist/AGENTS.md": b"untracked output\n",
            "node_modules/pkg/CLAUDE.md": b"a dependency\n",
            ".github/AGENTS.md": b"tracked\n",
            "env/pyvenv.cfg": b"home = /usr/bin\n",
            "env/AGENTS.md": b"a virtual environment under any name\n",
        }
        make_repo(root, files, env)
        assert [f.relative for f in find_context_files(root).files] == []
        assert "env/AGENTS.md" not in ours(root)  # Glob and Grep skip a virtual environment too
        git(root, "add", "env/AGENTS.md", env=env)
        assert [f.relative for f in find_context_files(root).files] == ["env/AGENTS.md"]
        assert "env/AGENTS.md" in ours(root) and "env/pyvenv.cfg" in ours(root)
        git(root, "rm", "-q", "--cached", "env/AGENTS.md", env=env)
        assert "node_modules/pkg/CLAUDE.md" not in ours(root)  # Glob and Grep skip it too
        git(root, "add", "build/AGENTS.md", ".github/AGENTS.md", "node_modules/pkg/CLAUDE.md", env=env)
        assert [f.relative for f in find_context_files(root).files] == [
            ".github/AGENTS.md",
            "build/AGENTS.md",
            "node_modules/pkg/CLAUDE.md",
        ]
        assert "node_modules/pkg/CLAUDE.md" in ours(root)
    plain = tmp_path / "plain"  # without a repository, the names are skipped
    shutil.copytree(root, plain, ignore=shutil.ignore_patterns(".git"))
    assert [f.relative for f in find_context_files(plain).files] == []


# --- differential: generated rules and trees against git ------------------------------------------

_SEGMENTS = ["a", "b", "AGENTS.md", "x.log", "d", "[e]", "f g", "#h", "!i"]
_TOKENS = ["a", "b", "d", "*", "**", "***", "?", "/", "!", "\\", ".log", "AGENTS.md", "[a-c]", "[!a]",
           "[[:alpha:]]", "[z-a]", "[]", " ", "#", "x", "e", "[", "]", "//", "**/", "/**", "\\*", "\\ ",
           "[^a]", "[:", "\t", "*.md", "!*/", "[a-]", "\\[", "g", "f g"]  # fmt: skip


@st.composite
def repos(draw: st.DrawFn) -> dict[str, bytes]:
    paths = draw(st.lists(st.lists(st.sampled_from(_SEGMENTS), min_size=1, max_size=4), min_size=1, max_size=14))
    files: dict[str, bytes] = {}
    for parts in paths:
        relative = "/".join(parts)
        if any(other.startswith(relative + "/") or relative.startswith(other + "/") for other in files):
            continue  # a file and a folder of the same name cannot both exist
        files[relative] = b""
    folders = sorted({"/".join(p.split("/")[:i]) for p in files for i in range(p.count("/") + 1)})
    line = st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=5).map("".join)
    ending = st.sampled_from([b"\n", b"\r\n"])
    for folder in draw(st.lists(st.sampled_from(folders), max_size=3, unique=True)):
        lines = draw(st.lists(line, min_size=1, max_size=6))
        bom = draw(st.sampled_from([b"", b"\xef\xbb\xbf"]))
        end = draw(ending)
        name = f"{folder}/.gitignore" if folder else ".gitignore"
        if any(other.startswith(name + "/") for other in files) or name in files:
            continue
        files[name] = bom + end.join(text.encode() for text in lines) + end
    return files


@needs_git
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    files=repos(),
    exclude=st.lists(st.sampled_from(_TOKENS), max_size=4).map("".join),
    global_line=st.lists(st.sampled_from(_TOKENS), max_size=4).map("".join),
)
@pytest.mark.slow
def test_the_walk_sees_exactly_what_git_sees(files: dict[str, bytes], exclude: str, global_line: str) -> None:
    with tempfile.TemporaryDirectory() as tmp, isolated_git_config(Path(tmp) / "home") as env:
        root = Path(tmp) / "repo"
        make_repo(root, files, env)
        (root / ".git" / "info").mkdir(exist_ok=True)
        (root / ".git" / "info" / "exclude").write_text(exclude + "\n")
        (Path(tmp) / "home" / ".config" / "git").mkdir(parents=True)
        (Path(tmp) / "home" / ".config" / "git" / "ignore").write_text(global_line + "\n")
        expected = git_visible(root, env)
        assert ours(root) == expected
        assert git_check_ignore(root, set(files), env) == set(files) - expected  # git agrees with itself
        context = {p for p in expected if p.rpartition("/")[2].lower() in CONTEXT_FILE_NAMES}
        assert {f.relative for f in find_context_files(root).files} == context
