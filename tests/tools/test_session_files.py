"""The tools over a database store's session files: results put there, `lamina:/session/…` paths read back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lamina.session import VIRTUAL_ROOT
from lamina.session.postgres import PostgresSession, PostgresSessionStore
from lamina.tools import OffloadPolicy, PermissionMode, ToolContext, ToolPipeline, default_tools
from tests.support.postgres import fresh_schema, schema_url


@pytest.fixture
def pg_session(tmp_path: Path) -> Iterator[PostgresSession]:
    with (
        fresh_schema("tools") as schema,
        PostgresSessionStore(schema_url(schema), files_root=tmp_path / "host-a") as store,
        store.create() as session,
    ):
        yield session


def _pipeline(session: PostgresSession, cwd: Path) -> ToolPipeline:
    ctx = ToolContext(
        cwd=cwd,
        data_dir=session.data_dir,
        plans_dir=session.plans_dir,
        mode=PermissionMode.EXECUTE,
        offload=OffloadPolicy(threshold_tokens=200),
        files=session,
    )
    return ToolPipeline(default_tools(), ctx)


async def test_an_offloaded_result_is_in_the_database_and_read_back_through_its_shown_path(
    pg_session: PostgresSession, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    pipeline = _pipeline(pg_session, project)
    done = await pipeline.execute("c1", "Bash", {"command": "for i in $(seq 0 1999); do echo line $i; done"})
    assert done.full_output_path is not None
    shown = str(done.full_output_path)
    assert shown == f"{VIRTUAL_ROOT}/data/tool-results/c1.txt" and shown in done.content
    assert pg_session.stat_file("data/tool-results/c1.txt") is not None
    for cached in (pg_session.data_dir / "tool-results").iterdir():
        cached.unlink()  # another host: nothing in its cache
    again = await pipeline.execute("c2", "Read", {"path": shown, "offset": 1500, "limit": 2})
    assert not again.is_error, again.content
    assert "line 1499" in again.content
    grep = await pipeline.execute("c3", "Grep", {"pattern": "line 1777$", "path": f"{VIRTUAL_ROOT}/data"})
    assert grep.content.strip() == shown  # the cache's copy is shown as the session shows it


async def test_a_shown_path_the_session_does_not_hold_is_a_missing_file(
    pg_session: PostgresSession, tmp_path: Path
) -> None:
    done = await _pipeline(pg_session, tmp_path).execute("c1", "Read", {"path": f"{VIRTUAL_ROOT}/data/none.txt"})
    assert done.is_error
