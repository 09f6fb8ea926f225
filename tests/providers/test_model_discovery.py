"""Model discovery through the SDKs against the wire server's models endpoints: cached with its date, never failing."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lamina.providers import (
    AnthropicProvider,
    Capabilities,
    ModelCache,
    OpenAIChatProvider,
    OpenAIResponsesProvider,
    discover_capabilities,
)
from lamina.providers._discovery import REFETCH_AGE, forget_discoveries
from tests.wire.fixtures import anthropic_provider, openai_chat_provider, openai_responses_provider
from tests.wire.models_api import anthropic_model, openai_model
from tests.wire.server import ManualClock, WireServer

_DAY = 1_796_601_600.0  # 2026-12-07 00:00 UTC


@pytest.fixture(autouse=True)
def _fresh_process() -> Iterator[None]:
    """Each test starts as a new process would: nothing discovered yet."""
    forget_discoveries()
    yield
    forget_discoveries()


async def _discover(
    provider: AnthropicProvider | OpenAIChatProvider | OpenAIResponsesProvider,
    cache: ModelCache,
    *,
    timeout: float = 3.0,
) -> Capabilities:
    """Discover through `provider`, then close it (the SDK client holds a connection)."""
    async with provider:
        return await discover_capabilities(provider, cache=cache, timeout=timeout)


@pytest.fixture
def cache(tmp_path: Path) -> ModelCache:
    return ModelCache(tmp_path / "cache" / "models.json", clock=ManualClock(_DAY))


async def test_anthropic_capabilities_come_from_the_models_endpoint_with_its_date(
    wire: WireServer, cache: ModelCache
) -> None:
    wire.models.anthropic["claude-opus-4-8"] = anthropic_model(
        "claude-opus-4-8", max_input_tokens=640_000, max_tokens=96_000
    )
    async with anthropic_provider(wire, "claude-opus-4-8") as provider:
        assert provider.capabilities.source == "shipped table, unverified"
        found = await discover_capabilities(provider, cache=cache)
        assert provider.capabilities is found
    assert (found.context_window, found.max_output_tokens, found.source) == (
        640_000,
        96_000,
        "models endpoint, 2026-12-07",
    )
    assert found.server_compaction == {"compact_20260112"} and found.system_clear_at  # clear_at: the shipped row's
    assert wire.models.lookups == ["/v1/models/claude-opus-4-8"]
    assert wire.requests == []  # the script's record holds the turns only
    kept = json.loads(cache.path.read_text())["models"]
    assert [entry["fetched_at"] for entry in kept.values()] == [_DAY]


async def test_a_fresh_cached_answer_is_used_without_a_request_and_an_old_one_is_fetched_again(
    wire: WireServer, cache: ModelCache
) -> None:
    wire.models.anthropic["claude-opus-5"] = anthropic_model("claude-opus-5", max_input_tokens=900_000)
    await _discover(anthropic_provider(wire, "claude-opus-5"), cache)
    forget_discoveries()  # a new process
    clock = cache.clock
    assert isinstance(clock, ManualClock)
    clock.advance(REFETCH_AGE - 60)
    again = await _discover(anthropic_provider(wire, "claude-opus-5"), cache)
    assert again.context_window == 900_000 and len(wire.models.lookups) == 1
    forget_discoveries()
    clock.advance(120)
    wire.models.anthropic["claude-opus-5"] = anthropic_model("claude-opus-5", max_input_tokens=1_000_000)
    refetched = await _discover(anthropic_provider(wire, "claude-opus-5"), cache)
    assert refetched.context_window == 1_000_000 and len(wire.models.lookups) == 2
    assert refetched.source == "models endpoint, 2026-12-14"


async def test_an_old_answer_stands_marked_stale_when_the_refetch_fails(wire: WireServer, cache: ModelCache) -> None:
    wire.models.anthropic["claude-sonnet-5"] = anthropic_model("claude-sonnet-5", max_input_tokens=333_000)
    await _discover(anthropic_provider(wire, "claude-sonnet-5"), cache)
    forget_discoveries()
    assert isinstance(cache.clock, ManualClock)
    cache.clock.advance(REFETCH_AGE + 1)
    del wire.models.anthropic["claude-sonnet-5"]  # the endpoint now answers 404
    stale = await _discover(anthropic_provider(wire, "claude-sonnet-5"), cache)
    assert stale.context_window == 333_000
    assert stale.source == "models endpoint, 2026-12-07 (stale: the endpoint did not answer)"


async def test_an_unknown_model_keeps_the_defaults_and_says_so(wire: WireServer, cache: ModelCache) -> None:
    async with anthropic_provider(wire, "claude-next", max_tokens=4096) as provider:
        found = await discover_capabilities(provider, cache=cache)
        assert found.source == "defaults: claude-next is not in the shipped table"
        assert found.context_window == 200_000
        await discover_capabilities(provider, cache=cache)  # once per process: a failure is remembered too
    assert wire.models.lookups == ["/v1/models/claude-next"] and not cache.path.exists()


async def test_a_wrong_key_or_a_slow_endpoint_leaves_the_shipped_table(tmp_path: Path) -> None:
    cache = ModelCache(tmp_path / "models.json")
    with WireServer(api_key="right") as wire:
        wire.models.anthropic["claude-opus-4-5"] = anthropic_model("claude-opus-4-5", max_input_tokens=1)
        refused = await _discover(anthropic_provider(wire, "claude-opus-4-5", api_key="wrong"), cache)
        assert (refused.context_window, refused.source) == (200_000, "shipped table")
        wire.models.delay = 2.0
        forget_discoveries()  # a new process
        provider = anthropic_provider(wire, "claude-opus-4-5", api_key="right")
        started = time.monotonic()
        slow = await _discover(provider, cache, timeout=0.2)
        assert time.monotonic() - started < 1.5  # the turn does not wait for the endpoint
        assert slow.source == "shipped table"


async def test_an_openai_compatible_server_reports_its_window(wire: WireServer, cache: ModelCache) -> None:
    wire.models.openai = [openai_model("qwen3", max_model_len=32_768)]
    async with openai_chat_provider(wire, "qwen3") as chat:
        found = await discover_capabilities(chat, cache=cache)
    assert (found.context_window, found.source) == (32_768, "models endpoint (max_model_len)")
    wire.models.openai = [openai_model("/models/qwen.gguf", meta={"n_ctx": 8_192})]
    async with openai_responses_provider(wire, "local") as responses:
        assert (await discover_capabilities(responses, cache=cache)).context_window == 8_192
    assert wire.models.lookups == ["/v1/models", "/v1/models"] and not cache.path.exists()


async def test_a_compatible_server_without_a_window_or_a_models_list_keeps_the_table(
    wire: WireServer, cache: ModelCache
) -> None:
    wire.models.openai = [openai_model("gpt-5")]
    found = await _discover(openai_chat_provider(wire, "gpt-5"), cache)
    assert (found.context_window, found.source) == (272_000, "shipped table")


async def test_openai_itself_reports_no_window_so_nothing_is_asked(cache: ModelCache) -> None:
    provider = OpenAIResponsesProvider("gpt-5.6", api_key="never-sent")
    assert await _discover(provider, cache) == provider.capabilities
    assert provider.capabilities.cache_regime == "openai-breakpoints" and not cache.path.exists()


async def test_given_capabilities_are_never_rediscovered(wire: WireServer, cache: ModelCache) -> None:
    given = Capabilities(context_window=50_000)
    wire.models.openai = [openai_model("qwen3", max_model_len=32_768)]
    provider = OpenAIChatProvider("qwen3", base_url=wire.openai_url, api_key="k", capabilities=given)
    assert await _discover(provider, cache) is given
    assert wire.models.lookups == []


def test_an_unreadable_cache_file_is_an_empty_cache(tmp_path: Path) -> None:
    path = tmp_path / "models.json"
    path.write_text("{not json")
    cache = ModelCache(path, clock=ManualClock(_DAY))
    assert cache.get("k") is None
    cache.put("k", {"id": "m"})
    kept = cache.get("k")
    assert kept is not None and kept.info == {"id": "m"} and kept.date == "2026-12-07" and cache.fresh(kept)
