"""A compaction in the middle of a turn keeps the one-shots that turn already delivered (SPEC F2)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from lamina.compaction import DeterministicSummariser
from lamina.session import AssistantMessage, OutboxRecord, ToolCall, ToolResult
from tests.support.engine import ANTHROPIC, Clock, make_engine

NOTE = "The user interrupted the previous turn: check before continuing. (one-shot 7f3a)"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("Project rule: run `make test` before committing.\n")
    return root


def _count(body: object, text: str) -> int:
    return json.dumps(body).count(text)


def test_delivered_one_shots_stay_in_the_turn_after_a_compaction_and_are_never_sent_again(
    tmp_path: Path, workspace: Path
) -> None:
    engine = make_engine(tmp_path, workspace, Clock())
    for n in range(4):  # earlier turns for the compaction to summarise
        turn = engine.prepare_turn(f"Request {n}: " + "detail " * 300)
        engine.record(AssistantMessage(text=f"Answer {n}. " + "words " * 300))
        engine.commit(turn)
    engine.queue_one_shot("interruption", NOTE)
    turn = engine.prepare_turn("Now fix module_9.py")
    assert _count(engine.request(turn, ANTHROPIC), NOTE) == 1
    engine.commit(turn)  # the provider accepted the first request: the note is delivered
    engine.record(AssistantMessage(text="Reading."))
    engine.record(ToolCall(call_id="c1", name="Read", input={"path": "module_9.py"}))
    engine.record(ToolResult(call_id="c1", name="Read", content="x = 1\n" * 50))

    outcome = asyncio.run(engine.compactor.compact(DeterministicSummariser(), trigger="threshold", keep_tokens=200))
    assert outcome.status == "compacted"
    again = engine.reprepare(turn)
    assert NOTE in [o.text for o in again.one_shots]  # the model saw it in this turn: it stays in the turn
    assert _count(engine.request(again, ANTHROPIC), NOTE) == 1
    engine.commit(again)
    delivered = [e for e in engine.session.entries() if isinstance(e, OutboxRecord) and e.status == "delivered"]
    assert len([e for e in delivered if e.kind == "interruption"]) == 1  # delivered once, recorded once
    engine.record(AssistantMessage(text="Fixed."))
    engine.end_turn()

    after = engine.prepare_turn("Anything else?")
    assert NOTE not in [o.text for o in after.one_shots]  # never delivered again after the turn
    body = engine.request(after, ANTHROPIC)
    assert _count(body, NOTE) == 1  # only where it was sent: that turn's tail in the history
    assert NOTE not in json.dumps(body["messages"][-1])
