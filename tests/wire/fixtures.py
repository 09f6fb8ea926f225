"""Pytest fixtures and provider factories for the wire server.

Import the fixtures into a `conftest.py` to use them (`from tests.wire.fixtures import wire`), then
script answers and read what was sent:

```python
async def test_something(wire: WireServer) -> None:
    wire.script(Reply(text="Hello"), Fail("overloaded", retry_after=2))
    async with anthropic_provider(wire) as provider:
        ...
    assert wire.requests[0].body["model"] == "claude-sonnet-5"
```
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from tests.wire.server import ManualClock, WireServer

if TYPE_CHECKING:  # imported where a provider is made: every pytest process loads this plugin, the SDKs cost a second
    from lamina.providers import AnthropicProvider, OpenAIChatProvider, OpenAIResponsesProvider

API_KEY = "wire-test-key"


@pytest.fixture
def wire_clock() -> ManualClock:
    """The wire server's clock: it moves only with `advance(seconds)`."""
    return ManualClock()


@pytest.fixture
def wire(wire_clock: ManualClock) -> Iterator[WireServer]:
    """A running wire server for one test, on `wire_clock`."""
    with WireServer(clock=wire_clock) as server:
        yield server


def anthropic_provider(wire: WireServer, model: str = "claude-sonnet-5", **options: Any) -> AnthropicProvider:
    """An `AnthropicProvider` whose SDK client talks to `wire`."""
    from lamina.providers import AnthropicProvider

    return AnthropicProvider(model, api_key=options.pop("api_key", API_KEY), base_url=wire.url, **options)


def openai_chat_provider(wire: WireServer, model: str = "gpt-5", **options: Any) -> OpenAIChatProvider:
    """An `OpenAIChatProvider` whose SDK client talks to `wire`."""
    from lamina.providers import OpenAIChatProvider

    return OpenAIChatProvider(model, api_key=options.pop("api_key", API_KEY), base_url=wire.openai_url, **options)


def openai_responses_provider(wire: WireServer, model: str = "gpt-5", **options: Any) -> OpenAIResponsesProvider:
    """An `OpenAIResponsesProvider` whose SDK client talks to `wire`."""
    from lamina.providers import OpenAIResponsesProvider

    return OpenAIResponsesProvider(model, api_key=options.pop("api_key", API_KEY), base_url=wire.openai_url, **options)
