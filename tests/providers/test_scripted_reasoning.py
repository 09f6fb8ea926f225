"""The scripted provider's reasoning: a text in the target's flavour, scripted blocks, usage, bad scripts named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lamina.placement import AnthropicTarget, OpenAIChatTarget, OpenAIResponsesTarget, RenderTarget
from lamina.providers import (
    Completed,
    ProviderEvent,
    ReasoningDelta,
    ScriptedProvider,
    ScriptedResponse,
    ScriptError,
    TextDelta,
)
from lamina.session import Reasoning, Usage

BODY: Any = {"model": "scripted", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
THOUGHT = "The user wants the tests run; pytest is configured in pyproject, so run it there."


async def _events(provider: ScriptedProvider) -> list[ProviderEvent]:
    return [event async for event in provider.stream(BODY)]


def _completed(events: list[ProviderEvent]) -> Completed:
    last = events[-1]
    assert isinstance(last, Completed)
    return last


@pytest.mark.parametrize(
    ("target", "provider", "kind"),
    [
        (AnthropicTarget(model="claude-sonnet-5"), "anthropic", "thinking"),
        (OpenAIResponsesTarget(model="gpt-5"), "openai", "reasoning"),
        (OpenAIChatTarget(model="deepseek-reasoner"), "openai-compat", "reasoning_content"),
    ],
)
async def test_a_reasoning_text_streams_first_and_completes_as_the_targets_block(
    target: RenderTarget, provider: str, kind: str
) -> None:
    events = await _events(ScriptedProvider([{"reasoning": THOUGHT, "text": "Running them."}], target=target))
    pieces = [e.text for e in events if isinstance(e, ReasoningDelta)]
    assert len(pieces) > 1 and "".join(pieces) == THOUGHT
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    assert all(isinstance(e, ReasoningDelta) for e in events[:first_text])  # the reasoning comes before the answer
    done = _completed(events)
    (block,) = done.reasoning
    assert (block.provider, block.kind) == (provider, kind)
    assert THOUGHT in (block.text, *block.summary)
    if kind == "thinking":
        assert block.signature.startswith("scripted-")
    if kind == "reasoning":  # a Responses item: an id, its summary and encrypted content, no plain text
        assert block.item_id.startswith("rs_") and block.data and block.summary == (THOUGHT,) and not block.text
    assert 0 < done.usage.reasoning < done.usage.output


async def test_scripted_blocks_are_returned_as_written_and_only_readable_ones_stream(tmp_path: Path) -> None:
    blocks = [
        {"kind": "thinking", "text": "Check the lock file.", "signature": "sig-A"},
        {"kind": "redacted_thinking", "data": "opaque-bytes"},
        {"kind": "reasoning", "summary": ["Plan the edit.", "Then test."], "data": "enc", "item_id": "rs_7"},
        {"kind": "reasoning_content", "text": "Server side.", "field": "reasoning"},
    ]
    path = tmp_path / "script.json"
    path.write_text(
        json.dumps({"responses": [{"reasoning": blocks, "text": "ok", "usage": {"output": 9, "reasoning": 7}}]})
    )
    events = await _events(ScriptedProvider.from_file(path))
    done = _completed(events)
    assert done.reasoning == (
        Reasoning(provider="anthropic", kind="thinking", text="Check the lock file.", signature="sig-A"),
        Reasoning(provider="anthropic", kind="redacted_thinking", data="opaque-bytes"),
        Reasoning(
            provider="openai", kind="reasoning", data="enc", item_id="rs_7", summary=("Plan the edit.", "Then test.")
        ),
        Reasoning(provider="openai-compat", kind="reasoning_content", text="Server side.", field="reasoning"),
    )
    streamed = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert streamed == "Check the lock file.Plan the edit.\n\nThen test.Server side."  # redacted: nothing to read
    assert done.usage == Usage(output=9, reasoning=7)  # a scripted usage is taken as it is


async def test_what_a_real_api_always_sends_is_made_up_when_the_script_leaves_it_out() -> None:
    steps = [{"reasoning": [{"kind": "thinking", "text": "a"}, {"kind": "redacted_thinking"}, {"kind": "reasoning"}]}]
    thinking, redacted, item = _completed(await _events(ScriptedProvider(steps))).reasoning
    assert thinking.signature and redacted.data and item.data and item.item_id.startswith("rs_scripted_")
    again = _completed(await _events(ScriptedProvider(steps))).reasoning
    assert again == (thinking, redacted, item)  # deterministic: a replayed script signs alike


async def test_a_step_without_reasoning_has_none() -> None:
    done = _completed(await _events(ScriptedProvider([{"text": "plain"}, ScriptedResponse(text="code")])))
    assert done.reasoning == () and done.usage.reasoning == 0


@pytest.mark.parametrize(
    ("reasoning", "where", "message"),
    [
        (3, "responses[0].reasoning", "expected a text or a list of reasoning blocks, got a number"),
        (["x"], "responses[0].reasoning[0]", "expected an object with 'kind', got a string"),
        ([{"kind": "musing"}], "responses[0].reasoning[0].kind", "expected one of thinking"),
        ([{"kind": "thinking", "provider": "gemini"}], "responses[0].reasoning[0].provider", "got 'gemini'"),
        ([{"kind": "reasoning", "summary": "one"}], "responses[0].reasoning[0].summary", "expected a list of texts"),
        ([{"kind": "thinking", "sig": "x"}], "responses[0].reasoning[0].sig", "unknown field"),
        ([{"kind": "thinking", "text": 1}], "responses[0].reasoning[0].text", "expected a string"),
    ],
)
def test_a_bad_reasoning_names_its_field(reasoning: object, where: str, message: str) -> None:
    with pytest.raises(ScriptError) as caught:
        ScriptedProvider([{"reasoning": reasoning}])
    assert caught.value.where == where and message in caught.value.reason


def test_a_usage_may_count_reasoning_tokens_and_nothing_unknown() -> None:
    with pytest.raises(ScriptError) as caught:
        ScriptedProvider([{"usage": {"thinking": 3}}])
    assert caught.value.where == "responses[0].usage.thinking"


@given(st.text(min_size=1))
async def test_any_reasoning_text_streams_and_completes_unchanged(text: str) -> None:
    events = await _events(ScriptedProvider([ScriptedResponse(reasoning=text)]))
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == text
    (block,) = _completed(events).reasoning
    assert block.text == text and block.signature
