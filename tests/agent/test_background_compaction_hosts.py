"""Two hosts on one PostgreSQL session make one background compaction: a host that finds the claim taken does not."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from lamina.session import CompactionClaims, PreparedCompaction
from lamina.session.postgres import PostgresSessionStore
from tests.agent.test_background_compaction import THRESHOLD, WAIT, Events, GatedSummariser, _agent, _of
from tests.support.postgres import fresh_schema, schema_url


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema("bgcompact") as name:
        yield name


async def test_two_hosts_on_one_session_run_one_compaction(schema: str, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    host_a = PostgresSessionStore(schema_url(schema), files_root=tmp_path / "a", lease_seconds=30)
    host_b = PostgresSessionStore(schema_url(schema), files_root=tmp_path / "b", lease_seconds=30)
    try:
        summariser, events = GatedSummariser(), Events()
        async with _agent(host_a, workspace, summariser, events, compaction_band=None) as agent:
            with host_b.open(agent.session.id, writable=False) as seen_by_b:
                assert isinstance(seen_by_b, CompactionClaims)
                assert seen_by_b.claim_compaction(60)  # host B is compacting this session
                n = 0  # host A's turns come near the threshold: it leaves the compaction to B
                while agent.engine.compactor.calibrated_context_tokens() < THRESHOLD - 1_500:
                    await agent.run_turn(f"Question {n}: keep total() correct. " + "context " * 300)
                    n += 1
                assert events.kinds() == [] and summariser.calls == 0
                seen_by_b.release_compaction()
                await agent.run_turn("One more")  # the claim is free: host A prepares it now
                assert events.kinds() == ["started"]
                await asyncio.wait_for(summariser.running.wait(), WAIT)
                assert not seen_by_b.claim_compaction(60)  # while A makes it, B cannot start a second one
                summariser.gate.set()
                await events.wait_for("ready")
                assert seen_by_b.claim_compaction(60)  # given back once made
                seen_by_b.release_compaction()
            assert summariser.calls == 1 and len(_of(agent, PreparedCompaction)) == 1
    finally:
        host_a.close()
        host_b.close()
