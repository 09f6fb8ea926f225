"""Grep: regex over files, ignore rules respected, output modes, filter and caps."""

from __future__ import annotations

from lamina.tools import Deny, GrepTool
from tests.tools.conftest import Session


async def test_default_mode_lists_matching_files_in_path_order(session: Session) -> None:
    session.put("b.py", "import os\n")
    session.put("a/c.py", "x = 1\nimport sys\n")
    session.put("d.py", "nothing\n")
    result = await session.call("Grep", pattern=r"^import \w+")
    assert result.content.splitlines() == ["a/c.py", "b.py"]


async def test_content_mode_shows_path_line_and_text(session: Session) -> None:
    session.put("m.py", "a\nneedle here\nb\nneedle again\n")
    result = await session.call("Grep", pattern="needle", output_mode="content")
    assert result.content.splitlines() == ["m.py:2:needle here", "m.py:4:needle again"]


async def test_count_mode_counts_matching_lines_per_file(session: Session) -> None:
    session.put("a.txt", "x\nx\ny\n")
    session.put("b.txt", "x\n")
    result = await session.call("Grep", pattern="x", output_mode="count")
    assert result.content.splitlines() == ["a.txt:2", "b.txt:1"]


async def test_ignore_case(session: Session) -> None:
    session.put("a.txt", "Hello\n")
    assert (await session.call("Grep", pattern="hello")).content.startswith("No matches")
    assert (await session.call("Grep", pattern="hello", ignore_case=True)).content == "a.txt"


async def test_gitignore_vcs_and_dependency_folders_are_not_searched(session: Session) -> None:
    session.put(".gitignore", "dist/\n*.min.js\n")
    for name in ("src/app.js", "dist/app.js", "lib.min.js", "node_modules/dep/index.js", ".git/HEAD"):
        session.put(name, "token\n")
    result = await session.call("Grep", pattern="token")
    assert result.content.splitlines() == ["src/app.js"]


async def test_binary_files_are_skipped(session: Session) -> None:
    session.put("blob.bin", b"token\x00\x01")
    session.put("text.txt", "token\n")
    result = await session.call("Grep", pattern="token")
    assert result.content == "text.txt"


async def test_glob_without_slash_filters_by_name_at_any_depth(session: Session) -> None:
    for name in ("a.py", "sub/b.py", "sub/c.txt"):
        session.put(name, "token\n")
    result = await session.call("Grep", pattern="token", glob="*.py")
    assert result.content.splitlines() == ["a.py", "sub/b.py"]


async def test_glob_with_slash_filters_by_path(session: Session) -> None:
    for name in ("src/a.ts", "src/deep/b.tsx", "test/c.ts"):
        session.put(name, "token\n")
    result = await session.call("Grep", pattern="token", glob="src/**/*.{ts,tsx}")
    assert result.content.splitlines() == ["src/a.ts", "src/deep/b.tsx"]


async def test_a_single_file_can_be_searched(session: Session) -> None:
    session.put("one.txt", "a\ntoken\n")
    session.put("two.txt", "token\n")
    result = await session.call("Grep", pattern="token", path="one.txt", output_mode="content")
    assert result.content == "one.txt:2:token"


async def test_a_file_in_a_subfolder_is_shown_relative_to_cwd(session: Session) -> None:
    session.put("pkg/mod.py", "token\n")
    result = await session.call("Grep", pattern="token", path="pkg")
    assert result.content == "pkg/mod.py"


async def test_an_invalid_regex_is_a_validation_error_naming_pattern(session: Session) -> None:
    result = await session.call("Grep", pattern="(unclosed")
    assert result.is_error
    assert isinstance(result.decision, Deny) and result.decision.by == "validation"
    assert "pattern: not a valid regular expression" in result.content


async def test_a_missing_path_is_an_error(session: Session) -> None:
    result = await session.call("Grep", pattern="x", path="nope")
    assert result.is_error
    assert result.content == "Path not found: nope"


async def test_output_is_capped_with_a_note(session: Session) -> None:
    s = session.with_tools([GrepTool(max_results=5)])
    s.put("many.txt", "hit\n" * 50)
    result = await s.call("Grep", pattern="hit", output_mode="content")
    rows = result.content.splitlines()
    assert rows[:5] == [f"many.txt:{i}:hit" for i in range(1, 6)]
    assert len(rows) == 6
    assert "showing the first 5 matching lines; there are more" in rows[5]


async def test_file_list_is_capped_with_a_note(session: Session) -> None:
    s = session.with_tools([GrepTool(max_results=2)])
    for i in range(5):
        s.put(f"f{i}.txt", "hit\n")
    result = await s.call("Grep", pattern="hit")
    assert result.content.splitlines()[:2] == ["f0.txt", "f1.txt"]
    assert "showing the first 2 matching files; there are more" in result.content


async def test_long_matching_lines_are_cut(session: Session) -> None:
    s = session.with_tools([GrepTool(max_line_chars=20)])
    s.put("min.js", "hit" + "x" * 1000 + "\n")
    result = await s.call("Grep", pattern="hit", output_mode="content")
    assert result.content == "min.js:1:hit" + "x" * 17 + " […]"


async def test_line_anchors_work_per_line(session: Session) -> None:
    session.put("a.txt", "first\nsecond\n")
    result = await session.call("Grep", pattern=r"\Asecond", output_mode="content")
    assert result.content == "a.txt:2:second"


async def test_large_files_are_skipped_and_counted(session: Session) -> None:
    s = session.with_tools([GrepTool(max_file_bytes=10)])
    s.put("big.txt", "hit\n" * 10)
    s.put("small.txt", "hit\n")
    result = await s.call("Grep", pattern="hit")
    assert result.content.splitlines()[0] == "small.txt"
    assert "1 file(s) over 10 bytes were not searched" in result.content
