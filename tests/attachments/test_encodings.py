"""A text attachment in any encoding reaches the model as its text, its label naming the encoding read."""

from __future__ import annotations

from pathlib import Path

import pytest

from lamina.attachments import AttachmentStore, NamedBytes
from tests.support.encoded_texts import ENCODED

NAMES = {
    "gb18030": "GB18030",
    "gbk": "GB18030",  # GB18030 is GBK's superset: the same bytes, the same text
    "big5": "Big5",
    "shift_jis": "Shift-JIS",
    "euc_kr": "EUC-KR",
    "koi8_r": "KOI8-R",
    "cp1251": "Windows-1251",
    "iso8859_2": "ISO-8859-2 (Latin-2)",
    "cp1252": "Windows-1252",
}


@pytest.mark.parametrize("encoding", sorted(ENCODED))
def test_a_text_file_in_any_encoding_is_read_in_it_and_the_label_says_which(tmp_path: Path, encoding: str) -> None:
    store = AttachmentStore(tmp_path / "attachments", tmp_path / "data")
    (ref,) = store.add_all([NamedBytes("notes.txt", ENCODED[encoding].encode(encoding))])
    assert ref.kind == "text"
    assert store.text_path(ref).read_text(encoding="utf-8") == ENCODED[encoding]
    assert ref.note.startswith(f"not UTF-8: read as {NAMES[encoding]}")


def test_a_gbk_file_is_not_mojibake(tmp_path: Path) -> None:
    store = AttachmentStore(tmp_path / "attachments", tmp_path / "data")
    (ref,) = store.add_all([NamedBytes("hello.txt", "你好，世界。这是一个用简体中文写的文件。\n".encode("gbk"))])
    assert store.text_path(ref).read_text(encoding="utf-8") == "你好，世界。这是一个用简体中文写的文件。\n"
