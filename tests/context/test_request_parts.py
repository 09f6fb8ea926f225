"""Every part of a request (SPEC F1): tools, stable parts, summary, the user's words, history, tool results,
tail; each with its stability class, provenance and authority, and the blocks sent are built from them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest

from lamina.attachments import NamedBytes
from lamina.compaction import DeterministicSummariser
from lamina.context import (
    Authority,
    Stability,
    TextBlock,
    Tier,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    message_parts,
    to_messages,
    tool_call_of,
    tool_part,
)
from lamina.engine import ContextEngine
from lamina.placement import (
    AnthropicTarget,
    OpenAIChatTarget,
    OpenAIResponsesTarget,
    RenderTarget,
    render,
)
from lamina.reports import budget_of_turn, compose_turn
from lamina.session import AssistantMessage, ToolCall, ToolResult
from lamina.tokens import DEFAULT_ESTIMATOR
from tests.attachments import files
from tests.support.engine import ANTHROPIC, TOOLS, Clock, json_body, make_engine


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("Project rule: run `make test` before committing.\n")
    return root


def _exchange(engine: ContextEngine, n: int, path: str) -> None:
    turn = engine.prepare_turn(f"Request {n}: never use eval. " + "detail " * 200)
    engine.record(AssistantMessage(text=f"Reading {path}."))
    engine.record(ToolCall(call_id=f"c{n}", name="Read", input={"path": path}))
    engine.record(ToolResult(call_id=f"c{n}", name="Read", content=f"text of {path} <system>x</system>\n" * 40))
    engine.record(AssistantMessage(text=f"Done {n}."))
    engine.commit(turn)


def test_every_piece_of_a_request_is_a_part_and_the_blocks_are_built_from_them(tmp_path: Path, workspace: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    for n in range(4):
        _exchange(engine, n, f"module_{n}.py")
    assert asyncio.run(
        engine.compactor.compact(DeterministicSummariser(), trigger="manual", keep_tokens=300)
    ).status == ("compacted")
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

    # the blocks the renderers receive are built from exactly these parts
    blocks = [b for m in turn.messages(continuation) for b in m.blocks]
    for block in blocks:
        assert block.parts, block
        if isinstance(block, TextBlock):
            assert block.text == "\n".join(p.text for p in block.parts)
        elif isinstance(block, ToolResultBlock):
            assert (block.content,) == tuple(p.text for p in block.parts)
        elif isinstance(block, ToolUseBlock):
            assert (block.name, dict(block.input)) == tool_call_of(block.parts[0])
    in_blocks = [p for b in blocks for p in b.parts]
    conversation = [p for p in parts.values() if p.stability in (Stability.COMPACTABLE, Stability.ON_DEMAND)]
    assert len(conversation) > 10
    # every part but the tools and the stable prefix (rendered around the conversation) is in a block
    assert {p.key for p in in_blocks} == {p.key for p in parts.values() if p.stability is not Stability.STABLE}


def test_a_source_tool_is_external_text() -> None:
    part = tool_part(ToolSpec("github__search", TOOLS[0].description, {"type": "object"}))
    assert (part.provenance, part.authority, part.stability) == (
        "source:github",
        Authority.TOOL_OUTPUT,
        Stability.STABLE,
    )


# --- every block of a rendered request has its part, in all three wire formats ------------------------------

Unit = tuple[str, Any]
"""One content-bearing block of a request body: ("tool", definition), ("text", text), ("call", (name, input)),
("result", content) or ("media", None)."""


def _anthropic_units(body: Mapping[str, Any]) -> list[Unit]:
    units: list[Unit] = [("tool", dict(t)) for t in body.get("tools", ())]
    units += [("text", b["text"]) for b in body.get("system", ())]
    for message in body["messages"]:
        for block in message["content"]:
            match block["type"]:
                case "text":
                    units.append(("text", block["text"]))
                case "tool_use":
                    units.append(("call", (block["name"], block["input"])))
                case "tool_result" if isinstance(block["content"], list):  # a result with the images it returned
                    text, *media = block["content"]
                    units.append(("result", text["text"]))
                    units += [("text", b["text"]) if b["type"] == "text" else ("media", None) for b in media]
                case "tool_result":
                    units.append(("result", block["content"]))
                case "image" | "document":
                    units.append(("media", None))
                case other:
                    raise AssertionError(f"unexpected block {other}")
    return units


def _chat_units(body: Mapping[str, Any]) -> list[Unit]:
    units: list[Unit] = [
        ("tool", {"name": f["name"], "description": f["description"], "input_schema": f["parameters"]})
        for f in (t["function"] for t in body.get("tools", ()))
    ]
    for message in body["messages"]:
        content = message.get("content")
        if message["role"] == "tool":
            units.append(("result", content))
        elif isinstance(content, str):
            units.append(("text", content))
        elif content is not None:
            for block in content:
                units.append(("text", block["text"]) if block["type"] == "text" else ("media", None))
        for call in message.get("tool_calls", ()):
            units.append(("call", (call["function"]["name"], json.loads(call["function"]["arguments"]))))
    return units


def _responses_units(body: Mapping[str, Any]) -> list[Unit]:
    units: list[Unit] = [
        ("tool", {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]})
        for t in body.get("tools", ())
    ]
    if body.get("instructions"):
        units.append(("text", body["instructions"]))
    for item in body["input"]:
        if item.get("type") == "function_call":
            units.append(("call", (item["name"], json.loads(item["arguments"]))))
        elif item.get("type") == "function_call_output" and isinstance(item["output"], list):
            text, *media = item["output"]
            units.append(("result", text["text"]))
            units += [("text", b["text"]) if b["type"] == "input_text" else ("media", None) for b in media]
        elif item.get("type") == "function_call_output":
            units.append(("result", item["output"]))
        elif isinstance(item["content"], str):
            units.append(("text", item["content"]))
        else:
            for block in item["content"]:
                units.append(("text", block["text"]) if block["type"] == "input_text" else ("media", None))
    return units


def _joins(text: str, texts: Sequence[str]) -> bool:
    """Whether `text` is one of `texts`, or a run of consecutive ones joined by a line feed or a blank line."""
    for start, first in enumerate(texts):
        if not text.startswith(first):
            continue
        for separator in ("\n", "\n\n"):
            joined = first
            for nxt in texts[start + 1 :]:
                if joined == text or len(joined) >= len(text):
                    break
                joined += separator + nxt
            if joined == text:
                return True
    return False


TARGETS = [
    ANTHROPIC,
    OpenAIChatTarget(model="gpt-5"),
    OpenAIResponsesTarget(model="gpt-5"),
]


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS, ids=["anthropic", "openai_chat", "openai_responses"])
def test_every_block_of_the_request_has_its_part_and_the_budget_is_their_sum(
    tmp_path: Path, workspace: Path, target: RenderTarget
) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    for n in range(3):
        _exchange(engine, n, f"module_{n}.py")
    assert asyncio.run(
        engine.compactor.compact(DeterministicSummariser(), trigger="manual", keep_tokens=300)
    ).status == ("compacted")
    # an earlier turn with attachments, a read of a skill and a tool call that never returned
    attached = [NamedBytes("chart.png", files.image("PNG")), NamedBytes("r.pdf", files.pdf(2))]
    earlier = engine.prepare_turn("Look at these.", attached)
    engine.record(ToolCall(call_id="s1", name="Read", input={"path": ".lamina/skills/deploy/SKILL.md"}))
    engine.record(ToolResult(call_id="s1", name="Read", content="# Deploy\nRun the script.\n"))
    engine.record(ToolCall(call_id="lost", name="Bash", input={"command": "make deploy", "timeout": 1.5}))
    engine.commit(earlier)
    engine.settings.set_mode("execute")  # a one-shot in this turn's tail
    clock.advance(60)
    turn = engine.prepare_turn("And now?", [NamedBytes("notes.txt", b"remember the milk\n")])
    engine.record(AssistantMessage(text="Checking."))
    engine.record(ToolCall(call_id="c9", name="Read", input={"z": 1, "path": "app.py"}))  # the model's key order
    engine.record(ToolResult(call_id="c9", name="Read", content="x = 1 <system>\n"))
    # an MCP tool that returned an image (stored as the pipeline stores it) and one the provider gets resized
    images, refused = engine.attachments.add_images(
        [
            NamedBytes("mcp image 1.png", files.image("PNG")),
            NamedBytes("mcp image 2.png", files.image("PNG", (3000, 200))),
        ]
    )
    assert len(images) == 2 and not refused
    engine.record(ToolCall(call_id="m1", name="imgs__chart", input={"kind": "png"}))
    engine.record(ToolResult(call_id="m1", name="imgs__chart", content="[image: mcp image 1.png]", attachments=images))
    continuation = engine.continuation(turn)
    attachments = engine.attachment_blocks(target)
    body = json_body(render(turn, target, continuation=continuation, attachments=attachments))
    parts = turn.parts(continuation, attachments)

    match target:
        case AnthropicTarget():
            units = _anthropic_units(body)
        case OpenAIChatTarget():
            units = _chat_units(body)
        case _:
            units = _responses_units(body)

    texts = [p.text for p in parts if p.text and p.media_tokens is None]
    definitions = [msgspec.json.decode(p.text) for p in parts if p.key.startswith("tool.")]
    calls = [tool_call_of(p) for p in parts if p.key.startswith("history.tool_call.")]
    media = [p for p in parts if p.media_tokens is not None]
    for kind, payload in units:  # no block without its part
        match kind:
            case "tool":
                assert payload in definitions, payload
            case "text" | "result":
                assert _joins(payload, texts), payload[:200]
            case "call":
                assert payload in calls, payload
            case _:
                assert media, "a media block without its part"
    assert sum(kind == "media" for kind, _ in units) == len(media) >= 1
    # the kept exchange, the skill read, the lost call and this turn's (the others are summarised)
    assert sum(kind == "call" for kind, _ in units) == len(calls) == 5
    assert ["z", "path"] in [list(payload[1]) for kind, payload in units if kind == "call"]
    shown = [payload for kind, payload in units if kind in ("text", "result")]
    for part in parts:  # no part without its block
        if part.text and part.media_tokens is None and not part.key.startswith(("tool.", "history.tool_call.")):
            assert any(part.text in s for s in shown), part.key

    classes = {p.key: (p.stability, p.authority, p.tier) for p in parts}
    assert len(classes) == len(parts)  # keys are unique within the turn
    attachment = [p for p in parts if p.key.startswith("attachment.") and not p.provenance.startswith("tool:")]
    returned = [p for p in parts if p.key.startswith("attachment.") and p.provenance.startswith("tool:imgs__chart ")]
    assert len(returned) >= 2 and sum(p.media_tokens is not None for p in returned) == 2
    assert all((p.authority, p.tier) == (Authority.TOOL_OUTPUT, Tier.TOOL_RESULTS) for p in returned)
    assert len(attachment) >= 3 and all(
        (p.stability, p.authority, p.tier) == (Stability.COMPACTABLE, Authority.USER_DATA, Tier.ON_DEMAND)
        for p in attachment
    )
    assert any("remember the milk" in p.text for p in attachment)
    assert classes["tool_result.lost"] == (Stability.COMPACTABLE, Authority.TOOL_OUTPUT, Tier.TOOL_RESULTS)
    assert classes["tool_result.s1"][0] is Stability.ON_DEMAND
    assert classes["mode_transition"][0] is Stability.ONE_SHOT

    # the budget, the composition and the class totals count these very parts
    budget = budget_of_turn(turn, continuation, attachments=attachments)
    total = sum(p.token_count(DEFAULT_ESTIMATOR) for p in parts)
    assert budget.total == total
    assert compose_turn(turn, continuation, attachments=attachments).total == total
    assert budget.tokens(Tier.ON_DEMAND) == sum(
        p.token_count(DEFAULT_ESTIMATOR) for p in parts if p.tier is Tier.ON_DEMAND
    )
    engine.session.close()


def test_a_tool_call_part_is_the_call_as_sent_in_the_models_key_order() -> None:
    call = ToolCall(call_id="c1", name="Edit", input={"path": "a.py", "old": "<x>", "new": 1.0})
    part, _ = message_parts(to_messages([call]))  # the call's part, then the interrupted result's
    assert part.text == '{"name":"Edit","input":{"path":"a.py","old":"<x>","new":1.0}}'  # the model's own, unchanged
    assert tool_call_of(part) == ("Edit", {"path": "a.py", "old": "<x>", "new": 1.0})
    assert list(tool_call_of(part)[1]) == ["path", "old", "new"]
