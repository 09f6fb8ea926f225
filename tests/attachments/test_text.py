"""Text attachments in every Unicode encoding a byte-order mark or NULs say, and mail in its own charsets."""

from __future__ import annotations

import codecs
from email.message import EmailMessage
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from lamina.attachments import AttachmentRenderer, AttachmentStore, MediaSupport, NamedBytes
from lamina.context import TextBlock

CSV = "article;prix\ncafé;2,50 €\nthé;1,80 €\n"


@pytest.fixture
def store(tmp_path: Path) -> AttachmentStore:
    return AttachmentStore(tmp_path / "session" / "attachments", tmp_path / "session" / "data")


@pytest.mark.parametrize(
    ("data", "note"),
    [
        (codecs.BOM_UTF8 + CSV.encode(), ""),
        (codecs.BOM_UTF16_LE + CSV.encode("utf-16-le"), "read as UTF-16 LE (from its byte-order mark)"),
        (codecs.BOM_UTF16_BE + CSV.encode("utf-16-be"), "read as UTF-16 BE (from its byte-order mark)"),
        (codecs.BOM_UTF32_LE + CSV.encode("utf-32-le"), "read as UTF-32 LE (from its byte-order mark)"),
        (codecs.BOM_UTF32_BE + CSV.encode("utf-32-be"), "read as UTF-32 BE (from its byte-order mark)"),
        (CSV.encode("utf-16-le"), "read as UTF-16 LE (no byte-order mark; from the pattern of its NUL bytes)"),
        (CSV.encode("utf-16-be"), "read as UTF-16 BE (no byte-order mark; from the pattern of its NUL bytes)"),
    ],
    ids=["utf-8-bom", "utf-16-le-bom", "utf-16-be-bom", "utf-32-le-bom", "utf-32-be-bom", "utf-16-le", "utf-16-be"],
)
def test_a_unicode_text_is_read_in_its_encoding_and_said_so(store: AttachmentStore, data: bytes, note: str) -> None:
    (ref,) = store.add_all([NamedBytes("prices.csv", data)])
    assert (ref.kind, ref.media_type, ref.note) == ("text", "text/plain", note)
    assert store.text_path(ref).read_text(encoding="utf-8") == CSV  # the mark dropped, no NUL, no mojibake
    (block,) = AttachmentRenderer(store, "anthropic", MediaSupport())(ref)
    assert isinstance(block, TextBlock) and "café;2,50 €" in block.text and "\x00" not in block.text


@pytest.mark.slow
def test_a_utf16_calendar_and_page_are_converted_as_what_they_are(store: AttachmentStore) -> None:
    page = "<!DOCTYPE html><html><body><h1>Réunion</h1><p>à midi</p></body></html>"
    calendar = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nSUMMARY:Réunion\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    html, ics = store.add_all(
        [NamedBytes("page.html", page.encode("utf-16")), NamedBytes("invite.ics", calendar.encode("utf-16"))]
    )
    assert (html.media_type, ics.media_type) == ("text/html", "text/calendar")
    assert "# Réunion" in store.text_path(html).read_text() and "à midi" in store.text_path(html).read_text()
    assert "Event: Réunion" in store.text_path(ics).read_text()


ascii_heavy = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")) | st.sampled_from("abcdefghij ,;.\n\t"), max_size=200
)


@pytest.mark.slow
@given(text=ascii_heavy, codec=st.sampled_from(["utf-8-sig", "utf-16", "utf-32"]))
def test_any_text_with_a_byte_order_mark_reads_back_exactly(
    tmp_path_factory: pytest.TempPathFactory, text: str, codec: str
) -> None:
    text = "a" + text  # never empty
    folder = tmp_path_factory.mktemp("s")
    store = AttachmentStore(folder / "attachments", folder / "data")
    (ref,) = store.add_all([NamedBytes("notes.txt", text.encode(codec))])
    if ref.kind == "text":  # (a text that reads as mail, a page or a calendar is converted instead)
        assert store.text_path(ref).read_bytes().decode("utf-8") == text


