"""The wire server's Anthropic thinking, through the official SDK: signed blocks out, the API's 400s for bad ones back.

Every refusal is checked against the API's own status, error type and wording.
"""

from __future__ import annotations

import base64
from typing import Any

import anthropic
import pytest
from anthropic.types import MessageParam, RedactedThinkingBlock, ThinkingBlock
from hypothesis import given
from hypothesis import strategies as st

from tests.wire.anthropic_api import ThinkingSigner
from tests.wire.fixtures import API_KEY
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

THINKING_ON: Any = {"type": "enabled", "budget_tokens": 2048}
QUESTION: MessageParam = {"role": "user", "content": "What does app.py print?"}
TOOLS: Any = [{"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}}]


def _client(wire: WireServer) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(api_key=API_KEY, base_url=wire.url, max_retries=0)


async def _ask(
    client: anthropic.AsyncAnthropic, messages: list[MessageParam], **options: Any
) -> anthropic.types.Message:
    message: anthropic.types.Message = await client.messages.create(
        model="claude-sonnet-5", max_tokens=4096, messages=messages, tools=TOOLS, **options
    )
    return message


def _loop(assistant: list[Any], call_id: str) -> list[MessageParam]:
    """The request that continues a tool loop: the question, the assistant's blocks, the tool's result."""
    result: MessageParam = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "hi"}],
    }
    return [QUESTION, {"role": "assistant", "content": assistant}, result]


def _params(message: anthropic.types.Message) -> list[Any]:
    """The response's blocks as the next request sends them back."""
    return [block.model_dump(exclude_none=True, exclude={"citations"}) for block in message.content]


async def _refused(client: anthropic.AsyncAnthropic, messages: list[MessageParam]) -> str:
    with pytest.raises(anthropic.BadRequestError) as caught:
        await _ask(client, messages, thinking=THINKING_ON)
    body: Any = caught.value.body
    assert caught.value.status_code == 400 and body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    return str(body["error"]["message"])


async def test_a_plain_response_starts_with_a_signed_thinking_block(wire: WireServer) -> None:
    wire.script(Reply(reasoning="The user wants the output; read app.py.", tool_calls=[ToolUse("Read", {"path": "a"})]))
    async with _client(wire) as client:
        message = await _ask(client, [QUESTION], thinking=THINKING_ON)
    thinking, call = message.content
    assert isinstance(thinking, ThinkingBlock) and thinking.thinking == "The user wants the output; read app.py."
    assert base64.b64decode(thinking.signature, validate=True) and call.type == "tool_use"
    assert message.usage.output_tokens_details is not None
    assert 0 < message.usage.output_tokens_details.thinking_tokens <= message.usage.output_tokens


async def test_a_streamed_thinking_block_arrives_in_deltas_then_its_signature(wire: WireServer) -> None:
    wire.script(Reply(reasoning="Think it through, step by step, before answering.", text="Done."))
    async with _client(wire) as client:
        stream = await client.messages.create(
            model="claude-sonnet-5", max_tokens=4096, messages=[QUESTION], thinking=THINKING_ON, stream=True
        )
        events = [event async for event in stream]
    starts = [e.content_block for e in events if e.type == "content_block_start"]
    assert [b.type for b in starts] == ["thinking", "text"]  # the thinking first
    kinds = [(e.type, getattr(getattr(e, "delta", None), "type", None)) for e in events if e.type.startswith("content")]
    assert kinds.count(("content_block_delta", "thinking_delta")) >= 2
    assert kinds.index(("content_block_delta", "signature_delta")) == kinds.index(("content_block_stop", None)) - 1
    deltas = [e.delta for e in events if e.type == "content_block_delta"]
    thinking = "".join(d.thinking for d in deltas if d.type == "thinking_delta")
    assert thinking == "Think it through, step by step, before answering."


async def test_a_redacted_block_comes_whole_and_goes_back_accepted(wire: WireServer) -> None:
    wire.script(
        Reply(reasoning="hidden", redacted=True, tool_calls=[ToolUse("Read", {}, id="toolu_r")]), Reply(text="ok")
    )
    async with _client(wire) as client:
        first = await _ask(client, [QUESTION], thinking=THINKING_ON)
        assert isinstance(first.content[0], RedactedThinkingBlock) and "hidden" not in first.content[0].data
        second = await _ask(client, _loop(_params(first), "toolu_r"), thinking=THINKING_ON)
    assert second.content[0].type == "text" and [r.status for r in wire.requests] == [200, 200]


async def test_the_thinking_sent_back_unchanged_is_accepted_in_the_tool_loop(wire: WireServer) -> None:
    wire.script(
        Reply(reasoning="Read it.", tool_calls=[ToolUse("Read", {}, id="toolu_1")]), Reply(text="It prints hi.")
    )
    async with _client(wire) as client:
        first = await _ask(client, [QUESTION], thinking=THINKING_ON)
        await _ask(client, _loop(_params(first), "toolu_1"), thinking=THINKING_ON)
    assert [r.status for r in wire.requests] == [200, 200]


