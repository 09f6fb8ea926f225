"""Read and Grep take text in any encoding: the file's own text, Read's note naming the encoding."""

from __future__ import annotations

import pytest

from tests.support.encoded_texts import ENCODED
from tests.tools.conftest import Session


@pytest.mark.parametrize("encoding", sorted(ENCODED))
async def test_read_shows_the_text_in_its_encoding(session: Session, encoding: str) -> None:
    session.put("notes.txt", ENCODED[encoding].encode(encoding))
    result = await session.call("Read", path="notes.txt")
    assert not result.is_error
    lines = result.content.splitlines()
    assert [line.split("\t", 1)[1] for line in lines[:-1]] == ENCODED[encoding].splitlines()
    assert lines[-1].startswith("[not UTF-8: read as ")


@pytest.mark.parametrize("encoding", sorted(ENCODED))
async def test_grep_finds_words_in_any_encoding(session: Session, encoding: str) -> None:
    text = ENCODED[encoding]
    word = text.split("\n")[1][:3]
    session.put("notes.txt", text.encode(encoding))
    result = await session.call("Grep", pattern=word, output_mode="content")
    assert result.content.splitlines() == [f"notes.txt:2:{text.splitlines()[1]}"]


async def test_read_takes_utf16_with_a_byte_order_mark(session: Session) -> None:
    session.put("win.txt", "one\ntwo\n".encode("utf-16"))
    result = await session.call("Read", path="win.txt")
    assert result.content.splitlines()[:2] == ["1\tone", "2\ttwo"]
