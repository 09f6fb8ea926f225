"""The one read of an SDK's event stream, shared by the SDK adapters (I/O: network).

The SDK's stream is opened, its events are fed to the adapter's reply (which turns them into
`ProviderEvent`s) until the stream ends or the reply needs no more, and the stream is closed
whatever happens; the SDK's errors become `ProviderError`s through the adapter's `reraise`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from typing import Any, NoReturn, Protocol, TypeVar

from lamina.errors import ProviderError
from lamina.providers._provider import Completed, ProviderEvent

_E = TypeVar("_E")
_E_co = TypeVar("_E_co", covariant=True)
_E_contra = TypeVar("_E_contra", contravariant=True)


class SdkStream(Protocol[_E_co]):
    """An SDK's open event stream (`anthropic.AsyncStream`, `openai.AsyncStream`)."""

    def __anext__(self) -> Awaitable[_E_co]:
        """The next event."""
        ...

    async def close(self) -> None:
        """Close the stream and its HTTP response."""
        ...


class StreamReply(Protocol[_E_contra]):
    """What the stream of one response has said so far."""

    @property
    def finished(self) -> bool:
        """Whether the reply needs no more events (the rest of the stream is not read)."""
        ...

    def feed(self, event: _E_contra) -> Iterator[ProviderEvent]:
        """Take one of the SDK's events; the events it makes."""
        ...

    def completed(self) -> Completed:
        """The response's end, once the stream has ended.

        Raises:
            TransientServerError: The stream ended before the response did.
        """
        ...


async def relay(
    opening: Callable[[], Awaitable[SdkStream[_E]]], reply: StreamReply[_E], reraise: Callable[[Exception], NoReturn]
) -> AsyncGenerator[ProviderEvent]:
    """Open the stream, yield what `reply` makes of its events, then `reply.completed()`.

    Args:
        opening: Makes the SDK's call that opens the stream (its errors are the SDK's too).
        reply: Reads the events.
        reraise: Raises the `ProviderError` for an SDK error (the error itself when it is none).

    Yields:
        The events, the last one `Completed`.
    """
    try:
        events = await opening()
    except Exception as exc:
        reraise(exc)
    try:
        while not reply.finished:
            try:
                event = await anext(events)
            except StopAsyncIteration:
                break
            except Exception as exc:
                reraise(exc)
            for out in reply.feed(event):
                yield out
    finally:
        await events.close()
    yield reply.completed()


def call_input(raw: str, provider: str, subject: str, *, empty: dict[str, Any]) -> dict[str, Any]:
    """A tool call's streamed input, parsed: it must be a JSON object.

    Args:
        raw: The joined pieces of the input, as streamed.
        provider: Names the provider in the error.
        subject: The error's words before `not JSON`: the call and what the provider calls its
            input (`tool call call_1: arguments are`).
        empty: The input when nothing (or only white space) was streamed.

    Returns:
        The input.

    Raises:
        ProviderError: The input is not JSON, or not a JSON object.
    """
    if not raw.strip():
        return empty
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ProviderError(provider, f"{subject} not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ProviderError(provider, f"{subject} not a JSON object")
    return value
