"""OpenAI reasoning read from responses and streams: Responses reasoning items and a compatible server's reasoning."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseReasoningItem,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseStreamEvent,
)

from lamina.errors import InvalidRequestError
from lamina.providers import Completed, ProviderEvent, ReasoningDelta
from lamina.providers._openai_replies import ChatReply as _ChatReply
from lamina.providers._openai_replies import ResponsesReply as _ResponsesReply
from lamina.providers._openai_replies import chat_reasoning, reasoning_item
from lamina.session import Reasoning, Usage
from tests.providers.support import collect, completed, streamed_text
from tests.wire.fixtures import openai_chat_provider, openai_responses_provider
from tests.wire.openai_api import reasoning_tokens, seal
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

THOUGHT = "Two files could hold it; the config first. ✓ «naïve» \u200b text"
STEP = Reply(text="Looking.", reasoning=THOUGHT, tool_calls=[ToolUse("Read", {"path": "setup.cfg"})])
ASKED: Any = {
    "model": "gpt-5",
    "input": "hi",
    "store": False,
    "include": ["reasoning.encrypted_content"],
    "reasoning": {"summary": "auto"},
}
CHAT: Any = {"model": "deepseek-reasoner", "messages": [{"role": "user", "content": "hi"}]}


def readable(events: Sequence[ProviderEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, ReasoningDelta))


async def test_responses_reasoning_is_streamed_and_kept_byte_for_byte(wire: WireServer) -> None:
    wire.script(STEP)
    async with openai_responses_provider(wire) as provider:
        events = await collect(provider.stream(ASKED))
    done = completed(events)
    assert readable(events) == THOUGHT and streamed_text(events) == "Looking."
    first_text = next(i for i, e in enumerate(events) if not isinstance(e, ReasoningDelta))
    assert all(not isinstance(e, ReasoningDelta) for e in events[first_text:])  # the reasoning came first
    assert done.reasoning == (
        Reasoning(
            provider="openai",
            kind="reasoning",
            item_id="rs_wire0001x0",
            summary=(THOUGHT,),
            data=seal(wire.secret, THOUGHT),  # from output_item.done: on .added it was incomplete
        ),
    )
    assert done.usage.reasoning == reasoning_tokens(STEP) > 0 and done.usage.output > done.usage.reasoning


async def test_plain_responses_read_as_the_stream_does(wire: WireServer) -> None:
    wire.script(STEP, STEP)
    async with openai_responses_provider(wire) as provider:
        streamed = completed(await collect(provider.stream(ASKED)))
    client = openai.AsyncOpenAI(api_key="k", base_url=wire.openai_url, max_retries=0)
    response = await client.responses.create(**ASKED)
    await client.close()
    item = response.output[0]
    assert isinstance(item, ResponseReasoningItem)
    plain = reasoning_item(item)
    assert plain.summary == streamed.reasoning[0].summary and plain.data == seal(wire.secret, THOUGHT)


async def test_chat_reasoning_content_is_streamed_and_kept_with_its_field(wire: WireServer) -> None:
    wire.script(STEP, STEP)
    async with openai_chat_provider(wire, "deepseek-reasoner") as provider:
        events = await collect(provider.stream(CHAT))
    done = completed(events)
    assert readable(events) == THOUGHT and done.text == "Looking."
    assert done.reasoning == (
        Reasoning(provider="openai-compat", kind="reasoning_content", text=THOUGHT, field="reasoning_content"),
    )
    assert done.usage.reasoning == reasoning_tokens(STEP)
    client = openai.AsyncOpenAI(api_key="k", base_url=wire.openai_url, max_retries=0)
    plain = await client.chat.completions.create(**CHAT)
    await client.close()
    assert chat_reasoning(plain.choices[0].message.model_extra) == ("reasoning_content", THOUGHT)


async def test_a_reply_without_reasoning_has_none(wire: WireServer) -> None:
    wire.script(Reply(text="plain"), Reply(text="plain"))
    async with openai_responses_provider(wire) as responses, openai_chat_provider(wire) as chat:
        for done in [completed(await collect(responses.stream(ASKED))), completed(await collect(chat.stream(CHAT)))]:
            assert done.reasoning == () and done.usage.reasoning == 0


async def test_changed_encrypted_content_is_refused_through_the_provider(wire: WireServer) -> None:
    sealed = seal(wire.secret, THOUGHT)
    item = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": sealed[:-2] + "xx"}
    body: Any = {**ASKED, "input": [{"role": "user", "content": "hi"}, item]}
    async with openai_responses_provider(wire) as provider:
        with pytest.raises(InvalidRequestError, match="could not be verified"):
            await collect(provider.stream(body))


# --- the readers, fed the SDK's own event types ---------------------------------------------------

_texts = st.text(min_size=1, max_size=12)


def _item(item_id: str, summary: Sequence[str], sealed: str | None, texts: Sequence[str] = ()) -> ResponseReasoningItem:
    return ResponseReasoningItem.model_validate(
        {
            "id": item_id,
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": t} for t in summary],
            "content": [{"type": "reasoning_text", "text": t} for t in texts] or None,
            "encrypted_content": sealed,
        }
    )


def _final(output: Sequence[ResponseReasoningItem], reasoning: int = 0) -> ResponseCompletedEvent:
    response = Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "model": "gpt-5",
            "status": "completed",
            "output": [item.model_dump() for item in output],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 10,
                "input_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 0},
                "output_tokens": 9,
                "output_tokens_details": {"reasoning_tokens": reasoning},
                "total_tokens": 19,
            },
        }
    )
    return ResponseCompletedEvent(type="response.completed", response=response, sequence_number=99)


def _feed(reply: _ResponsesReply | _ChatReply, events: Sequence[Any]) -> tuple[list[ProviderEvent], Completed]:
    out: list[ProviderEvent] = []
    for event in events:
        out += reply.feed(event)
    return out, reply.completed()


@given(
    st.lists(st.tuples(st.lists(_texts, min_size=1, max_size=3), st.text(max_size=20), st.lists(_texts, max_size=2))),
    st.integers(0, 50),
)
def test_responses_items_are_kept_in_output_order_from_their_done_event(
    items: list[tuple[list[str], str, list[str]]], reasoning: int
) -> None:
    events: list[ResponseStreamEvent] = []
    done_items = []
    for index, (summary, sealed, texts) in enumerate(items):
        item_id = f"rs_{index}"
        partial = _item(item_id, [], sealed[: len(sealed) // 2] + "…")
        events.append(
            ResponseOutputItemAddedEvent(
                type="response.output_item.added", output_index=index, item=partial, sequence_number=0
            )
        )
        for part, text in enumerate(summary):
            events.append(
                ResponseReasoningSummaryTextDeltaEvent(
                    type="response.reasoning_summary_text.delta",
                    item_id=item_id,
                    output_index=index,
                    summary_index=part,
                    delta=text,
                    sequence_number=0,
                )
            )
        for part, text in enumerate(texts):
            events.append(
                ResponseReasoningTextDeltaEvent(
                    type="response.reasoning_text.delta",
                    item_id=item_id,
                    output_index=index,
                    content_index=part,
                    delta=text,
                    sequence_number=0,
                )
            )
        whole = _item(item_id, summary, sealed or None, texts)
        done_items.append(whole)
        events.append(
            ResponseOutputItemDoneEvent(
                type="response.output_item.done", output_index=index, item=whole, sequence_number=0
            )
        )
    out, done = _feed(_ResponsesReply("openai-responses"), [*events, _final(done_items, reasoning)])
    assert done.reasoning == tuple(
        Reasoning(
            provider="openai",
            kind="reasoning",
            item_id=f"rs_{i}",
            summary=tuple(summary),
            data=sealed,
            text="".join(texts),
        )
        for i, (summary, sealed, texts) in enumerate(items)
    )
    passages = [p for summary, _, texts in items for p in [*summary, *texts]]
    assert readable(out) == "\n\n".join(passages)
    assert done.usage == Usage(input=6, output=9, cache_read=4, reasoning=reasoning)


@given(st.lists(st.tuples(st.lists(_texts, max_size=3), st.text(min_size=1, max_size=20)), min_size=1, max_size=4))
def test_reasoning_only_in_the_final_response_is_kept_and_shown_whole(items: list[tuple[list[str], str]]) -> None:
    output = [_item(f"rs_{i}", summary, sealed) for i, (summary, sealed) in enumerate(items)]
    out, done = _feed(_ResponsesReply("openai-responses"), [_final(output)])
    assert [(r.item_id, r.summary, r.data) for r in done.reasoning] == [
        (f"rs_{i}", tuple(summary), sealed) for i, (summary, sealed) in enumerate(items)
    ]
    assert readable(out) == "\n\n".join("\n\n".join(summary) for summary, _ in items if summary)


def _chunk(
    delta: dict[str, Any], finish: str | None = None, usage: dict[str, Any] | None = None
) -> ChatCompletionChunk:
    return ChatCompletionChunk.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "qwen3",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            "usage": usage,
        }
    )


@given(st.lists(st.tuples(st.sampled_from(["reasoning_content", "reasoning"]), _texts), min_size=1), st.integers(0, 9))
def test_a_compatible_servers_reasoning_is_joined_in_the_field_it_first_came_in(
    pieces: list[tuple[str, str]], tokens: int
) -> None:
    chunks = [_chunk({"role": "assistant", "content": None, name: text}) for name, text in pieces]
    usage = {"prompt_tokens": 5, "completion_tokens": 12, "total_tokens": 17}
    usage["completion_tokens_details"] = {"reasoning_tokens": tokens}  # type: ignore[assignment]
    chunks += [_chunk({"content": "answer"}), _chunk({}, "stop"), _chunk({}, usage=usage)]
    out, done = _feed(_ChatReply("openai-compat"), chunks)
    text = "".join(t for _, t in pieces)
    assert done.reasoning == (
        Reasoning(provider="openai-compat", kind="reasoning_content", text=text, field=pieces[0][0]),
    )
    assert readable(out) == text and done.text == "answer" and done.usage.reasoning == tokens


def test_a_delta_with_both_fields_counts_once() -> None:
    chunks = [_chunk({"reasoning_content": "a", "reasoning": "a"}), _chunk({"reasoning": "b"}), _chunk({}, "stop")]
    _, done = _feed(_ChatReply("openai-compat"), chunks)
    assert [(r.text, r.field) for r in done.reasoning] == [("ab", "reasoning_content")]
    assert chat_reasoning({"reasoning": {"not": "text"}}) is None and chat_reasoning(None) is None
