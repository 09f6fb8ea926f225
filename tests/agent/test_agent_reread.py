"""Read again through the agent: a pointer while the result is in the request, decided from the log."""

from __future__ import annotations

from pathlib import Path

import pytest

from lamina.agent import AgentOptions, open_agent
from lamina.providers import RetryPolicy
from lamina.session import LocalSessionStore, ToolOutputPruned, ToolResult
from tests.wire.fixtures import anthropic_provider
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

_POINTER = "[app.py is unchanged since the latest Read of these lines; that result above is current]"


async def _no_sleep(_: float) -> None:
    return None


def _reads(wire: WireServer, turns: int) -> None:
    for _ in range(turns):
        wire.script(Reply(text="Reading.", tool_calls=[ToolUse("Read", {"path": "app.py"})]), Reply(text="Read."))


@pytest.mark.slow
async def test_a_read_of_an_unchanged_file_points_at_the_result_still_in_the_request(
    tmp_path: Path, wire: WireServer
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "app.py").write_text("".join(f"line {n}\n" for n in range(1, 81)))
    store = LocalSessionStore(tmp_path / "store")
    retry = RetryPolicy(sleep=_no_sleep)
    async with anthropic_provider(wire) as provider:
        _reads(wire, 2)
        agent = open_agent(
            store, provider, workspace=workspace, options=AgentOptions(retry=retry, mode="execute", prune=None)
        )
        await agent.run_turn("Read app.py")
        await agent.run_turn("Read app.py again")
        session_id = agent.engine.session.id
        agent.close()
        first, second = (e for e in store.open(session_id, writable=False).entries() if isinstance(e, ToolResult))
        assert first.content.startswith("1\tline 1\n") and first.read is not None
        assert second.content == _POINTER and second.read is not None
        assert second.read.unchanged_from == first.call_id and second.read.sha256 == first.read.sha256

        # a restarted session reads what the request holds from the log
        _reads(wire, 3)
        agent = open_agent(
            store, provider, workspace=workspace, session_id=session_id, options=AgentOptions(retry=retry, prune=None)
        )
        await agent.run_turn("And again")
        assert agent.engine.view[-2].content == _POINTER  # type: ignore[union-attr]
        # the file changed in one line: only the change goes
        (workspace / "app.py").write_text("".join(f"line {n}\n" for n in range(1, 81)).replace("line 7\n", "seven\n"))
        await agent.run_turn("It changed")
        changed = agent.engine.view[-2]
        assert isinstance(changed, ToolResult) and changed.read is not None
        assert changed.read.changes_from == first.call_id and "@@ -7,1 +7,1 @@\n-line 7\n+7\tseven" in changed.content
        # pruned from the request, it is sent whole again
        calls = tuple(e.call_id for e in agent.engine.view if isinstance(e, ToolResult))
        agent.engine.record(ToolOutputPruned(call_ids=calls))
        await agent.run_turn("Once more")
        last = agent.engine.view[-2]
        assert isinstance(last, ToolResult) and last.content.startswith("1\tline 1\n")
        assert last.read is not None and last.read.unchanged_from is None and last.read.changes_from is None
        assert [r.status for r in wire.requests] == [200] * 10
        agent.close()
