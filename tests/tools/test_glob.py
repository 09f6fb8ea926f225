"""Glob: patterns relative to cwd, ignore rules respected, results sorted and capped."""

from __future__ import annotations

from lamina.tools import GlobTool
from tests.tools.conftest import Session


def lines(text: str) -> list[str]:
    return text.splitlines()


async def test_results_are_sorted_files_relative_to_cwd(session: Session) -> None:
    for name in ("b.py", "a.py", "sub/c.py", "sub/deeper/d.py", "z.txt"):
        session.put(name)
    result = await session.call("Glob", pattern="**/*.py")
    assert lines(result.content) == ["a.py", "b.py", "sub/c.py", "sub/deeper/d.py"]


async def test_a_star_stays_in_one_folder(session: Session) -> None:
    for name in ("a.py", "sub/c.py"):
        session.put(name)
    result = await session.call("Glob", pattern="*.py")
    assert lines(result.content) == ["a.py"]


async def test_a_literal_prefix_and_braces(session: Session) -> None:
    for name in ("src/a.ts", "src/x/b.tsx", "src/x/c.js", "other/d.ts"):
        session.put(name)
    result = await session.call("Glob", pattern="src/**/*.{ts,tsx}")
    assert lines(result.content) == ["src/a.ts", "src/x/b.tsx"]


async def test_the_path_field_sets_the_folder_searched(session: Session) -> None:
    for name in ("pkg/a.py", "pkg/sub/b.py", "c.py"):
        session.put(name)
    result = await session.call("Glob", pattern="**/*.py", path="pkg")
    assert lines(result.content) == ["pkg/a.py", "pkg/sub/b.py"]


async def test_gitignore_rules_are_respected(session: Session) -> None:
    session.put(".gitignore", "*.log\nbuild/\n!keep.log\n")
    session.put("pkg/.gitignore", "generated_*.py\n")
    for name in ("a.py", "x.log", "keep.log", "build/out.py", "pkg/generated_1.py", "pkg/real.py"):
        session.put(name)
    result = await session.call("Glob", pattern="**/*")
    assert lines(result.content) == [".gitignore", "a.py", "keep.log", "pkg/.gitignore", "pkg/real.py"]


async def test_vcs_dependency_and_virtualenv_folders_are_skipped(session: Session) -> None:
    for name in (".git/config", "node_modules/x/index.js", "__pycache__/m.pyc", "env/pyvenv.cfg", "env/lib/x.py"):
        session.put(name)
    session.put(".github/workflows/ci.yml")
    result = await session.call("Glob", pattern="**/*")
    assert lines(result.content) == [".github/workflows/ci.yml"]


async def test_rules_of_the_enclosing_work_tree_apply(session: Session) -> None:
    top = session.root.parent
    (top / ".git").mkdir()
    (top / ".gitignore").write_text("project/generated/\n")
    session.put("generated/a.py")
    session.put("src/b.py")
    result = await session.call("Glob", pattern="**/*.py")
    assert lines(result.content) == ["src/b.py"]


async def test_a_folder_named_explicitly_is_searched_even_if_ignored(session: Session) -> None:
    session.put(".gitignore", "vendor/\n")
    session.put("vendor/lib.py")
    result = await session.call("Glob", pattern="vendor/*.py")
    assert lines(result.content) == ["vendor/lib.py"]


async def test_results_are_capped_with_a_note(session: Session) -> None:
    s = session.with_tools([GlobTool(max_results=3)])
    for i in range(10):
        s.put(f"f{i}.txt")
    result = await s.call("Glob", pattern="*.txt")
    assert lines(result.content)[:3] == ["f0.txt", "f1.txt", "f2.txt"]
    assert lines(result.content)[3] == "[7 more files not shown (10 in all); narrow the pattern or the path]"


async def test_no_match_suggests_double_star(session: Session) -> None:
    session.put("sub/a.py")
    result = await session.call("Glob", pattern="*.py")
    assert not result.is_error
    assert "use `**/*.py`" in result.content


async def test_a_missing_folder_is_an_error(session: Session) -> None:
    result = await session.call("Glob", pattern="nope/**/*.py")
    assert result.is_error
    assert "nope does not exist" in result.content
