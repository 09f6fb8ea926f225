"""Retrying provider calls: capped exponential backoff with full jitter, honouring `retry-after` (I/O: sleeps).

The SDK clients are built with `max_retries=0`, so this is the only place a request is retried.
`stream_with_retry` retries an error only when it is `retryable` (rate limits, overload, transient
server and connection failures) and only while nothing has been yielded yet: once a text delta
or a tool call has reached the caller, a retry would show it twice, so the error propagates.

The helpers at the end (`parse_retry_after`, `is_transport_error`) are what the adapters use to
classify a failure before it reaches the policy.
"""

from __future__ import annotations

import asyncio
import email.utils
import random as _random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from lamina.errors import ProviderError, RateLimitError, UsageError
from lamina.placement import RenderedRequest
from lamina.providers._provider import Provider, ProviderEvent


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How often and how long to wait before sending a failed request again."""

    max_attempts: int = 4
    """Attempts in all, the first one included (1 disables retries)."""
    base_delay: float = 1.0
    """Backoff cap of the first retry, in seconds; it doubles with every further retry."""
    max_delay: float = 30.0
    """Upper bound of the backoff cap, in seconds."""
    max_retry_after: float = 60.0
    """A provider asking to wait longer than this (seconds) is not retried: the error goes to the caller."""
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, repr=False)
    """Waits the given seconds (tests inject one that records the delays)."""
    random: Callable[[], float] = field(default=_random.random, repr=False)
    """Returns a float in [0, 1); the jitter source."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise UsageError(f"RetryPolicy.max_attempts must be at least 1, got {self.max_attempts}")
        if self.base_delay < 0 or self.max_delay < 0 or self.max_retry_after < 0:
            raise UsageError(f"RetryPolicy delays must not be negative: {self!r}")

    def delay(self, attempt: int, error: ProviderError) -> float | None:
        """Seconds to wait after failed attempt number `attempt` (1-based), or None to give up.

        An error's own `max_attempts` (an empty stream's 2) caps the policy's.

        A `retry_after` from the provider is honoured exactly (never retry sooner than asked);
        otherwise the wait is uniform in [0, min(max_delay, base_delay × 2^(attempt−1))] ("full
        jitter"), which spreads out clients that failed together.
        """
        limit = min(self.max_attempts, error.max_attempts or self.max_attempts)
        if not error.retryable or attempt >= limit:
            return None
        retry_after = error.retry_after if isinstance(error, RateLimitError) else None
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after else None
        cap = min(self.max_delay, self.base_delay * 2.0 ** (attempt - 1))
        return self.random() * cap


DEFAULT_RETRY_POLICY = RetryPolicy()
"""The policy `stream_with_retry` uses when none is given."""


@dataclass(frozen=True, slots=True)
class RetryNotice:
    """A failed attempt that is about to be retried (for progress output)."""

    attempt: int
    """The attempt that failed (1-based)."""
    delay: float
    """Seconds until the next attempt."""
    error: ProviderError


async def stream_with_retry(
    provider: Provider,
    request: RenderedRequest,
    policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    *,
    on_retry: Callable[[RetryNotice], None] | None = None,
) -> AsyncIterator[ProviderEvent]:
    """`provider.stream(request)`, sending the request again after retryable errors.

    Retries only while no event has been yielded for the current attempt, so streamed output is
    never duplicated. The last error is raised when the policy gives up.
    """
    attempt = 1
    while True:
        events = provider.stream(request)
        yielded = False
        wait = 0.0
        try:
            while True:
                try:
                    event = await anext(events)
                except StopAsyncIteration:
                    return
                except ProviderError as error:
                    delay = None if yielded else policy.delay(attempt, error)
                    if delay is None:
                        raise
                    if on_retry is not None:
                        on_retry(RetryNotice(attempt, delay, error))
                    wait = delay
                    break
                yielded = True
                yield event  # outside the `try` above: errors raised by the consumer are never retried
        finally:
            await _close(events)
        await policy.sleep(wait)
        attempt += 1


async def _close(events: AsyncIterator[ProviderEvent]) -> None:
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        await aclose()


def parse_retry_after(headers: Mapping[str, str] | None, *, now: Callable[[], float] = time.time) -> float | None:
    """Seconds to wait according to `retry-after-ms` or `retry-after` (seconds or an HTTP date); None if absent.

    `headers` should look names up case-insensitively (as HTTP clients' header maps do).
    """
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")  # OpenAI's finer-grained variant
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now())


def is_transport_error(exc: BaseException) -> bool:
    """Whether `exc` is a network failure raised by the SDKs' HTTP stack (httpx or a fork of it).

    The SDKs wrap transport failures as `APIConnectionError` while sending a request, but a
    connection dropped while the response streams reaches the caller unwrapped; matching by
    class name keeps this independent of which httpx distribution the installed SDK uses.
    """
    for cls in type(exc).__mro__:
        module = cls.__module__.split(".", 1)[0]
        if module.startswith(("httpx", "httpcore")) and cls.__name__ in ("TransportError", "TimeoutException"):
            return True
    return False
