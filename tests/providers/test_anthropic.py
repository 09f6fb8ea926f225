"""Anthropic specifics: the body goes out as rendered, overflow wordings, credentials, an injected client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import pytest

from lamina.errors import (
    AuthenticationError,
    ContextOverflowError,
    OverloadedError,
    TransientServerError,
)
from lamina.placement import render
from lamina.providers import AnthropicProvider
from lamina.providers._anthropic_errors import map_anthropic_error
from tests.providers.support import collect, completed, new_engine
from tests.wire.fixtures import API_KEY, anthropic_provider
from tests.wire.script import Fail, Reply
from tests.wire.server import WireServer


async def test_the_rendered_body_is_sent_unchanged_plus_stream(wire: WireServer, tmp_path: Path) -> None:
    engine = new_engine(tmp_path)
    wire.script(Reply(text="ok"))
    async with anthropic_provider(wire, anthropic_cache_ttl="5m", stable_ttl="1h", max_tokens=1024) as provider:
        body: Any = render(engine.prepare_turn("hello"), provider.target)
        await collect(provider.stream(body))
    sent = wire.requests[0].body
    assert sent == {**body, "stream": True}
    assert sent["max_tokens"] == 1024 and sent["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


@pytest.mark.parametrize(
    "wording",
    [
        "prompt is too long: 208656 tokens > 200000 maximum",
        "input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000, decrease input length or "
        "`max_tokens` and try again",
    ],
)
async def test_every_overflow_wording_is_an_overflow(wire: WireServer, wording: str) -> None:
    wire.script(Fail("overflow", message=wording))
    async with anthropic_provider(wire) as provider:
        with pytest.raises(ContextOverflowError, match=r"context limit|prompt is too long"):
            await collect(provider.stream({"model": "claude-sonnet-5", "max_tokens": 10, "messages": [_user()]}))


async def test_an_other_400_is_not_an_overflow(wire: WireServer) -> None:
    wire.script(Fail("invalid"))
    async with anthropic_provider(wire) as provider:
        with pytest.raises(Exception) as caught:
            await collect(provider.stream({"model": "claude-sonnet-5", "max_tokens": 10, "messages": [_user()]}))
    assert type(caught.value).__name__ == "InvalidRequestError" and caught.value.args[0].startswith(
        "anthropic (HTTP 400)"
    )


async def test_an_overloaded_error_event_mid_stream_is_overloaded(wire: WireServer) -> None:
    wire.script(Fail("overloaded", in_stream=True))
    async with anthropic_provider(wire) as provider:
        with pytest.raises(OverloadedError) as caught:
            await collect(provider.stream({"model": "claude-sonnet-5", "max_tokens": 10, "messages": [_user()]}))
    assert caught.value.status is None and caught.value.retryable  # arrived inside a 200 stream


async def test_no_credentials_anywhere_is_an_authentication_error(
    wire: WireServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE", "ANTHROPIC_IDENTITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "no-config"))
    wire.script(Reply(text="never"))
    async with AnthropicProvider("claude-sonnet-5", base_url=wire.url) as provider:
        with pytest.raises(AuthenticationError, match="no API key: set ANTHROPIC_API_KEY"):
            await collect(provider.stream({"model": "claude-sonnet-5", "max_tokens": 10, "messages": [_user()]}))
    assert wire.requests == []


async def test_an_injected_client_is_used_and_left_open(wire: WireServer) -> None:
    client = anthropic.AsyncAnthropic(api_key=API_KEY, base_url=wire.url, max_retries=0)
    wire.script(Reply(text="first"), Reply(text="second"))
    async with AnthropicProvider("claude-sonnet-5", client=client) as provider:
        done = completed(await collect(provider.stream({"model": "m", "max_tokens": 10, "messages": [_user()]})))
    assert done.text == "first"
    response = await client.messages.create(model="claude-sonnet-5", max_tokens=10, messages=[_user()])
    assert response.content[0].type == "text" and response.content[0].text == "second"
    await client.close()


def test_errors_from_elsewhere_are_not_mapped() -> None:
    assert map_anthropic_error(ValueError("not ours")) is None
    assert map_anthropic_error(TypeError("some other type error")) is None


async def test_a_stream_without_message_stop_is_transient() -> None:
    from lamina.providers._anthropic import _Reply

    with pytest.raises(TransientServerError, match="before message_stop"):
        _Reply().completed()


def _user() -> anthropic.types.MessageParam:
    return {"role": "user", "content": "hi"}
