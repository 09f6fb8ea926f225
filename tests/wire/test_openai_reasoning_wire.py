"""The wire server's OpenAI reasoning: its shapes pass the SDK's strict validation; it refuses what the APIs refuse."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.wire.fixtures import API_KEY
from tests.wire.openai_api import reasoning_tokens, seal, unseal
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

THOUGHT = "The file is small: read it whole, then answer."
STEP = Reply(text="Reading.", reasoning=THOUGHT, tool_calls=[ToolUse("Read", {"path": "a.py"})])
ASKED: Any = {"store": False, "include": ["reasoning.encrypted_content"], "reasoning": {"summary": "auto"}}
CALL: Any = {"type": "function_call", "call_id": "call_1", "name": "Read", "arguments": "{}"}
OUTPUT: Any = {"type": "function_call_output", "call_id": "call_1", "output": "ok"}
TOOL_TURN: Any = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "Read", "arguments": "{}"}}],
}
TOOL_RESULT: Any = {"role": "tool", "tool_call_id": "call_1", "content": "ok"}


@pytest.fixture
async def strict(wire: WireServer) -> AsyncIterator[openai.AsyncOpenAI]:
    """An SDK client that validates every body and event the server sends against the SDK's types."""
    client = openai.AsyncOpenAI(
        api_key=API_KEY, base_url=wire.openai_url, max_retries=0, _strict_response_validation=True
    )
    yield client
    await client.close()


def _item(item_id: str, sealed: str | None) -> Any:
    item: dict[str, Any] = {"type": "reasoning", "id": item_id, "summary": [{"type": "summary_text", "text": THOUGHT}]}
    if sealed is not None:
        item["encrypted_content"] = sealed
    return item


async def test_a_responses_reasoning_item_comes_first_sealed_and_summarised(
    wire: WireServer, strict: openai.AsyncOpenAI
) -> None:
    wire.script(STEP)
    response = await strict.responses.create(model="gpt-5", input="hi", **ASKED)
    assert [item.type for item in response.output] == ["reasoning", "message", "function_call"]
    item = response.output[0]
    assert item.type == "reasoning" and item.id.startswith("rs_") and item.status == "completed"
    assert [part.text for part in item.summary] == [THOUGHT]
    assert item.encrypted_content is not None and unseal(wire.secret, item.encrypted_content) == THOUGHT
    assert response.usage is not None and response.usage.output_tokens_details.reasoning_tokens == reasoning_tokens(
        STEP
    )
    assert response.usage.output_tokens > reasoning_tokens(STEP) > 0  # reasoning is billed as output


async def test_a_streamed_reasoning_item_is_complete_only_when_done(
    wire: WireServer, strict: openai.AsyncOpenAI
) -> None:
    wire.script(STEP)
    stream = await strict.responses.create(model="gpt-5", input="hi", stream=True, **ASKED)
    events = [event async for event in stream]
    reasoning = [
        e for e in events if "reasoning" in e.type or getattr(getattr(e, "item", None), "type", "") == "reasoning"
    ]
    assert [e.type for e in reasoning] == [
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        *["response.reasoning_summary_text.delta"] * 3,
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
    ]
    added, done = reasoning[0], reasoning[-1]
    assert added.type == "response.output_item.added" and done.type == "response.output_item.done"
    assert added.item.type == "reasoning" and done.item.type == "reasoning"
    assert done.item.encrypted_content == seal(wire.secret, THOUGHT) != added.item.encrypted_content
    assert "".join(e.delta for e in reasoning if e.type == "response.reasoning_summary_text.delta") == THOUGHT
    assert [e.sequence_number for e in events] == list(range(len(events)))


async def test_without_summary_or_include_the_item_carries_neither(
    wire: WireServer, strict: openai.AsyncOpenAI
) -> None:
    wire.script(STEP)
    response = await strict.responses.create(model="gpt-5", input="hi")
    item = response.output[0]
    assert item.type == "reasoning" and item.summary == [] and item.encrypted_content is None


