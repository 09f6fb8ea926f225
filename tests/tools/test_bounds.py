"""Path bounds: no tool reaches outside the allowed roots, through `..` or through a symlink."""

from __future__ import annotations

from typing import Any

import pytest

from lamina.tools import Deny
from tests.tools.conftest import Session

# Each call names `secret.txt` in the folder outside the project, through `{via}`.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("Read", {"path": "{via}/secret.txt"}),
    ("Edit", {"path": "{via}/secret.txt", "old_string": "secret", "new_string": "leaked"}),
    ("Write", {"path": "{via}/secret.txt", "content": "overwritten"}),
    ("Write", {"path": "{via}/new/file.txt", "content": "created"}),
    ("Glob", {"pattern": "{via}/*.txt"}),
    ("Glob", {"pattern": "*.txt", "path": "{via}"}),
    ("Grep", {"pattern": "secret", "path": "{via}"}),
    ("Grep", {"pattern": "secret", "path": "{via}/secret.txt"}),
]


def fill(input: dict[str, Any], via: str) -> dict[str, Any]:
    return {k: v.format(via=via) if isinstance(v, str) else v for k, v in input.items()}


@pytest.mark.parametrize(("name", "input"), CALLS)
async def test_a_path_escaping_through_dot_dot_is_denied(session: Session, name: str, input: dict[str, Any]) -> None:
    secret = session.put("secret.txt", "secret\n", base=session.outside)
    result = await session.pipeline.execute("c", name, fill(input, "../outside"))
    assert result.is_error
    assert isinstance(result.decision, Deny)
    assert result.decision.by == "path_bounds"
    assert "outside the folders this session may" in result.content
    assert "secret\n" not in result.content
    assert secret.read_text() == "secret\n"
    assert not (session.outside / "new").exists()


@pytest.mark.parametrize(("name", "input"), CALLS)
async def test_a_path_escaping_through_a_symlink_is_denied(session: Session, name: str, input: dict[str, Any]) -> None:
    secret = session.put("secret.txt", "secret\n", base=session.outside)
    (session.root / "door").symlink_to(session.outside, target_is_directory=True)
    result = await session.pipeline.execute("c", name, fill(input, "door"))
    assert result.is_error
    assert isinstance(result.decision, Deny)
    assert result.decision.by == "path_bounds"
    assert f"resolves to {session.outside}" in result.content
    assert secret.read_text() == "secret\n"
    assert not (session.outside / "new").exists()


async def test_a_symlinked_file_pointing_outside_is_denied(session: Session) -> None:
    secret = session.put("secret.txt", "secret\n", base=session.outside)
    (session.root / "innocent.txt").symlink_to(secret)
    read = await session.call("Read", path="innocent.txt")
    write = await session.call("Write", path="innocent.txt", content="x")
    assert read.is_error and write.is_error
    assert secret.read_text() == "secret\n"


async def test_an_absolute_path_outside_is_denied(session: Session) -> None:
    secret = session.put("secret.txt", "secret\n", base=session.outside)
    result = await session.call("Read", path=str(secret))
    assert result.is_error
    assert result.decision == Deny(result.content, by="path_bounds")


async def test_dot_dot_that_stays_inside_is_allowed(session: Session) -> None:
    session.put("a/b.txt", "inside\n")
    result = await session.call("Read", path="a/../a/./b.txt")
    assert not result.is_error
    assert "inside" in result.content


async def test_a_symlink_inside_the_roots_is_followed(session: Session) -> None:
    session.put("real/file.txt", "here\n")
    (session.root / "alias").symlink_to(session.root / "real", target_is_directory=True)
    result = await session.call("Read", path="alias/file.txt")
    assert result.content == "1\there"


async def test_a_symlink_loop_is_denied_not_raised(session: Session) -> None:
    (session.root / "loop").symlink_to(session.root / "loop")
    result = await session.call("Read", path="loop")
    assert result.is_error


async def test_an_extra_allowed_root_may_be_used(session: Session) -> None:
    s = session.with_context(allowed_roots=(session.root, session.outside))
    s.put("notes.txt", "shared\n", base=session.outside)
    result = await s.call("Read", path=str(session.outside / "notes.txt"))
    assert result.content == "1\tshared"


async def test_glob_and_grep_do_not_follow_symlinks_out_of_the_tree(session: Session) -> None:
    session.put("secret.txt", "secret\n", base=session.outside)
    session.put("ok.txt", "secret-ish but fine\n")
    (session.root / "door").symlink_to(session.outside, target_is_directory=True)
    (session.root / "innocent.txt").symlink_to(session.outside / "secret.txt")
    grep = await session.call("Grep", pattern="secret", output_mode="content")
    assert grep.content.splitlines()[0] == "ok.txt:1:secret-ish but fine"
    assert "door" not in grep.content
    assert "1 symlinked file(s) pointing outside the allowed folders were not searched" in grep.content
    glob = await session.call("Glob", pattern="**/*.txt")
    assert "door/secret.txt" not in glob.content.splitlines()