def _latin1_mail() -> bytes:
    """A mail as an old client sends it: raw 8-bit ISO-8859-1 in the body, encoded words in the headers."""
    return (
        b"From: =?iso-8859-1?q?Andr=E9_Dupr=E9?= <andre@example.com>\r\n"
        b"To: =?utf-8?b?Q2zDqW1lbmNl?= <clem@example.com>\r\n"
        b"Subject: =?iso-8859-1?q?R=E9union_budg=E9taire?=\r\n"
        b"Date: Mon, 30 Nov 2026 09:00:00 +0100\r\n"
        b"MIME-Version: 1.0\r\n"
        b'Content-Type: multipart/mixed; boundary="b1"\r\n'
        b"\r\n"
        b"--b1\r\n"
        b"Content-Type: text/plain; charset=iso-8859-1\r\n"
        b"Content-Transfer-Encoding: 8bit\r\n"
        b"\r\n"
        b"Le caf\xe9 est \xe0 2,50 \xa4 ce matin.\r\n"
        b"--b1\r\n"
        b"Content-Type: text/plain; charset=koi8-r\r\n"
        b"Content-Transfer-Encoding: 8bit\r\n"
        b"\r\n"
        b"\xf0\xd2\xc9\xd7\xc5\xd4\r\n"
        b"--b1\r\n"
        b"Content-Type: text/csv\r\n"
        b"Content-Disposition: attachment; filename*=iso-8859-1''d%E9penses.csv\r\n"
        b"\r\n"
        b"a,b\r\n"
        b"--b1--\r\n"
    )


def test_a_mail_with_non_utf8_bytes_is_parsed_as_mail_in_each_parts_charset(store: AttachmentStore) -> None:
    (ref,) = store.add_all([NamedBytes("budget.eml", _latin1_mail())])
    assert (ref.kind, ref.media_type, ref.note) == ("document", "message/rfc822", "")
    text = store.text_path(ref).read_text()
    assert "From: André Dupré <andre@example.com>" in text
    assert "To: Clémence <clem@example.com>" in text
    assert "Subject: Réunion budgétaire" in text
    assert "Le café est à 2,50 ¤ ce matin." in text  # ISO-8859-1, as the part says
    assert "Привет" in text  # KOI8-R, as the other part says
    assert "- dépenses.csv (text/csv, 3 bytes)" in text  # RFC 2231 file name
    assert "Content-Transfer-Encoding" not in text and "=?iso" not in text


def test_raw_8bit_headers_read_as_utf8_else_windows_1252(store: AttachmentStore) -> None:
    message = EmailMessage()
    message["From"] = "ada@example.com"
    message["To"] = "bob@example.com"
    message.set_content("corps\n")
    head, _, body = message.as_bytes().partition(b"\n\n")
    raw = head + b"\nSubject: caf\xe9 cr\xe8me\n\n" + body
    (ref,) = store.add_all([NamedBytes("old.eml", raw)])
    assert ref.media_type == "message/rfc822"
    assert "Subject: café crème" in store.text_path(ref).read_text()


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.slow
@given(subject=st.text(st.sampled_from("abcxyz ABC 0123 éèêàçùôîïüöäßÉÀ€æœ"), min_size=1, max_size=40))
def test_any_raw_windows_1252_subject_reads_back_exactly(
    tmp_path_factory: pytest.TempPathFactory, subject: str
) -> None:
    subject = " ".join(subject.split()) or "x"  # a header's value has no leading, trailing or double spaces
    encoded = subject.encode("cp1252")
    assume(not _is_utf8(encoded))  # bytes that are UTF-8 too read as UTF-8
    folder = tmp_path_factory.mktemp("s")
    store = AttachmentStore(folder / "attachments", folder / "data")
    raw = b"From: ada@example.com\nTo: bob@example.com\nSubject: " + encoded + b"\n\nbody\n"
    (ref,) = store.add_all([NamedBytes("m.eml", raw)])
    assert ref.media_type == "message/rfc822"
    assert f"Subject: {subject}\n" in store.text_path(ref).read_text()


def test_a_utf8_mail_with_a_byte_order_mark_keeps_its_first_header(store: AttachmentStore) -> None:
    raw = codecs.BOM_UTF8 + b"From: ada@example.com\nTo: bob@example.com\nSubject: hi\n\nbody\n"
    (ref,) = store.add_all([NamedBytes("m.eml", raw)])
    assert store.text_path(ref).read_text().startswith("From: ada@example.com\nTo: bob@example.com\n")