async def test_chat_sends_reasoning_content_beside_the_content(wire: WireServer, strict: openai.AsyncOpenAI) -> None:
    wire.script(STEP, STEP)
    messages: Any = [{"role": "user", "content": "hi"}]
    completion = await strict.chat.completions.create(model="deepseek-reasoner", messages=messages)
    message = completion.choices[0].message
    assert message.content == "Reading." and (message.model_extra or {})["reasoning_content"] == THOUGHT
    assert completion.usage is not None and completion.usage.completion_tokens_details is not None
    assert completion.usage.completion_tokens_details.reasoning_tokens == reasoning_tokens(STEP)
    stream = await strict.chat.completions.create(model="deepseek-reasoner", messages=messages, stream=True)
    deltas = [c.choices[0].delta for c in [chunk async for chunk in stream] if c.choices]
    streamed = [(d.model_extra or {}).get("reasoning_content") for d in deltas]
    assert "".join(r for r in streamed if r) == THOUGHT
    first_text = next(i for i, d in enumerate(deltas) if d.content)
    assert all(not r for r in streamed[first_text:])  # the reasoning comes before the answer


async def test_encrypted_content_changed_or_sealed_elsewhere_is_refused(
    wire: WireServer, strict: openai.AsyncOpenAI
) -> None:
    sealed = seal(wire.secret, THOUGHT)
    with WireServer() as elsewhere:
        foreign = seal(elsewhere.secret, THOUGHT)
    changed = sealed[:-6] + ("A" if sealed[-6] != "A" else "B") + sealed[-5:]
    for bad in (changed, foreign, "gAAAA-not-base64!"):
        with pytest.raises(openai.BadRequestError) as refused:
            await strict.responses.create(model="gpt-5", input=[_item("rs_1", bad), CALL, OUTPUT], **ASKED)
        assert refused.value.status_code == 400
        assert refused.value.body == {
            "message": "The encrypted content for item rs_1 could not be verified. "
            "Reason: Encrypted content could not be decrypted or parsed.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_encrypted_content",
        }
    wire.script(Reply(text="ok"))
    await strict.responses.create(model="gpt-5", input=[_item("rs_1", sealed), CALL, OUTPUT], **ASKED)
    assert [r.status for r in wire.requests] == [400, 400, 400, 200]


async def test_an_item_without_its_content_is_not_found_when_nothing_is_stored(
    wire: WireServer, strict: openai.AsyncOpenAI
) -> None:
    with pytest.raises(openai.NotFoundError) as refused:
        await strict.responses.create(model="gpt-5", input=[_item("rs_7", None), CALL, OUTPUT], store=False)
    assert refused.value.body == {
        "message": "Item with id 'rs_7' not found. Items are not persisted when `store` is set to false. "
        "Try again with `store` set to true, or remove this item from your input.",
        "type": "invalid_request_error",
        "param": "input",
        "code": None,
    }
    wire.script(Reply(text="ok"))
    await strict.responses.create(model="gpt-5", input=[CALL, OUTPUT], store=False)  # the item left out: accepted


async def test_deepseek_refuses_a_tool_call_turn_sent_back_without_its_reasoning(
    wire: WireServer, strict: openai.AsyncOpenAI
) -> None:
    without: Any = [{"role": "user", "content": "hi"}, TOOL_TURN, TOOL_RESULT]
    with_it: Any = [{"role": "user", "content": "hi"}, {**TOOL_TURN, "reasoning_content": THOUGHT}, TOOL_RESULT]
    wire.script(Reply(text="ok"), Reply(text="ok"))
    await strict.chat.completions.create(model="deepseek-reasoner", messages=without)  # OpenAI itself asks nothing
    wire.deepseek = True
    with pytest.raises(openai.BadRequestError) as refused:
        await strict.chat.completions.create(model="deepseek-reasoner", messages=without)
    assert refused.value.body == {
        "message": "The `reasoning_content` in the thinking mode must be passed back to the API.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_request_error",
    }
    await strict.chat.completions.create(model="deepseek-reasoner", messages=with_it)
    assert [r.status for r in wire.requests] == [200, 400, 200]


SECRET = b"s" * 32


@given(st.text())
def test_sealed_reasoning_opens_with_its_secret_only(text: str) -> None:
    sealed = seal(SECRET, text)
    assert unseal(SECRET, sealed) == text
    assert unseal(b"t" * 32, sealed) is None


@given(st.text(min_size=0, max_size=40), st.data())
def test_any_change_to_sealed_reasoning_is_refused(text: str, data: st.DataObject) -> None:
    sealed = seal(SECRET, text)
    at = data.draw(st.integers(0, len(sealed) - 1))
    other = data.draw(st.characters(codec="ascii").filter(lambda c: c != sealed[at]))
    assert unseal(SECRET, sealed[:at] + other + sealed[at + 1 :]) is None
    assert unseal(SECRET, sealed[:at] + sealed[at + 1 :]) is None
