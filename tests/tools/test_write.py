"""Write: creates parent folders, reports the bytes written, replaces whole files."""

from __future__ import annotations

from tests.tools.conftest import Session


async def test_write_creates_parent_folders_and_reports_bytes(session: Session) -> None:
    result = await session.call("Write", path="a/b/c.txt", content="héllo\n")
    assert not result.is_error
    assert (session.root / "a/b/c.txt").read_text(encoding="utf-8") == "héllo\n"
    assert result.content == "Wrote 7 bytes to a/b/c.txt (new file)."


async def test_write_replaces_an_existing_file(session: Session) -> None:
    path = session.put("c.txt", "old content that is longer\n")
    result = await session.call("Write", path="c.txt", content="new")
    assert path.read_text() == "new"
    assert result.content == "Wrote 3 bytes to c.txt (replaced the previous 27 bytes)."


async def test_writing_to_a_folder_is_an_error(session: Session) -> None:
    (session.root / "dir").mkdir()
    result = await session.call("Write", path="dir", content="x")
    assert result.is_error
    assert "is a folder" in result.content


async def test_write_under_a_file_is_an_error_not_an_exception(session: Session) -> None:
    session.put("file.txt", "x")
    result = await session.call("Write", path="file.txt/child.txt", content="x")
    assert result.is_error
    assert result.content.startswith("Cannot write file.txt/child.txt")