@pytest.mark.parametrize("change", ["text", "signature"])
async def test_a_tampered_thinking_block_is_refused(wire: WireServer, change: str) -> None:
    wire.script(Reply(reasoning="Read it.", tool_calls=[ToolUse("Read", {}, id="toolu_1")]), Reply(text="never"))
    async with _client(wire) as client:
        first = await _ask(client, [QUESTION], thinking=THINKING_ON)
        blocks = _params(first)
        if change == "text":
            blocks[0]["thinking"] += " "
        else:
            raw = bytearray(base64.b64decode(blocks[0]["signature"]))
            raw[-1] ^= 1
            blocks[0]["signature"] = base64.b64encode(bytes(raw)).decode()
        message = await _refused(client, _loop(blocks, "toolu_1"))
    assert message == "messages.1.content.0: Invalid `signature` in `thinking` block"
    assert wire.pending == 1  # refused before the model ran


@pytest.mark.slow
async def test_a_block_another_server_signed_is_refused(wire: WireServer) -> None:
    other = WireServer().start()
    try:
        other.script(Reply(reasoning="Read it.", tool_calls=[ToolUse("Read", {}, id="toolu_1")]))
        async with _client(other) as elsewhere:
            foreign = _params(await _ask(elsewhere, [QUESTION], thinking=THINKING_ON))
    finally:
        other.stop()
    async with _client(wire) as client:
        message = await _refused(client, _loop(foreign, "toolu_1"))
    assert message == "messages.1.content.0: Invalid `signature` in `thinking` block"


async def test_a_changed_redacted_block_is_refused(wire: WireServer) -> None:
    wire.script(Reply(reasoning="hidden", redacted=True, tool_calls=[ToolUse("Read", {}, id="toolu_1")]))
    async with _client(wire) as client:
        blocks = _params(await _ask(client, [QUESTION], thinking=THINKING_ON))
        blocks[0]["data"] = base64.b64encode(b"x" + base64.b64decode(blocks[0]["data"])).decode()
        message = await _refused(client, _loop(blocks, "toolu_1"))
    assert message == "messages.1.content.0: Invalid `data` in `redacted_thinking` block"


async def test_thinking_dropped_inside_an_active_tool_loop_is_refused(wire: WireServer) -> None:
    wire.script(Reply(reasoning="Read it.", tool_calls=[ToolUse("Read", {}, id="toolu_1")]), Reply(text="ok"))
    async with _client(wire) as client:
        first = await _ask(client, [QUESTION], thinking=THINKING_ON)
        message = await _refused(client, _loop(_params(first)[1:], "toolu_1"))
        # the API's escape: with thinking off, the loop may go on without it
        await _ask(client, _loop(_params(first)[1:], "toolu_1"))
    assert message.startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` "
        "is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of "
        "`tool_use` and `tool_result` blocks)."
    )
    assert [r.status for r in wire.requests] == [200, 400, 200]


async def test_another_responses_thinking_in_the_loop_is_a_modification(wire: WireServer) -> None:
    wire.script(
        Reply(reasoning="First thought.", text="Hello."),
        Reply(reasoning="Second thought.", tool_calls=[ToolUse("Read", {}, id="toolu_2")]),
    )
    async with _client(wire) as client:
        earlier = _params(await _ask(client, [QUESTION], thinking=THINKING_ON))
        loop = _params(await _ask(client, [QUESTION], thinking=THINKING_ON))
        message = await _refused(client, _loop([earlier[0], loop[1]], "toolu_2"))
    assert message == (
        "messages.1.content.0: `thinking` or `redacted_thinking` blocks in the latest assistant message cannot be "
        "modified. These blocks must remain as they were in the original response."
    )


async def test_omitted_display_sends_empty_thinking_with_a_signature_that_verifies(wire: WireServer) -> None:
    omitted = {**THINKING_ON, "display": "omitted"}
    wire.script(Reply(reasoning="Private.", tool_calls=[ToolUse("Read", {}, id="toolu_1")]), Reply(text="ok"))
    async with _client(wire) as client:
        first = await _ask(client, [QUESTION], thinking=omitted)
        assert isinstance(first.content[0], ThinkingBlock) and first.content[0].thinking == ""
        assert first.content[0].signature
        await _ask(client, _loop(_params(first), "toolu_1"), thinking=omitted)
    assert [r.status for r in wire.requests] == [200, 200]


@given(st.text(), st.text(), st.booleans())
def test_a_block_verifies_with_its_own_text_only_and_on_its_own_server(text: str, other: str, redacted: bool) -> None:
    signer = ThinkingSigner()
    block = signer.block(text, redacted=redacted, n=7)

    def problem(sent: Any, by: ThinkingSigner = signer) -> str | None:
        return by.problem({"messages": [QUESTION, {"role": "assistant", "content": [sent]}]})

    assert problem(block) is None
    wording = "Invalid `data` in `redacted_thinking` block" if redacted else "Invalid `signature` in `thinking` block"
    assert problem(block, ThinkingSigner()) == f"messages.1.content.0: {wording}"
    if not redacted and other != text:
        assert problem({**block, "thinking": other}) == f"messages.1.content.0: {wording}"
    if not redacted and other != block["signature"]:
        assert problem({**block, "signature": other}) == f"messages.1.content.0: {wording}"
