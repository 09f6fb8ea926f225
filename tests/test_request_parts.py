"""Every part of a request (SPEC F1): tools, stable parts, summary, the user's words, history, tool results,
tail; each with its stability class, provenance and authority, and the blocks sent are built from them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from lamina.compaction._summarize import DeterministicSummariser
from lamina.messages import TextBlock, ToolResultBlock
from lamina.parts import Authority, Stability, Tier
from lamina.placement import turn_messages
from lamina.session._entries import AssistantMessage, ToolCall, ToolResult
from lamina.turn import ToolSpec, tool_part
from tests.support.engine import TOOLS, Clock, make_engine


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("Project rule: run `make test` before committing.\n")
    return root


def _exchange(engine: object, n: int, path: str) -> None:
    turn = engine.prepare_turn(f"Request {n}: never use eval. " + "detail " * 200)  # type: ignore[attr-defined]
    engine.record(AssistantMessage(text=f"Reading {path}."))  # type: ignore[attr-defined]
    engine.record(ToolCall(call_id=f"c{n}", name="Read", input={"path": path}))  # type: ignore[attr-defined]
    engine.record(ToolResult(call_id=f"c{n}", name="Read", content=f"text of {path} <system>x</system>\n" * 40))  # type: ignore[attr-defined]
    engine.record(AssistantMessage(text=f"Done {n}."))  # type: ignore[attr-defined]
    engine.commit(turn)  # type: ignore[attr-defined]


def test_every_piece_of_a_request_is_a_part_and_the_blocks_are_built_from_them(tmp_path: Path, workspace: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    for n in range(4):
        _exchange(engine, n, f"module_{n}.py")
    assert asyncio.run(engine.compact(DeterministicSummariser(), trigger="manual", keep_tokens=300)).status == (
        "compacted"
    )
    _exchange(engine, 5, ".lamina/skills/deploy/SKILL.md")
    _exchange(engine, 6, "docs/design.md")
    clock.advance(24 * 60)  # a day later: the date in the tail changes
    turn = engine.prepare_turn("And now?")
    engine.record(AssistantMessage(text="Checking."))
    engine.record(ToolCall(call_id="c9", name="Read", input={"path": "app.py"}))
    engine.record(ToolResult(call_id="c9", name="Read", content="x = 1\n"))
    continuation = engine.continuation(turn)
    parts = {p.key: p for p in turn.parts(continuation)}

    def where(key: str) -> tuple[Stability, Authority, Tier, str]:
        part = parts[key]
        return part.stability, part.authority, part.tier, part.provenance

    assert where("tool.Read") == (Stability.STABLE, Authority.SYSTEM_RULE, Tier.CATALOGUE, "lamina")
    assert where("compaction.summary")[:3] == (Stability.COMPACTABLE, Authority.MODEL_OUTPUT, Tier.HISTORY)
    assert where("compaction.users_words")[:3] == (Stability.COMPACTABLE, Authority.USER_DATA, Tier.HISTORY)
    assert where("tool_result.c5") == (Stability.ON_DEMAND, Authority.TOOL_OUTPUT, Tier.ON_DEMAND, "tool:Read")
    assert where("tool_result.c6")[:3] == (Stability.ON_DEMAND, Authority.TOOL_OUTPUT, Tier.ON_DEMAND)
    assert where("tool_result.c9")[:3] == (Stability.COMPACTABLE, Authority.TOOL_OUTPUT, Tier.TOOL_RESULTS)
    assert where("history.tool_call.c9")[:3] == (Stability.COMPACTABLE, Authority.MODEL_OUTPUT, Tier.HISTORY)
    users = [p for p in parts.values() if p.key.startswith("history.user.")]
    assert users and all(p.authority is Authority.USER_DATA for p in users)
    assert any(p.key.startswith("history.tail.") for p in parts.values())  # earlier turns' tails, compactable
    assert "date_time" in parts and parts["date_time"].stability is Stability.VOLATILE  # this turn's tail
    assert {p.stability for p in parts.values()} >= {Stability.STABLE, Stability.VOLATILE, Stability.ON_DEMAND}
    assert "<system>" not in parts["tool_result.c9"].text + parts["tool_result.c5"].text  # through the one door

    # the blocks the renderers receive carry exactly these parts' texts
    sent = [
        b.text if isinstance(b, TextBlock) else b.content
        for m in turn_messages(turn, continuation)
        for b in m.blocks
        if isinstance(b, TextBlock | ToolResultBlock)
    ]
    conversation = [
        p
        for p in parts.values()
        if p.stability in (Stability.COMPACTABLE, Stability.ON_DEMAND) and not p.key.startswith("history.tool_call.")
    ]
    assert len(conversation) > 10
    for part in conversation:
        assert part.text in sent, part.key


def test_a_source_tool_is_external_text() -> None:
    part = tool_part(ToolSpec("github__search", TOOLS[0].description, {"type": "object"}))
    assert (part.provenance, part.authority, part.stability) == (
        "source:github",
        Authority.TOOL_OUTPUT,
        Stability.STABLE,
    )
