"""The retry policy and `stream_with_retry` (with the scripted provider: no network)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest

from lamina.errors import (
    AuthenticationError,
    ContextOverflowError,
    OverloadedError,
    RateLimitError,
    TransientServerError,
    UsageError,
)
from lamina.providers import (
    Completed,
    ProviderEvent,
    RetryNotice,
    RetryPolicy,
    ScriptedError,
    ScriptedProvider,
    ScriptedResponse,
    TextDelta,
    stream_with_retry,
)
from lamina.providers._retry import is_transport_error, parse_retry_after

BODY: Any = {"model": "scripted", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def policy(sleeps: Sleeps, **options: Any) -> RetryPolicy:
    return RetryPolicy(sleep=sleeps, random=lambda: 0.5, **options)


async def collect(provider: ScriptedProvider, retry: RetryPolicy) -> list[ProviderEvent]:
    return [event async for event in stream_with_retry(provider, BODY, retry)]


async def test_retries_retryable_errors_with_backoff_and_honours_retry_after() -> None:
    provider = ScriptedProvider(
        [
            ScriptedError("overloaded"),
            ScriptedError("server"),
            ScriptedError("rate_limit", retry_after=7.5),
            ScriptedResponse(text="finally"),
        ]
    )
    sleeps = Sleeps()
    events = await collect(provider, policy(sleeps, max_attempts=4, base_delay=1.0))
    assert sleeps.delays == [0.5, 1.0, 7.5]  # full jitter (0.5 × 1, 0.5 × 2), then exactly what the server asked
    assert isinstance(events[-1], Completed) and events[-1].text == "finally"
    assert len(provider.requests) == 4


async def test_backoff_cap_grows_exponentially_up_to_max_delay() -> None:
    retry = RetryPolicy(random=lambda: 0.999, base_delay=1.0, max_delay=5.0, max_attempts=10)
    error = TransientServerError("p", "boom")
    assert [round(retry.delay(n, error) or 0, 2) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert retry.delay(10, error) is None  # attempts used up


async def test_gives_up_after_max_attempts_with_the_last_error() -> None:
    provider = ScriptedProvider([ScriptedError("overloaded"), ScriptedError("overloaded", message="still busy")])
    sleeps = Sleeps()
    with pytest.raises(OverloadedError, match="still busy"):
        await collect(provider, policy(sleeps, max_attempts=2))
    assert sleeps.delays == [0.5]


@pytest.mark.parametrize(
    ("step", "error"),
    [
        (ScriptedError("overflow"), ContextOverflowError),
        (ScriptedError("auth"), AuthenticationError),
    ],
)
async def test_non_retryable_errors_are_raised_at_once(step: ScriptedError, error: type[Exception]) -> None:
    provider = ScriptedProvider([step, ScriptedResponse(text="never")])
    sleeps = Sleeps()
    with pytest.raises(error):
        await collect(provider, policy(sleeps))
    assert sleeps.delays == [] and provider.remaining == 1


async def test_never_retries_once_output_was_streamed() -> None:
    provider = ScriptedProvider([ScriptedError("server", text="half an ans"), ScriptedResponse(text="whole answer")])
    sleeps = Sleeps()
    seen: list[ProviderEvent] = []
    with pytest.raises(TransientServerError):
        async for event in stream_with_retry(provider, BODY, policy(sleeps)):
            seen.append(event)
    assert "".join(e.text for e in seen if isinstance(e, TextDelta)) == "half an ans"
    assert sleeps.delays == [] and provider.remaining == 1


async def test_retry_after_longer_than_the_policy_allows_is_not_waited_for() -> None:
    provider = ScriptedProvider([ScriptedError("rate_limit", retry_after=3600), ScriptedResponse(text="later")])
    sleeps = Sleeps()
    with pytest.raises(RateLimitError) as caught:
        await collect(provider, policy(sleeps, max_retry_after=60))
    assert caught.value.retry_after == 3600 and sleeps.delays == []


async def test_on_retry_reports_each_retry() -> None:
    provider = ScriptedProvider([ScriptedError("overloaded", retry_after=2), ScriptedResponse(text="ok")])
    notices: list[RetryNotice] = []
    events = [e async for e in stream_with_retry(provider, BODY, policy(Sleeps()), on_retry=notices.append)]
    assert isinstance(events[-1], Completed) and events[-1].text == "ok"
    assert [(n.attempt, n.delay, type(n.error)) for n in notices] == [(1, 2.0, OverloadedError)]


async def test_errors_raised_by_the_consumer_are_not_retried() -> None:
    provider = ScriptedProvider([ScriptedResponse(text="one two three four"), ScriptedResponse(text="again")])
    with pytest.raises(KeyError):
        async for _ in stream_with_retry(provider, BODY, policy(Sleeps())):
            raise KeyError("consumer")
    assert provider.remaining == 1


def test_policy_rejects_nonsense() -> None:
    with pytest.raises(UsageError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(UsageError, match="negative"):
        RetryPolicy(base_delay=-1)


def test_parse_retry_after_reads_seconds_milliseconds_and_http_dates() -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert parse_retry_after({"retry-after": "12"}) == 12.0
    assert parse_retry_after({"retry-after": "1.5"}) == 1.5
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": later}, now=now.timestamp) == 30.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None and parse_retry_after(None) is None
    assert parse_retry_after({"retry-after": "-5"}) == 0.0


def test_transport_errors_are_recognised_by_class_not_by_distribution() -> None:
    import httpx

    assert is_transport_error(httpx.RemoteProtocolError("peer closed connection"))
    assert is_transport_error(httpx.ReadTimeout("slow"))
    assert not is_transport_error(ValueError("no"))
