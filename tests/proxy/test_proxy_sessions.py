"""Each conversation through the proxy is a Lamina session: every request as sent upstream, with its usage."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.proxy import ERROR_ENTRY, REQUEST_ENTRY
from lamina.session import AssistantMessage, Custom, LogEntry, SessionStore, UserMessage, open_store
from tests.proxy.conftest import RunningProxy
from tests.wire.fixtures import API_KEY
from tests.wire.script import Fail, Reply
from tests.wire.server import WireServer

pytestmark = pytest.mark.slow  # a proxy server (or process) per test

SYSTEM: list[Any] = [{"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}}]
runner = CliRunner()


def _turns(n: int) -> list[Any]:
    """A growing conversation whose last message carries the client's rolling breakpoint (as Claude Code's does)."""
    messages: list[Any] = []
    for i in range(n):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"Question {i}: " + "word " * 1200}]})
        if i < n - 1:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": f"Answer {i}."}]})
    messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return messages


def _entries(store: SessionStore, session_id: str) -> list[LogEntry]:
    with store.open(session_id, writable=False) as session:
        return session.entries()


def _requests(entries: list[LogEntry]) -> list[Custom]:
    return [e for e in entries if isinstance(e, Custom) and e.name == REQUEST_ENTRY]


def test_a_conversation_is_one_session_with_each_request_as_sent_and_its_usage(
    proxy: RunningProxy, wire: WireServer
) -> None:
    client = anthropic.Anthropic(api_key=API_KEY, base_url=proxy.url, max_retries=0)
    for n in (1, 2, 3):
        wire.script(Reply(text=f"Answer {n - 1}."))
        client.messages.create(model="claude-sonnet-5", max_tokens=100, system=SYSTEM, messages=_turns(n))
    client.close()
    [summary] = proxy.store.list()
    assert summary.id.startswith("proxy-")
    assert summary.title.startswith("Question 0:")
    entries = _entries(proxy.store, summary.id)
    requests = _requests(entries)
    assert len(requests) == 3
    with proxy.store.open(summary.id, writable=False) as session:
        for logged, received in zip(requests, wire.requests, strict=True):
            with session.open_file(logged.data["body"]) as body:
                assert body.read() == received.raw
    answers = [e for e in entries if isinstance(e, AssistantMessage)]
    assert [a.text for a in answers] == ["Answer 0.", "Answer 1.", "Answer 2."]
    billed = [r.usage for r in wire.requests]
    assert [(a.usage.cache_read, a.usage.cache_write) for a in answers if a.usage is not None] == [
        (u.read, u.write_5m + u.write_1h) for u in billed if u is not None
    ]
    assert answers[1].usage is not None and answers[1].usage.cache_read > 0  # the cache figures are the upstream's
    assert [e.text for e in entries if isinstance(e, UserMessage)] == [
        f"Question {i}: " + "word " * 1200 for i in range(3)
    ]


def test_two_conversations_are_two_sessions(proxy: RunningProxy, wire: WireServer) -> None:
    client = openai.OpenAI(api_key=API_KEY, base_url=proxy.openai_url, max_retries=0)
    wire.script(Reply(text="One."), Reply(text="Two."))
    client.responses.create(model="gpt-5", instructions="Be brief.", input="First conversation.")
    client.responses.create(model="gpt-5", instructions="Be brief.", input="Second conversation.")
    client.close()
    assert len(proxy.store.list()) == 2


def test_a_refused_request_is_logged_with_the_upstream_status(proxy: RunningProxy, wire: WireServer) -> None:
    wire.script(Fail("rate_limit"))
    client = anthropic.Anthropic(api_key=API_KEY, base_url=proxy.url, max_retries=0)
    with pytest.raises(anthropic.RateLimitError):
        client.messages.create(model="claude-sonnet-5", max_tokens=100, messages=_turns(1))
    client.close()
    [summary] = proxy.store.list()
    [error] = [e for e in _entries(proxy.store, summary.id) if isinstance(e, Custom) and e.name == ERROR_ENTRY]
    assert error.data["status"] == 429
    assert "rate_limit_error" in error.data["body"]


def test_sessions_budget_and_the_proxy_report_read_a_proxied_session(
    proxy: RunningProxy, wire: WireServer, tmp_path: Path
) -> None:
    client = anthropic.Anthropic(api_key=API_KEY, base_url=proxy.url, max_retries=0)
    for n in (1, 2):
        wire.script(Reply(text=f"Answer {n - 1}."))
        with client.messages.stream(model="claude-sonnet-5", max_tokens=100, system=SYSTEM, messages=_turns(n)) as s:
            s.get_final_message()
    client.close()
    [summary] = proxy.store.list()
    proxy.sessions.close()  # the proxy's writer lets go, as when it stops
    store = str(tmp_path / "store")
    budget = runner.invoke(app, ["--store", store, "sessions", "budget", summary.id, "--json"])
    assert budget.exit_code == 0, budget.output
    assert json.loads(budget.stdout)["session"] == summary.id
    report = runner.invoke(app, ["--store", store, "proxy", "report", summary.id, "--json"])
    assert report.exit_code == 0, report.output
    found = json.loads(report.stdout)
    assert [r["status"] for r in found["requests"]] == [200, 200]
    first, second = (r["usage"] for r in found["requests"])
    assert first["cache_write"] > 0 and second["cache_read"] > 0
    assert found["requests"][1]["miss"] is None
    shown = runner.invoke(app, ["--store", store, "proxy", "report", summary.id])
    assert shown.exit_code == 0, shown.output
    assert "2 requests" in shown.stdout


def test_a_killed_proxy_loses_no_logged_request(wire: WireServer, tmp_path: Path) -> None:
    store = tmp_path / "store"
    command = [
        sys.executable,
        "-m",
        "lamina.cli",
        "--store",
        str(store),
        "proxy",
        "--port",
        "0",
        "--upstream",
        wire.url,
    ]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env={**os.environ})
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        url = re.search(r"listening on (http://\S+)", line)
        assert url is not None, line
        client = anthropic.Anthropic(api_key=API_KEY, base_url=url.group(1), max_retries=0)
        for n in (1, 2, 3):
            wire.script(Reply(text=f"Answer {n - 1}."))
            client.messages.create(model="claude-sonnet-5", max_tokens=100, system=SYSTEM, messages=_turns(n))
        client.close()
        process.send_signal(signal.SIGKILL)  # no flush, no close: what was answered must be on disk already
        process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()
    reopened = open_store(str(store))
    try:
        [summary] = reopened.list()
        entries = _entries(reopened, summary.id)
    finally:
        reopened.close()
    assert len(_requests(entries)) == 3
    assert [e.usage is not None for e in entries if isinstance(e, AssistantMessage)] == [True, True, True]


def test_a_request_without_a_log_still_forwards(wire: WireServer) -> None:
    """`--no-log`: the application with no sessions forwards exactly."""
    from starlette.testclient import TestClient

    from lamina.proxy import Upstreams, create_proxy_app

    wire.script(Reply(text="Hi."))
    body = json.dumps({"model": "claude-sonnet-5", "max_tokens": 10, "messages": _turns(1)}).encode()
    with TestClient(create_proxy_app(Upstreams(wire.url, wire.url))) as test_client:
        response = test_client.post("/v1/messages", content=body, headers={"x-api-key": API_KEY})
    assert response.status_code == 200
    assert wire.requests[-1].raw == body
    assert response.content == wire.requests[-1].sent
    assert httpx.codes.is_success(response.status_code)


def test_the_inspector_shows_a_proxied_session_with_its_cache_figures(proxy: RunningProxy, wire: WireServer) -> None:
    from starlette.testclient import TestClient

    from lamina.pricing import cost_of
    from lamina.serve import create_app

    client = anthropic.Anthropic(api_key=API_KEY, base_url=proxy.url, max_retries=0)
    for n in (1, 2):
        wire.script(Reply(text=f"Answer {n - 1}."))
        client.messages.create(model="claude-sonnet-5", max_tokens=100, system=SYSTEM, messages=_turns(n))
    client.close()
    [summary] = proxy.store.list()
    with TestClient(create_app(proxy.store, prices=cost_of), base_url="http://127.0.0.1:8765") as inspector:
        listed = inspector.get("/")
        page = inspector.get(f"/sessions/{summary.id}")
    assert listed.status_code == 200 and summary.id in listed.text
    assert page.status_code == 200
    assert "Answer 1." in page.text and "Question 0:" in page.text


def test_a_postgresql_store_keeps_the_proxied_sessions_the_same_way(
    wire: WireServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.proxy.conftest import start_proxy
    from tests.support.postgres import fresh_schema, schema_url

    monkeypatch.setenv("LAMINA_FILES", str(tmp_path / "pg-files"))  # the sessions' files, not the user's folder
    with fresh_schema("proxy") as schema:
        running = start_proxy(wire, tmp_path / "files", location=schema_url(schema))
        proxy = next(running)
        try:
            client = anthropic.Anthropic(api_key=API_KEY, base_url=proxy.url, max_retries=0)
            for n in (1, 2):
                wire.script(Reply(text=f"Answer {n - 1}."))
                client.messages.create(model="claude-sonnet-5", max_tokens=100, system=SYSTEM, messages=_turns(n))
            client.close()
            proxy.sessions.close()
            [summary] = proxy.store.list()
            entries = _entries(proxy.store, summary.id)
        finally:
            next(running, None)
    assert len(_requests(entries)) == 2
    assert [a.text for a in entries if isinstance(a, AssistantMessage)] == ["Answer 0.", "Answer 1."]
