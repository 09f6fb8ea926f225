"""With every edit off the proxy is exact: the upstream receives the client's bytes, the client the upstream's.

The clients are the official SDKs pointed at the proxy; the upstream is the wire server, which keeps
the bytes it received and the bytes it sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from lamina.proxy import ProxySessions, Upstreams, create_proxy_app
from lamina.session import open_store
from tests.proxy.conftest import RunningProxy
from tests.wire.fixtures import API_KEY
from tests.wire.script import Fail, Reply, ToolUse
from tests.wire.server import WireServer

pytestmark = pytest.mark.slow  # a proxy server per test

MESSAGES: list[Any] = [{"role": "user", "content": "Say hello."}]


class Sent:
    """The bytes an SDK client put on the wire, request by request."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self.clients: list[httpx2.Client] = []

    def client(self) -> httpx2.Client:
        self.clients.append(httpx2.Client(event_hooks={"request": [self._keep]}))
        return self.clients[-1]

    def close(self) -> None:
        for client in self.clients:
            client.close()

    def _keep(self, request: httpx2.Request) -> None:
        self.bodies.append(request.read())
        self.headers.append({k.lower(): v for k, v in request.headers.items()})


@pytest.fixture
def sent() -> Iterator[Sent]:
    kept = Sent()
    yield kept
    kept.close()


def _anthropic(proxy: RunningProxy, sent: Sent) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=API_KEY, base_url=proxy.url, http_client=sent.client(), max_retries=0)


def _openai(proxy: RunningProxy, sent: Sent) -> openai.OpenAI:
    return openai.OpenAI(api_key=API_KEY, base_url=proxy.openai_url, http_client=sent.client(), max_retries=0)


def _exact(wire: WireServer, sent: Sent, received: bytes) -> None:
    last = wire.requests[-1]
    assert last.raw == sent.bodies[-1]
    assert received == last.sent


def test_an_anthropic_message_passes_byte_for_byte(proxy: RunningProxy, wire: WireServer, sent: Sent) -> None:
    wire.script(Reply(text="Hello there.", tool_calls=[ToolUse("read", {"path": "a.txt"})]))
    client = _anthropic(proxy, sent)
    raw = client.messages.with_raw_response.create(model="claude-sonnet-5", max_tokens=100, messages=MESSAGES)
    assert raw.parse().content[0].type == "text"
    _exact(wire, sent, raw.http_response.content)


def test_an_anthropic_stream_passes_byte_for_byte(proxy: RunningProxy, wire: WireServer, sent: Sent) -> None:
    wire.script(Reply(text="A streamed answer in several pieces.", reasoning="Thinking first."))
    client = _anthropic(proxy, sent)
    with client.messages.with_streaming_response.create(
        model="claude-sonnet-5",
        max_tokens=2000,
        messages=MESSAGES,
        stream=True,
        thinking={"type": "enabled", "budget_tokens": 1024},
    ) as response:
        received = b"".join(response.iter_bytes())
    assert b"message_stop" in received
    _exact(wire, sent, received)


def test_the_sdk_stream_helper_reads_the_same_message_through_the_proxy(
    proxy: RunningProxy, wire: WireServer, sent: Sent
) -> None:
    wire.script(Reply(text="Hello through the helper."))
    with _anthropic(proxy, sent).messages.stream(model="claude-sonnet-5", max_tokens=100, messages=MESSAGES) as stream:
        message = stream.get_final_message()
    assert message.content[0].type == "text"
    assert message.content[0].text == "Hello through the helper."


def test_count_tokens_passes_byte_for_byte(proxy: RunningProxy, wire: WireServer, sent: Sent) -> None:
    client = _anthropic(proxy, sent)
    raw = client.messages.with_raw_response.count_tokens(model="claude-sonnet-5", messages=MESSAGES)
    assert raw.parse().input_tokens > 0
    _exact(wire, sent, raw.http_response.content)


def test_headers_and_betas_reach_the_upstream_untouched(proxy: RunningProxy, wire: WireServer, sent: Sent) -> None:
    wire.script(Reply(text="Hi."))
    client = _anthropic(proxy, sent)
    client.beta.messages.create(
        model="claude-sonnet-5",
        max_tokens=100,
        messages=MESSAGES,
        betas=["context-management-2025-06-27", "interleaved-thinking-2025-05-14"],
        extra_headers={"x-client-trace": "trace-1", "anthropic-version": "2023-06-01"},
    )
    headers = wire.requests[-1].headers
    assert headers["anthropic-beta"] == "context-management-2025-06-27,interleaved-thinking-2025-05-14"
    assert headers["x-client-trace"] == "trace-1"
    assert headers["anthropic-version"] == "2023-06-01"
    client_sent = {k: v for k, v in sent.headers[-1].items() if k not in ("host", "connection")}
    assert {k: headers.get(k) for k in client_sent} == client_sent


