"""The scripted provider: script files, clear errors for bad ones, injected errors, simulated usage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from lamina.cachesim import AnthropicCacheSimulator, OpenAICacheSimulator
from lamina.errors import (
    AuthenticationError,
    ContextOverflowError,
    InvalidRequestError,
    OverloadedError,
    RateLimitError,
    TransientServerError,
)
from lamina.placement import OpenAIChatTarget, SdkManagedPrompt, SdkManagedTarget, render
from lamina.providers import (
    Completed,
    ProviderEvent,
    ScriptedError,
    ScriptedProvider,
    ScriptedResponse,
    ScriptedToolCall,
    ScriptError,
    ScriptExhaustedError,
    TextDelta,
    ToolCallRequest,
    provider_from_spec,
)
from lamina.session import Usage
from lamina.tokens import DEFAULT_ESTIMATOR
from tests.providers.support import long_workspace
from tests.support.engine import ANTHROPIC, Clock, make_engine

BODY: Any = {"model": "scripted", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}


async def run(provider: ScriptedProvider, body: Any = BODY) -> list[ProviderEvent]:
    return [event async for event in provider.stream(body)]


def write(tmp_path: Path, data: object, name: str = "script.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


async def test_a_script_file_replays_text_tool_calls_and_errors_in_order(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "responses": [
                {"text": "Let me read the file first.", "tool_calls": [{"name": "Read", "input": {"path": "app.py"}}]},
                {"error": "overloaded", "retry_after": 1.5},
                {"text": "Done.", "stop_reason": "end_turn", "usage": {"input": 10, "output": 2}},
            ]
        },
    )
    provider = ScriptedProvider.from_file(path)
    first = await run(provider)
    deltas = [e.text for e in first if isinstance(e, TextDelta)]
    assert len(deltas) > 1 and "".join(deltas) == "Let me read the file first."
    assert first[-2] == ToolCallRequest("toolu_scripted_0_0", "Read", {"path": "app.py"})
    done = first[-1]
    assert isinstance(done, Completed) and done.stop_reason == "tool_use" and done.tool_calls == (first[-2],)
    with pytest.raises(OverloadedError) as caught:
        await run(provider)
    assert caught.value.retry_after == 1.5 and caught.value.retryable
    last = (await run(provider))[-1]
    assert isinstance(last, Completed) and last.usage == Usage(input=10, output=2) and last.text == "Done."
    assert provider.remaining == 0 and len(provider.requests) == 3


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("overflow", ContextOverflowError),
        ("rate_limit", RateLimitError),
        ("overloaded", OverloadedError),
        ("auth", AuthenticationError),
        ("server", TransientServerError),
        ("invalid", InvalidRequestError),
    ],
)
async def test_each_error_kind_raises_its_provider_error(kind: Any, error: type[Exception]) -> None:
    provider = ScriptedProvider([{"error": kind}])
    with pytest.raises(error, match=f"scripted {kind} error"):
        await run(provider)


async def test_running_out_of_script_is_a_clear_error(tmp_path: Path) -> None:
    provider = ScriptedProvider.from_file(write(tmp_path, {"responses": [{"text": "only one"}]}))
    await run(provider)
    with pytest.raises(ScriptExhaustedError, match=r"script\.json is exhausted: all 1 scripted steps were used"):
        await run(provider)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", r"script\.json: not valid JSON"),
        ([], r"script\.json: expected an object \{\"responses\": \[\.\.\.\]\}, got a list"),
        ({"responses": {}}, r"script\.json: responses: expected a list of steps, got an object"),
        ({"responses": [], "extra": 1}, r"script\.json: extra: unknown field"),
        ({"responses": [{"text": "ok"}, 3]}, r"script\.json: responses\[1\]: expected an object, got a number"),
        ({"responses": [{"text": 5}]}, r"responses\[0\]\.text: expected a string, got a number"),
        ({"responses": [{"txt": "typo"}]}, r"responses\[0\]\.txt: unknown field"),
        ({"responses": [{"error": "boom"}]}, r"responses\[0\]\.error: expected one of overflow, rate_limit, .*'boom'"),
        ({"responses": [{"error": "rate_limit", "retry_after": "2s"}]}, r"responses\[0\]\.retry_after"),
        (
            {"responses": [{"text": "", "tool_calls": [{"input": {}}]}]},
            r"responses\[0\]\.tool_calls\[0\]\.name: expected a tool name",
        ),
        (
            {"responses": [{"tool_calls": [{"name": "Read", "input": []}]}]},
            r"responses\[0\]\.tool_calls\[0\]\.input: expected an object, got a list",
        ),
        ({"responses": [{"usage": {"input": -1}}]}, r"responses\[0\]\.usage\.input: expected a token count"),
    ],
)
def test_a_bad_script_file_names_the_file_and_the_field(tmp_path: Path, content: object, message: str) -> None:
    path = write(tmp_path, content)
    with pytest.raises(ScriptError, match=message) as caught:
        ScriptedProvider.from_file(path)
    assert caught.value.source == str(path)


def test_a_missing_script_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match=r"missing\.json: cannot read the script"):
        ScriptedProvider.from_file(tmp_path / "missing.json")


def test_a_script_in_code_is_checked_like_a_file() -> None:
    with pytest.raises(ScriptError, match=r"<code>: responses\[0\]\.tool_calls\[0\]\.name"):
        ScriptedProvider([{"tool_calls": [{"name": ""}]}])


async def test_streamed_text_before_an_injected_failure() -> None:
    provider = ScriptedProvider([ScriptedError("server", text="the first half")])
    seen: list[str] = []
    with pytest.raises(TransientServerError):
        async for event in provider.stream(BODY):
            assert isinstance(event, TextDelta)
            seen.append(event.text)
    assert "".join(seen) == "the first half"


async def test_parallel_tool_calls_keep_their_order_and_ids() -> None:
    calls = (ScriptedToolCall("Read", {"path": "a"}), ScriptedToolCall("Grep", {"q": "b"}, call_id="mine"))
    events = await run(ScriptedProvider([ScriptedResponse(tool_calls=calls)]))
    assert [e for e in events if isinstance(e, ToolCallRequest)] == [
        ToolCallRequest("toolu_scripted_0_0", "Read", {"path": "a"}),
        ToolCallRequest("mine", "Grep", {"q": "b"}),
    ]


async def test_with_a_cache_simulator_usage_shows_cache_writes_then_reads(tmp_path: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, long_workspace(tmp_path), clock)
    body = render(engine.prepare_turn("Fix the bug"), ANTHROPIC)
    provider = ScriptedProvider(
        [ScriptedResponse(text="one"), ScriptedResponse(text="two")],
        target=ANTHROPIC,
        simulator=AnthropicCacheSimulator(),
        clock=clock,
    )
    first = (await run(provider, body))[-1]
    clock.advance(1)
    second = (await run(provider, body))[-1]
    assert isinstance(first, Completed) and isinstance(second, Completed)
    assert first.usage.cache_write > 1024 and first.usage.cache_read == 0
    assert second.usage.cache_read == first.usage.cache_write + first.usage.cache_read and second.usage.cache_write == 0
    assert second.usage.output > 0


async def test_an_openai_target_with_its_simulator(tmp_path: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, long_workspace(tmp_path), clock)
    target = OpenAIChatTarget(model="gpt-5")
    body = render(engine.prepare_turn("Fix the bug"), target)
    provider = ScriptedProvider(
        [ScriptedResponse(text="a"), ScriptedResponse(text="b")],
        target=target,
        simulator=OpenAICacheSimulator(),
        clock=clock,
    )
    first, second = (await run(provider, body))[-1], (await run(provider, body))[-1]
    assert isinstance(first, Completed) and isinstance(second, Completed)
    assert first.usage.cache_read == 0 and second.usage.cache_read >= 1024 and second.usage.cache_write == 0
    assert second.model == "gpt-5"


async def test_a_request_the_api_would_reject_is_an_invalid_request() -> None:
    marked = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    body: Any = {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [marked] * 5}]}
    provider = ScriptedProvider([ScriptedResponse(text="no")], simulator=AnthropicCacheSimulator(), clock=lambda: 0.0)
    with pytest.raises(InvalidRequestError, match="at most 4"):
        await run(provider, body)


async def test_without_a_simulator_input_tokens_are_estimated() -> None:
    events = await run(ScriptedProvider([ScriptedResponse(text="hello")]))
    done = events[-1]
    assert isinstance(done, Completed)
    assert done.usage.input == DEFAULT_ESTIMATOR.count(msgspec.json.encode(BODY).decode())
    assert done.usage.cache_read == done.usage.cache_write == 0 and done.usage.output == 2


async def test_an_sdk_managed_target_takes_prompts() -> None:
    provider = ScriptedProvider([ScriptedResponse(text="ok")], target=SdkManagedTarget())
    done = (await run(provider, SdkManagedPrompt(prompt="hello there", session_id="s1")))[-1]
    assert isinstance(done, Completed) and done.usage.input > 0 and done.model == "scripted"


async def test_provider_from_spec_loads_a_script_file(tmp_path: Path) -> None:
    path = write(tmp_path, {"responses": [{"text": "from a spec"}]})
    provider = provider_from_spec(f"scripted:{path}")
    events = [e async for e in provider.stream(BODY)]
    assert isinstance(events[-1], Completed) and events[-1].text == "from a spec"
