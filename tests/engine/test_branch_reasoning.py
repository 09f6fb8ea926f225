"""Branches and the model's reasoning: a branch keeps signed blocks intact, inside a tool loop too."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from lamina.context import TurnContext
from lamina.placement import AnthropicTarget, ReasoningConfig, render
from lamina.session import AssistantMessage, Reasoning, ToolCall, ToolResult
from tests.support.engine import Clock, make_engine

_FIRST = (
    Reasoning(provider="anthropic", kind="thinking", text="Read both files first.", signature="SIG1/+=="),
    Reasoning(provider="anthropic", kind="redacted_thinking", data="REDACTED1/+=="),
)
_SECOND = (Reasoning(provider="anthropic", kind="thinking", text="", signature="SIG2omitted=="),)
_TARGET = AnthropicTarget(model="claude-sonnet-5", max_tokens=16_000, reasoning=ReasoningConfig(thinking="adaptive"))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("Run the tests before you finish.\n")
    return root


def _wire_block(reasoning: Reasoning) -> dict[str, Any]:
    if reasoning.kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": reasoning.data}
    return {"type": "thinking", "thinking": reasoning.text, "signature": reasoning.signature}


def _body(turn: TurnContext, target: AnthropicTarget) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(json.dumps(render(turn, target)))
    return body


def _loop(tmp_path: Path, workspace: Path) -> tuple[Any, dict[str, str]]:
    """An engine whose session holds one turn with a two-step tool loop, each step with its thinking."""
    engine = make_engine(tmp_path, workspace, Clock(), on_disk=True)
    turn = engine.prepare_turn("Compare a.py and b.py")
    engine.commit(turn)
    ids = {"first": engine.record(AssistantMessage(text="", reasoning=_FIRST)).id}
    ids["call a"] = engine.record(ToolCall(call_id="ta", name="Read", input={"path": "a.py"})).id
    ids["call b"] = engine.record(ToolCall(call_id="tb", name="Read", input={"path": "b.py"})).id
    ids["result a"] = engine.record(ToolResult(call_id="ta", name="Read", content="A")).id
    ids["result b"] = engine.record(ToolResult(call_id="tb", name="Read", content="B")).id
    ids["second"] = engine.record(AssistantMessage(text="", reasoning=_SECOND)).id
    engine.record(ToolCall(call_id="tc", name="Bash", input={"command": "diff a.py b.py"}))
    engine.record(ToolResult(call_id="tc", name="Bash", content="1c1"))
    engine.record(AssistantMessage(text="They differ in one line."))
    return engine, ids


@pytest.mark.parametrize("point", ["call a", "call b", "result a", "result b"])
def test_a_branch_inside_a_tool_loop_sends_every_signed_block_of_that_step_unchanged(
    tmp_path: Path, workspace: Path, point: str
) -> None:
    engine, ids = _loop(tmp_path, workspace)
    logged = engine.session.get(ids["first"])
    branch = engine.branch(ids[point])
    on_branch = next(e for e in engine.session.path() if e.id == ids["first"])
    assert isinstance(on_branch, AssistantMessage) and isinstance(logged, AssistantMessage)
    assert msgspec.json.encode(on_branch.reasoning) == msgspec.json.encode(logged.reasoning)  # the same bytes

    turn = engine.prepare_turn("Only compare a.py")
    body = _body(turn, _TARGET)
    messages = body["messages"]
    # the step the branch ends in: its assistant message opens with its thinking, unchanged and in order,
    # then its calls; the next user message answers every call (the open ones as interrupted)
    step = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    content = messages[step]["content"]
    assert content[: len(_FIRST)] == [_wire_block(r) for r in _FIRST]
    uses = [b["id"] for b in content if b["type"] == "tool_use"]
    assert uses == (["ta"] if point == "call a" else ["ta", "tb"])
    assert [b["type"] for b in content] == ["thinking", "redacted_thinking"] + ["tool_use"] * len(uses)
    answered = [b["tool_use_id"] for b in messages[step + 1]["content"] if b["type"] == "tool_result"]
    assert sorted(answered) == uses
    assert len(branch.open_calls) == {"call a": 1, "call b": 2, "result a": 1, "result b": 0}[point]
    assert "SIG2omitted" not in json.dumps(body)  # the abandoned step is not on the branch
    assert json.dumps(body).count("SIG1/+==") == 1


def test_a_branch_at_the_step_keeps_the_thinking_when_completed_turns_drop_theirs(
    tmp_path: Path, workspace: Path
) -> None:
    engine, ids = _loop(tmp_path, workspace)
    engine.branch(ids["call b"])
    turn = engine.prepare_turn("Only compare a.py")
    target = dataclasses.replace(_TARGET, reasoning=ReasoningConfig(thinking="adaptive", history="drop"))
    body = _body(turn, target)
    step = max(i for i, m in enumerate(body["messages"]) if m["role"] == "assistant")
    assert body["messages"][step]["content"][: len(_FIRST)] == [_wire_block(r) for r in _FIRST]


def test_a_branch_seed_holds_no_reasoning(tmp_path: Path, workspace: Path) -> None:
    engine, ids = _loop(tmp_path, workspace)
    engine.branch(ids["result b"], seed=True)
    turn = engine.prepare_turn("Go on")
    sent = json.dumps([p.text for p in turn.one_shots])
    assert "branch" in sent
    for secret in ("SIG1", "REDACTED1", "Read both files first."):
        assert secret not in sent
