"""Paths that cannot be raced: a link re-pointed after the check never takes a tool outside (or elsewhere).

The pipeline checks a call's paths, then (after an approval, which can take minutes) the tool opens
them: every tool opens by descriptor from the checked location, so a link re-pointed in between is
refused, never followed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from lamina.tools import Allow, Deny, PermissionMode, PermissionRequest, default_tools
from tests.tools.conftest import Session


def point(link: Path, target: Path) -> None:
    """Make `link` point at `target`, atomically (a new link renamed over the old one)."""
    fresh = link.with_name(link.name + ".new")
    fresh.symlink_to(target)
    os.replace(fresh, link)


def repointing(link: Path, target: Path) -> Any:
    """An approval callback that says yes, after re-pointing `link` at `target` (as a racing process would)."""

    async def ask(request: PermissionRequest) -> Allow | Deny:
        point(link, target)
        return Allow()

    return ask


@pytest.mark.parametrize(
    ("name", "input"),
    [
        ("Write", {"path": "notes.md", "content": "overwritten\n"}),
        ("Edit", {"path": "notes.md", "old_string": "secret", "new_string": "leaked"}),
    ],
)
async def test_a_file_link_repointed_during_the_approval_is_not_written_through(
    session: Session, name: str, input: dict[str, Any]
) -> None:
    session.put("real-notes.md", "my secret notes\n")
    secret = session.put("secret.md", "my secret key\n", base=session.outside)
    (session.root / "notes.md").symlink_to(session.root / "real-notes.md")
    asked = session.with_tools(
        default_tools(), ask=repointing(session.root / "notes.md", secret), mode=PermissionMode.ASK
    )
    result = await asked.call(name, **input)
    assert result.is_error
    assert f"it resolves outside the allowed folders (to {secret})" in result.content
    assert secret.read_text() == "my secret key\n"
    assert (session.root / "real-notes.md").read_text() == "my secret notes\n"


@pytest.mark.parametrize(
    ("name", "input"),
    [
        ("Write", {"path": "door/notes.md", "content": "overwritten\n"}),
        ("Write", {"path": "door/new/notes.md", "content": "created\n"}),
        ("Edit", {"path": "door/notes.md", "old_string": "secret", "new_string": "leaked"}),
    ],
)
async def test_a_folder_link_repointed_during_the_approval_is_not_written_through(
    session: Session, name: str, input: dict[str, Any]
) -> None:
    session.put("docs/notes.md", "my secret notes\n")
    secret = session.put("notes.md", "my secret key\n", base=session.outside)
    (session.root / "door").symlink_to(session.root / "docs", target_is_directory=True)
    asked = session.with_tools(
        default_tools(), ask=repointing(session.root / "door", session.outside), mode=PermissionMode.ASK
    )
    result = await asked.call(name, **input)
    assert result.is_error
    assert secret.read_text() == "my secret key\n"
    assert sorted(p.name for p in session.outside.iterdir()) == ["notes.md"]


async def test_a_link_repointed_inside_the_workspace_during_the_approval_is_refused_too(session: Session) -> None:
    """The approval named one file; a link re-pointed at another file, even inside, is not what was approved."""
    session.put("notes.md", "notes\n")
    other = session.put(".lamina/config.toml", 'mode = "ask"\n')
    (session.root / "link.md").symlink_to(session.root / "notes.md")
    asked = session.with_tools(
        default_tools(), ask=repointing(session.root / "link.md", other), mode=PermissionMode.ASK
    )
    result = await asked.call("Write", path="link.md", content='mode = "execute"\n')
    assert result.is_error
    assert f"it changed after it was checked: it now resolves to {other}" in result.content
    assert other.read_text() == 'mode = "ask"\n'


# A process flipping a link between a folder inside and one outside, as fast as it can, while the
# tools run: the attack let 16-39 of 150 Writes and 1-3 of 300 Reads through.
FLIPPER = textwrap.dedent(
    """
    import os, sys
    link, inside, outside = sys.argv[1:]
    fresh = link + ".flip"
    while True:
        for target in (inside, outside):
            try:
                os.symlink(target, fresh)
                os.replace(fresh, link)
            except OSError:
                pass
    """
)


@pytest.fixture
def flipping(session: Session) -> Any:
    """`door` flipped between `inside/` and the outside folder by another process, for the test's length."""
    inside = session.root / "inside"
    session.put("inside/secret.txt", "inside\n")
    session.put("secret.txt", "OUTSIDE SECRET\n", base=session.outside)
    session.put("only-outside.txt", "OUTSIDE SECRET\n", base=session.outside)
    (session.root / "door").symlink_to(inside, target_is_directory=True)
    process = subprocess.Popen(
        [sys.executable, "-c", FLIPPER, str(session.root / "door"), str(inside), str(session.outside)]
    )
    try:
        yield session
    finally:
        process.kill()
        process.wait()


def _outside_unchanged(session: Session) -> None:
    assert sorted(p.name for p in session.outside.iterdir()) == ["only-outside.txt", "secret.txt"]
    assert (session.outside / "secret.txt").read_text() == "OUTSIDE SECRET\n"


@pytest.mark.slow
async def test_writes_and_edits_never_escape_through_a_flipping_link(flipping: Session) -> None:
    session = flipping
    for number in range(150):
        await session.call("Write", path="door/secret.txt", content=f"inside\nwrite {number}\n")
        await session.call("Write", path="door/new.txt", content="new\n")
        await session.call("Edit", path="door/secret.txt", old_string="inside", new_string="inside")
        await session.call("Edit", path="door/secret.txt", old_string="SECRET", new_string="leaked")
        _outside_unchanged(session)


@pytest.mark.slow
async def test_reads_and_searches_never_escape_through_a_flipping_link(flipping: Session) -> None:
    session = flipping
    for number in range(300):
        results = [await session.call("Read", path="door/secret.txt")]
        if number % 4 == 0:  # each Grep starts a worker process: fewer of them
            results += [
                await session.call("Grep", pattern="SECRET", path="door", output_mode="content"),
                await session.call("Grep", pattern="SECRET", path="door/secret.txt", output_mode="content"),
                await session.call("Glob", pattern="**/*.txt", path="door"),
                await session.call("Glob", pattern="door/*.txt"),
            ]
        for result in results:
            assert "OUTSIDE" not in result.content
            assert "only-outside" not in result.content
