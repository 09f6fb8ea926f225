"""Text in any encoding (`lamina._text_codec`): BOMs and UTF-8, Windows-1252 when plausible, else charset-normalizer."""

from __future__ import annotations

import codecs

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lamina._text_codec import UTF8, decode, find_codec
from tests.support.encoded_texts import ENCODED


@pytest.mark.parametrize("encoding", sorted(ENCODED))
def test_each_encoding_reads_back_the_text_and_is_named(encoding: str) -> None:
    text = ENCODED[encoding]
    codec = find_codec(text.encode(encoding))
    assert codec is not None and codec.guessed
    assert decode(text.encode(encoding), codec) == text
    assert codec.note.startswith("not UTF-8: read as ")


def test_a_short_western_file_stays_windows_1252() -> None:
    # charset-normalizer alone reads it as Windows-1250; Windows-1252 goes first when it reads plausibly
    codec = find_codec("Café déjà vu.\n".encode("cp1252"))
    assert codec is not None and codec.codec == "cp1252"


def test_byte_order_marks_and_bom_less_utf16_come_first() -> None:
    assert find_codec(codecs.BOM_UTF8 + b"x\n") == UTF8
    marked = find_codec("héllo\n".encode("utf-16"))
    assert marked is not None and marked.codec == "utf-16" and "byte-order mark" in marked.note
    bare = find_codec("hello there\n".encode("utf-16-le"))
    assert bare is not None and bare.codec == "utf-16-le"


def test_a_sample_cut_inside_a_character_is_still_its_encoding() -> None:
    data = ENCODED["gb18030"].encode("gb18030")
    head = "日本語".encode()[:-1]
    assert find_codec(head, complete=False) == UTF8
    cut = find_codec(data[:-1], complete=False)
    assert cut is not None and cut.codec == "gb18030"


@given(st.binary(max_size=200))
def test_any_bytes_give_a_codec_that_decodes_them_or_none(data: bytes) -> None:
    codec = find_codec(data)
    if codec is not None:
        assert isinstance(decode(data, codec), str)


@given(st.text(max_size=200))
def test_utf8_is_always_utf8(text: str) -> None:
    data = text.encode()
    if b"\0" not in data and not data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        assert find_codec(data) in (UTF8, None)
