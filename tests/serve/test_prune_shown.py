"""The inspector rebuilds each request with the tool output prunes it was sent with."""

from __future__ import annotations

import json
from pathlib import Path

from lamina.serve._requests import SessionRequests
from lamina.session import AssistantMessage, ToolCall, ToolResult
from tests.compaction.test_prune import _content, _engine
from tests.support.engine import Clock


def test_the_inspector_rebuilds_each_request_with_the_prunes_it_was_sent_with(tmp_path: Path) -> None:
    clock = Clock()
    engine = _engine(tmp_path, clock)
    for t in range(6):
        turn = engine.prepare_turn(f"Look at module {t}")
        engine.record(AssistantMessage(text=f"Reading m{t}.py.", model="claude-sonnet-5"))
        engine.record(ToolCall(call_id=f"call{t}", name="Read", input={"path": f"m{t}.py"}))
        engine.record(ToolResult(call_id=f"call{t}", name="Read", content=f"OLD-{t}\n" + _content(900)))
        engine.record(AssistantMessage(text=f"Read m{t}.py.", model="claude-sonnet-5"))
        engine.commit(turn)
        engine.end_turn()
    entries = list(engine.session.entries())
    engine.session.close()
    requests = SessionRequests(engine.session.id, entries)
    calls = [e for e in entries if isinstance(e, AssistantMessage)]
    bodies = [json.dumps(requests.rebuild(i).body) for i in range(len(calls))]
    assert "OLD-0" in bodies[1]  # sent before any prune
    assert "OLD-0" not in bodies[-1] and "[output pruned from context: Read" in bodies[-1]
    assert "OLD-0" in json.dumps(requests.rebuild(1).body)  # asked again after the pruned one: still unpruned