def test_an_upstream_error_reaches_the_client_as_sent(proxy: RunningProxy, wire: WireServer, sent: Sent) -> None:
    wire.script(Fail("overloaded", retry_after=3))
    client = _anthropic(proxy, sent)
    with pytest.raises(anthropic.APIStatusError) as caught:
        client.messages.create(model="claude-sonnet-5", max_tokens=100, messages=MESSAGES)
    assert caught.value.status_code == 529
    assert caught.value.response.headers["retry-after"] == "3"
    _exact(wire, sent, caught.value.response.content)


def test_an_error_inside_a_stream_reaches_the_client_as_sent(proxy: RunningProxy, wire: WireServer, sent: Sent) -> None:
    wire.script(Fail("overloaded", in_stream=True, text_before="Partial"))
    client = _anthropic(proxy, sent)
    with client.messages.with_streaming_response.create(
        model="claude-sonnet-5", max_tokens=100, messages=MESSAGES, stream=True
    ) as response:
        received = b"".join(response.iter_bytes())
    assert b"overloaded_error" in received
    _exact(wire, sent, received)


@pytest.mark.parametrize("stream", [False, True])
def test_chat_completions_pass_byte_for_byte(proxy: RunningProxy, wire: WireServer, sent: Sent, stream: bool) -> None:
    wire.script(Reply(text="Hello from chat.", tool_calls=[ToolUse("read", {"path": "b.txt"})]))
    client = _openai(proxy, sent)
    if stream:
        with client.chat.completions.with_streaming_response.create(
            model="gpt-5", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        ) as response:
            received = b"".join(response.iter_bytes())
        assert b"[DONE]" in received
    else:
        raw = client.chat.completions.with_raw_response.create(model="gpt-5", messages=MESSAGES)
        assert raw.parse().choices[0].message.content == "Hello from chat."
        received = raw.http_response.content
    _exact(wire, sent, received)


@pytest.mark.parametrize("stream", [False, True])
def test_responses_pass_byte_for_byte(proxy: RunningProxy, wire: WireServer, sent: Sent, stream: bool) -> None:
    wire.script(Reply(text="Hello from responses.", reasoning="A thought."))
    client = _openai(proxy, sent)
    if stream:
        with client.responses.with_streaming_response.create(
            model="gpt-5",
            input="Say hello.",
            stream=True,
            reasoning={"effort": "low"},
            include=["reasoning.encrypted_content"],
        ) as response:
            received = b"".join(response.iter_bytes())
        assert b"response.completed" in received
    else:
        raw = client.responses.with_raw_response.create(model="gpt-5", input="Say hello.")
        assert raw.parse().output_text == "Hello from responses."
        received = raw.http_response.content
    _exact(wire, sent, received)


def test_a_body_the_proxy_cannot_read_is_forwarded_untouched_and_logged(
    proxy: RunningProxy, wire: WireServer, caplog: pytest.LogCaptureFixture
) -> None:
    body = b'{"model": "claude-sonnet-5", "messages": [trailing'
    with caplog.at_level(logging.WARNING, logger="lamina.proxy"):
        response = httpx.post(f"{proxy.url}/v1/messages", content=body, headers={"x-api-key": API_KEY})
    assert wire.requests[-1].raw == body
    assert response.status_code == 400
    assert response.content == wire.requests[-1].sent
    assert "forwarded untouched: the body is not JSON" in caplog.text
    assert proxy.store.list() == []  # nothing to recognise a conversation by


def test_an_unknown_path_is_forwarded_too(proxy: RunningProxy, wire: WireServer) -> None:
    response = httpx.get(f"{proxy.url}/v1/models", headers={"x-api-key": API_KEY})
    assert response.status_code == 200
    assert "data" in response.json()


def test_a_response_the_reader_does_not_expect_still_reaches_the_client_whole(tmp_path: Path) -> None:
    odd = b'data: {"type": "message_start", "message": {"usage": "odd"}}\n\ndata: {"type": "message_delta"}\n\n'

    def upstream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=httpx.ByteStream(odd), headers={"content-type": "text/event-stream"})

    async def run() -> bytes:
        store = open_store(str(tmp_path / "store"))
        sessions = ProxySessions(store)
        client = httpx.AsyncClient(transport=httpx.MockTransport(upstream))
        app = create_proxy_app(Upstreams("http://up", "http://up"), sessions=sessions, client=client)
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy") as proxy:
                body = b'{"model": "m", "stream": true, "messages": [{"role": "user", "content": "Hi"}]}'
                return (await proxy.post("/v1/messages", content=body)).content
        finally:
            await client.aclose()
            sessions.close()
            store.close()

    assert asyncio.run(run()) == odd
