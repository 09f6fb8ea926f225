"""Read: numbered lines, windows, caps, and clear errors for missing, binary and odd files."""

from __future__ import annotations

import os

import pytest

from lamina.tools import OffloadPolicy, ReadTool
from tests.tools.conftest import Session


async def test_read_numbers_every_line_like_cat_n(session: Session) -> None:
    session.put("a.txt", "alpha\nbeta\n\ngamma")
    result = await session.call("Read", path="a.txt")
    assert not result.is_error
    assert result.content == "1\talpha\n2\tbeta\n3\t\n4\tgamma"


async def test_offset_and_limit_choose_a_window_and_say_where_to_continue(session: Session) -> None:
    session.put("n.txt", "".join(f"line {i}\n" for i in range(1, 101)))
    result = await session.call("Read", path="n.txt", offset=10, limit=3)
    rows, note = result.content.rsplit("\n", 1)
    assert rows.splitlines() == ["10\tline 10", "11\tline 11", "12\tline 12"]
    assert "lines 10–12 of 100" in note
    assert "offset=13" in note


async def test_read_accepts_absolute_paths(session: Session) -> None:
    path = session.put("sub/b.txt", "x\n")
    result = await session.call("Read", path=str(path))
    assert result.content == "1\tx"


async def test_missing_file_is_a_clear_error(session: Session) -> None:
    result = await session.call("Read", path="nope/missing.txt")
    assert result.is_error
    assert result.content == "File not found: nope/missing.txt"


async def test_binary_file_is_a_clear_error(session: Session) -> None:
    session.put("logo.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    result = await session.call("Read", path="logo.png")
    assert result.is_error
    assert "logo.png is a binary file" in result.content
    assert "text files only" in result.content


async def test_folder_is_a_clear_error(session: Session) -> None:
    (session.root / "pkg").mkdir()
    result = await session.call("Read", path="pkg")
    assert result.is_error
    assert "is a folder" in result.content


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
async def test_a_fifo_is_refused_without_blocking(session: Session) -> None:
    os.mkfifo(session.root / "pipe")
    result = await session.call("Read", path="pipe")
    assert result.is_error
    assert "not a regular file" in result.content


async def test_empty_file_says_so(session: Session) -> None:
    session.put("empty.txt", "")
    result = await session.call("Read", path="empty.txt")
    assert not result.is_error
    assert result.content == "empty.txt is empty."


async def test_offset_past_the_end_is_an_error_with_the_line_count(session: Session) -> None:
    session.put("short.txt", "a\nb\nc\n")
    result = await session.call("Read", path="short.txt", offset=9)
    assert result.is_error
    assert "offset 9 is past the end" in result.content
    assert "3 lines" in result.content


async def test_windows_line_endings_are_not_shown(session: Session) -> None:
    session.put("crlf.txt", "one\r\ntwo\r\n")
    result = await session.call("Read", path="crlf.txt")
    assert result.content == "1\tone\n2\ttwo"


async def test_text_that_is_not_utf8_is_read_in_its_encoding_and_says_which(session: Session) -> None:
    session.put("latin1.txt", "caf\xe9\n".encode("latin-1"))
    result = await session.call("Read", path="latin1.txt")
    assert not result.is_error
    assert result.content == "1\tcaf\xe9\n[not UTF-8: read as Windows-1252]"


async def test_overlong_lines_are_cut_and_the_next_line_still_numbered(session: Session) -> None:
    s = session.with_tools([ReadTool(max_line_chars=10)])
    s.put("wide.txt", "x" * 50_000 + "\nnext\n")
    result = await s.call("Read", path="wide.txt")
    lines = result.content.splitlines()
    assert lines[0] == "1\t" + "x" * 10 + " […line cut]"
    assert lines[1] == "2\tnext"
    assert "1 line(s) longer than 10 characters were cut" in lines[2]


async def test_max_lines_caps_one_read(session: Session) -> None:
    s = session.with_tools([ReadTool(max_lines=5)])
    s.put("n.txt", "".join(f"{i}\n" for i in range(1, 21)))
    result = await s.call("Read", path="n.txt", limit=100)
    assert result.content.count("\t") == 5
    assert "continue with offset=6" in result.content


async def test_a_read_stays_under_the_offload_threshold(session: Session) -> None:
    s = session.with_context(offload=OffloadPolicy(threshold_tokens=2_000))
    s.put("big.txt", "".join(f"line number {i} with some words on it\n" for i in range(1, 5_001)))
    result = await s.call("Read", path="big.txt")
    assert result.full_output_path is None  # paginated, not offloaded
    assert s.pipeline.context.estimator.count(result.content) <= 2_000
    assert "continue with offset=" in result.content
    assert "of 5,000" in result.content
    first_missing = int(result.content.rsplit("offset=", 1)[1].split(" ")[0].rstrip("]"))
    following = await s.call("Read", path="big.txt", offset=first_missing, limit=1)
    assert following.content.startswith(f"{first_missing}\tline number {first_missing} ")
