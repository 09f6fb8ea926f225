"""Validate rendered request bodies against the official SDKs' request types."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pydantic
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

_anthropic = pydantic.TypeAdapter(MessageCreateParamsNonStreaming)
_openai_chat = pydantic.TypeAdapter(CompletionCreateParamsNonStreaming)
_openai_responses = pydantic.TypeAdapter(ResponseCreateParamsNonStreaming)


def _force(value: Any) -> Any:
    """The SDK types use `Iterable[...]`, which pydantic validates lazily: consume every iterator."""
    if isinstance(value, dict):
        return {k: _force(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_force(v) for v in value]
    if isinstance(value, Iterator) or type(value).__name__ == "ValidatorIterator":
        return [_force(v) for v in value]
    return value


def validate_anthropic(body: Any) -> Any:
    return _force(_anthropic.validate_python(body))


def validate_openai_chat(body: Any) -> Any:
    return _force(_openai_chat.validate_python(body))


def validate_openai_responses(body: Any) -> Any:
    return _force(_openai_responses.validate_python(body))
