"""`provider_from_spec(max_output_tokens=)`: the cap each provider is built with, and one that cannot be."""

from __future__ import annotations

import pytest

from lamina.errors import UsageError
from lamina.placement import AnthropicTarget, OpenAIChatTarget, OpenAIResponsesTarget
from lamina.providers import provider_from_spec


def test_each_kind_takes_the_cap_into_its_target() -> None:
    anthropic = provider_from_spec("anthropic:claude-sonnet-5", max_output_tokens=900)
    chat = provider_from_spec("openai:gpt-5.4", max_output_tokens=901)
    responses = provider_from_spec("openai-responses:gpt-5.4", max_output_tokens=902)
    compat = provider_from_spec("openai-compat:http://127.0.0.1:1/v1#m", max_output_tokens=903)
    assert isinstance(anthropic.target, AnthropicTarget) and anthropic.target.max_tokens == 900
    assert isinstance(chat.target, OpenAIChatTarget) and chat.target.max_tokens == 901
    assert isinstance(responses.target, OpenAIResponsesTarget) and responses.target.max_output_tokens == 902
    assert isinstance(compat.target, OpenAIChatTarget) and compat.target.max_tokens == 903


def test_without_a_cap_the_providers_keep_their_own() -> None:
    anthropic = provider_from_spec("anthropic:claude-sonnet-5")
    chat = provider_from_spec("openai:gpt-5.4")
    assert isinstance(anthropic.target, AnthropicTarget) and anthropic.target.max_tokens == 8192
    assert isinstance(chat.target, OpenAIChatTarget) and chat.target.max_tokens is None


@pytest.mark.parametrize("cap", [0, -1])
def test_a_cap_below_one_is_a_usage_error(cap: int) -> None:
    with pytest.raises(UsageError, match=f"max_output_tokens must be a positive integer, not {cap}"):
        provider_from_spec("openai:gpt-5.4", max_output_tokens=cap)
