"""Local OpenAI-compatible servers as people run them: the conservative wire, their windows, their quirks.

Each server's shapes are played by the wire server (`tests.wire.local_servers`); the provider is the one an
`openai-compat:URL#MODEL` spec builds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lamina.errors import ContextOverflowError, TransientServerError
from lamina.placement import render
from lamina.providers import (
    ModelCache,
    OpenAIChatProvider,
    RetryPolicy,
    discover_capabilities,
    provider_from_spec,
    stream_with_retry,
)
from lamina.providers._compat_wire import PART_SEPARATOR, conservative_body, output_cap, overflow_window
from lamina.providers._model_table import openai_compatible_window
from lamina.providers._server_windows import MAX_REPORTED_WINDOW, lm_studio_window, ollama_window, props_window
from tests.providers.support import collect, completed, new_engine
from tests.wire.local_servers import Kind, play
from tests.wire.script import Reply
from tests.wire.server import WireServer

TOOL: Any = {"type": "function", "function": {"name": "Glob", "parameters": {"type": "object", "properties": {}}}}


def _compat(wire: WireServer, model: str = "smollm2") -> OpenAIChatProvider:
    provider = provider_from_spec(f"openai-compat:{wire.openai_url}#{model}")
    assert isinstance(provider, OpenAIChatProvider)
    return provider


async def _no_sleep(_: float) -> None:
    return None


@pytest.fixture
def cache(tmp_path: Path) -> ModelCache:
    return ModelCache(tmp_path / "models.json")


async def test_text_only_content_goes_as_a_string_so_llama_cpp_python_templates_run(
    wire: WireServer, tmp_path: Path
) -> None:
    local = play(wire, "llama-cpp-python")
    wire.script(Reply(text="Hello from SmolLM2."))
    async with _compat(wire) as provider:
        body: Any = render(new_engine(tmp_path).prepare_turn("hello"), provider.target)
        done = completed(await collect(provider.stream(body)))
    assert done.text == "Hello from SmolLM2." and local.template_failures == 0
    sent = wire.requests[0].body["messages"]
    assert all(isinstance(message["content"], str) for message in sent)
    assert "hello" in sent[-1]["content"]


async def test_an_empty_stream_is_a_server_error_tried_once_more_and_named(wire: WireServer) -> None:
    play(wire, "llama.cpp", empty_streams=3)
    body: Any = {"model": "smollm2", "messages": [{"role": "user", "content": "hi"}]}
    async with _compat(wire) as provider:
        with pytest.raises(TransientServerError) as raised:
            await collect(stream_with_retry(provider, body, RetryPolicy(sleep=_no_sleep)))
    assert len(wire.requests) == 2  # retried at most once, not as a transient failure (4 attempts)
    assert "the server returned no events" in str(raised.value) and wire.openai_url in str(raised.value)


async def test_an_output_cap_is_sent_from_the_window_the_server_reports(wire: WireServer, cache: ModelCache) -> None:
    play(wire, "llama.cpp", n_ctx=8192)
    wire.script(Reply(text="Short."))
    async with _compat(wire) as provider:
        await discover_capabilities(provider, cache=cache)
        done = completed(
            await collect(provider.stream({"model": "smollm2", "messages": [{"role": "user", "content": "hi"}]}))
        )
    assert wire.requests[0].body["max_tokens"] == 8192 // 4
    assert done.stop_reason == "end_turn"  # not a small model writing until the context ends


async def test_the_output_cap_setting_wins_and_goes_as_max_tokens(wire: WireServer) -> None:
    play(wire, "llama-cpp-python")
    wire.script(Reply(text="ok"))
    provider = OpenAIChatProvider("smollm2", base_url=wire.openai_url, max_tokens=300, compatible=True)
    async with provider:
        await collect(provider.stream({"model": "smollm2", "messages": [{"role": "user", "content": "hi"}]}))
    sent = wire.requests[0].body
    assert sent["max_tokens"] == 300 and "max_completion_tokens" not in sent


async def test_tool_choice_auto_goes_with_tools_only(wire: WireServer) -> None:
    play(wire, "vllm")
    wire.script(Reply(text="one"), Reply(text="two"))
    plain: Any = {"model": "smollm2", "messages": [{"role": "user", "content": "hi"}]}
    with_tool: Any = {**plain, "tools": [TOOL]}
    async with _compat(wire) as provider:
        await collect(provider.stream(with_tool))
        await collect(provider.stream(plain))
    with_tools, without = (r.body for r in wire.requests)
    assert with_tools["tool_choice"] == "auto" and "tool_choice" not in without


@pytest.mark.parametrize(
    ("kind", "settings", "window", "where"),
    [
        ("llama.cpp", {"n_ctx": 8192}, 8192, "models endpoint (meta.n_ctx)"),
        ("llama.cpp", {"n_ctx": 4096, "meta_n_ctx": False}, 4096, "/props"),
        ("vllm", {"n_ctx": 32768}, 32768, "models endpoint (max_model_len)"),
        ("ollama", {"n_ctx": 8192}, 8192, "/api/show"),
        ("ollama", {"num_ctx_set": False, "n_ctx_train": 131072}, 4096, "/api/show"),
        ("lm-studio", {"n_ctx": 16384, "n_ctx_train": 131072}, 16384, "/api/v0/models"),
    ],
)
async def test_the_window_is_read_from_what_each_server_reports(
    wire: WireServer, cache: ModelCache, kind: Kind, settings: dict[str, Any], window: int, where: str
) -> None:
    play(wire, kind, **settings)
    async with _compat(wire) as provider:
        found = await discover_capabilities(provider, cache=cache)
    assert found.context_window == window and found.source.endswith(where)


async def test_a_server_that_reports_no_window_keeps_the_defaults(wire: WireServer, cache: ModelCache) -> None:
    play(wire, "llama-cpp-python")
    async with _compat(wire) as provider:
        found = await discover_capabilities(provider, cache=cache)
    assert found.context_window == 200_000


@pytest.mark.parametrize("kind", ["llama.cpp", "llama-cpp-python", "vllm"])
async def test_an_overflow_error_names_the_window_and_teaches_it(wire: WireServer, kind: Kind) -> None:
    play(wire, kind, n_ctx=1024)
    body: Any = {"model": "smollm2", "messages": [{"role": "user", "content": "word " * 3000}]}
    async with _compat(wire) as provider:
        with pytest.raises(ContextOverflowError) as raised:
            await collect(provider.stream(body))
        assert provider.capabilities.context_window == 1024
        assert "its overflow error" in provider.capabilities.source
    assert "the server's context window is 1,024 tokens, the request needs" in str(raised.value)


async def test_the_configured_window_wins_over_an_overflow_error(wire: WireServer) -> None:
    from lamina.providers import Capabilities

    play(wire, "llama.cpp", n_ctx=1024)
    given_caps = Capabilities(context_window=2048, source="given")
    provider = OpenAIChatProvider("smollm2", base_url=wire.openai_url, capabilities=given_caps, compatible=True)
    async with provider:
        with pytest.raises(ContextOverflowError):
            await collect(provider.stream({"model": "smollm2", "messages": [{"role": "user", "content": "w " * 3000}]}))
    assert provider.capabilities.context_window == 2048


# --- the pure parts -----------------------------------------------------------------------------------------

_text = st.text(min_size=0, max_size=30)


@given(st.lists(_text, min_size=1, max_size=5))
def test_text_parts_join_into_one_string(texts: list[str]) -> None:
    message = {"role": "user", "content": [{"type": "text", "text": t} for t in texts]}
    sent = conservative_body({"messages": [message]}, max_tokens=100)
    assert sent["messages"] == [{"role": "user", "content": PART_SEPARATOR.join(texts)}]
    assert sent["max_tokens"] == 100 and "tool_choice" not in sent


@given(st.lists(_text, max_size=3), st.integers(min_value=0, max_value=3))
def test_a_message_with_an_image_keeps_its_parts(texts: list[str], at: int) -> None:
    parts: list[Any] = [{"type": "text", "text": t} for t in texts]
    parts.insert(min(at, len(parts)), {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}})
    message = {"role": "user", "content": parts}
    assert conservative_body({"messages": [message]}, max_tokens=1)["messages"] == [message]


@given(st.integers(min_value=1, max_value=10**7), st.integers(min_value=1, max_value=10**7))
def test_each_servers_overflow_wording_gives_its_window(window: int, needed: int) -> None:
    llama_cpp = {"code": 400, "type": "exceed_context_size_error", "n_ctx": window, "n_prompt_tokens": needed}
    assert overflow_window(llama_cpp, "the request exceeds the available context size") == (window, needed)
    vllm = f"This model's maximum context length is {window} tokens. However, you requested {needed} tokens (x)."
    assert overflow_window({"message": vllm}, vllm) == (window, needed)
    raw = f"Requested tokens ({needed}) exceed context window of {window}"
    assert overflow_window(None, raw) == (window, needed)
    assert overflow_window({"message": "Rate limit"}, "Rate limit") is None


@given(st.one_of(st.integers(max_value=0), st.integers(min_value=MAX_REPORTED_WINDOW + 1)))
def test_a_window_that_is_not_plausible_is_not_believed(window: int) -> None:
    assert overflow_window({"n_ctx": window, "n_prompt_tokens": 5}, "too long") is None
    if window >= 0:
        vllm = f"This model's maximum context length is {window} tokens. However, you requested 5 tokens."
        assert overflow_window({"message": vllm}, vllm) is None
        assert overflow_window(None, f"Requested tokens (5) exceed context window of {window}") is None
    assert props_window({"default_generation_settings": {"n_ctx": window}}) is None
    assert ollama_window({"parameters": f"num_ctx {window}"}) is None
    assert lm_studio_window({"loaded_context_length": window, "max_context_length": 0}) is None
    assert openai_compatible_window([{"id": "m", "max_model_len": window}], "m") is None


@given(st.integers(min_value=1, max_value=10**7), st.integers(min_value=1, max_value=10**6))
def test_the_default_output_cap_is_a_quarter_of_the_window_within_the_tables_limit(window: int, limit: int) -> None:
    from lamina.providers import Capabilities

    cap = output_cap(Capabilities(context_window=window, max_output_tokens=limit), None)
    assert cap <= limit and cap == min(limit, max(256, window // 4))
    assert output_cap(Capabilities(context_window=window, max_output_tokens=limit), 77) == 77
