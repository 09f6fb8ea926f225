"""Edit: exact, unique replacement; zero or several matches fail and say how many."""

from __future__ import annotations

import os
import stat

import pytest

from tests.tools.conftest import Session


async def test_a_unique_match_is_replaced_and_the_new_lines_shown(session: Session) -> None:
    path = session.put("m.py", "a = 1\nb = 2\nc = 3\n")
    result = await session.call("Edit", path="m.py", old_string="b = 2", new_string="b = 20\nb2 = 21")
    assert not result.is_error
    assert path.read_text() == "a = 1\nb = 20\nb2 = 21\nc = 3\n"
    assert result.content.startswith("Edited m.py: replaced 1 occurrence.")
    assert "     2\tb = 20\n     3\tb2 = 21" in result.content


async def test_zero_matches_fail_saying_zero_and_leave_the_file(session: Session) -> None:
    path = session.put("m.py", "a = 1\n")
    result = await session.call("Edit", path="m.py", old_string="a = 2", new_string="a = 3")
    assert result.is_error
    assert "0 matches" in result.content
    assert path.read_text() == "a = 1\n"


async def test_several_matches_fail_saying_how_many_and_leave_the_file(session: Session) -> None:
    path = session.put("m.py", "x = 0\nx = 0\nx = 0\n")
    result = await session.call("Edit", path="m.py", old_string="x = 0", new_string="x = 1")
    assert result.is_error
    assert "occurs 3 times" in result.content
    assert "replace_all" in result.content
    assert path.read_text() == "x = 0\nx = 0\nx = 0\n"


async def test_replace_all_replaces_every_occurrence(session: Session) -> None:
    path = session.put("m.py", "x = 0\nx = 0\ny = 0\nx = 0\n")
    result = await session.call("Edit", path="m.py", old_string="x = 0", new_string="x = 1", replace_all=True)
    assert not result.is_error
    assert path.read_text() == "x = 1\nx = 1\ny = 0\nx = 1\n"
    assert "replaced 3 occurrences" in result.content


async def test_missing_file_is_an_error_pointing_to_write(session: Session) -> None:
    result = await session.call("Edit", path="new.py", old_string="a", new_string="b")
    assert result.is_error
    assert "File not found: new.py" in result.content
    assert "Write" in result.content


async def test_binary_file_is_refused(session: Session) -> None:
    path = session.put("blob.bin", b"ab\x00cd")
    result = await session.call("Edit", path="blob.bin", old_string="ab", new_string="xy")
    assert result.is_error
    assert "binary" in result.content
    assert path.read_bytes() == b"ab\x00cd"


async def test_empty_or_identical_strings_are_refused(session: Session) -> None:
    session.put("m.py", "a\n")
    empty = await session.call("Edit", path="m.py", old_string="", new_string="b")
    same = await session.call("Edit", path="m.py", old_string="a", new_string="a")
    assert empty.is_error and "old_string is empty" in empty.content
    assert same.is_error and "the same" in same.content


async def test_windows_line_endings_get_a_hint_when_nothing_matches(session: Session) -> None:
    session.put("w.txt", "one\r\ntwo\r\n")
    result = await session.call("Edit", path="w.txt", old_string="one\ntwo", new_string="1\n2")
    assert result.is_error
    assert "Windows line endings" in result.content


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
async def test_an_edit_keeps_the_file_mode(session: Session) -> None:
    path = session.put("run.sh", "echo a\n")
    path.chmod(0o750)
    await session.call("Edit", path="run.sh", old_string="a", new_string="b")
    assert stat.S_IMODE(path.stat().st_mode) == 0o750
    assert path.read_text() == "echo b\n"


async def test_editing_through_a_symlink_changes_the_target_and_keeps_the_link(session: Session) -> None:
    target = session.put("real.txt", "old\n")
    link = session.root / "link.txt"
    link.symlink_to(target)
    result = await session.call("Edit", path="link.txt", old_string="old", new_string="new")
    assert not result.is_error
    assert link.is_symlink()
    assert target.read_text() == "new\n"


async def test_no_temporary_file_is_left_behind(session: Session) -> None:
    session.put("m.py", "a\n")
    await session.call("Edit", path="m.py", old_string="a", new_string="b")
    assert sorted(p.name for p in session.root.iterdir()) == ["m.py"]
