"""The inspector in Chromium on a session `lamina proxy` kept: a Claude Code conversation, request by request.

The requests are shaped like Claude Code's (its identity line first in the system, its tools, its
rolling cache breakpoints, a tool_use/tool_result round, streamed), sent through the proxy to the
wire server, whose cache simulator bills them. Screenshots go where the other browser tests put
theirs (`test-output/serve/`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import pytest
from playwright.sync_api import expect

from lamina.session import AssistantMessage, open_store
from tests.proxy.conftest import start_proxy
from tests.serve.conftest import Running, running_server
from tests.serve.test_browser import Watched, browser, page, shot  # noqa: F401 (the browser and page fixtures)
from tests.wire.fixtures import API_KEY
from tests.wire.script import Reply, ToolUse
from tests.wire.server import ManualClock, WireServer

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("browser")]  # a wire server, a proxy and an inspector

MODEL = "claude-sonnet-4-5"
IDENTITY = "You are Claude Code, Anthropic's official CLI for Claude."
BETAS = "claude-code-20250219,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14"
PROMPT = "The test for total() fails. Find out why and fix calc.py."
FOLLOW_UP = "Now add a test for an empty cart."
EPHEMERAL = {"type": "ephemeral"}
SYSTEM: list[Any] = [
    {"type": "text", "text": IDENTITY, "cache_control": EPHEMERAL},
    {
        "type": "text",
        "text": "You are an interactive CLI tool that helps users with software engineering tasks. "
        + "Use the instructions below and the tools available to you to assist the user. " * 150,
        "cache_control": EPHEMERAL,
    },
]
TOOLS: list[Any] = [
    {
        "name": "Read",
        "description": "Reads a file from the local filesystem. " * 20,
        "input_schema": {
            "type": "object",
            "properties": {"file_path": {"type": "string", "description": "The absolute path to the file to read"}},
            "required": ["file_path"],
        },
    },
    {
        "name": "Edit",
        "description": "Performs exact string replacements in files. " * 20,
        "input_schema": {
            "type": "object",
            "properties": {
                "file_path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
            },
            "required": ["file_path", "old_string", "new_string"],
        },
    },
    {
        "name": "Bash",
        "description": "Executes a given bash command in a persistent shell session. " * 20,
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
]
CALC = "def total(items):\n    return sum(i.price for i in items[1:])\n" * 20
ANSWERS = ("The slice skips the first item; total() now sums every item.", "Added test_total_of_an_empty_cart.")


@dataclass(frozen=True)
class Proxied:
    running: Running
    session_id: str
    usages: list[tuple[int, int, int]]
    """Each request's (input, cache read, cache write), as the proxy logged them."""


def _user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _with_breakpoint(messages: list[Any]) -> list[Any]:
    """Claude Code's rolling breakpoint: on the last block of the last message (a copy, the history stays plain)."""
    *before, last = messages
    *blocks, final = last["content"]
    return [*before, {**last, "content": [*blocks, {**final, "cache_control": EPHEMERAL}]}]


def _claude_code(proxy_url: str, wire: WireServer) -> None:
    """Two user turns of a Claude Code session, the first with a Read round: three streamed requests."""
    client = anthropic.Anthropic(
        api_key=API_KEY,
        base_url=proxy_url,
        max_retries=0,
        default_headers={"anthropic-beta": BETAS, "user-agent": "claude-cli/2.0.0 (external, cli)", "x-app": "cli"},
    )
    reminder = _text(
        "<system-reminder>\nAs you answer the user's questions, you can use the context below.\n</system-reminder>"
    )
    history: list[Any] = [_user(reminder, _text(PROMPT))]
    read_id = "toolu_01ReadCalcPy"
    wire.script(
        Reply(text="Let me read calc.py.", tool_calls=[ToolUse("Read", {"file_path": "/ws/calc.py"}, id=read_id)]),
        Reply(text=ANSWERS[0]),
        Reply(text=ANSWERS[1]),
    )

    def send() -> Any:
        with client.messages.stream(
            model=MODEL,
            max_tokens=32000,
            system=SYSTEM,
            tools=TOOLS,
            messages=_with_breakpoint(history),
            metadata={"user_id": "user_0123_account__session_4567"},
        ) as stream:
            return stream.get_final_message()

    first = send()
    history.append({"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]})
    history.append(_user({"type": "tool_result", "tool_use_id": read_id, "content": CALC}))
    second = send()
    history.append({"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in second.content]})
    history.append(_user(_text(FOLLOW_UP)))
    send()
    client.close()


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxied]:
    """The proxy's store after a Claude Code session went through it, and the inspector over it (the proxy stopped)."""
    root = tmp_path_factory.mktemp("proxied") / "store"
    with WireServer(clock=ManualClock()) as wire:
        running = start_proxy(wire, root)
        proxy = next(running)
        try:
            _claude_code(proxy.url, wire)
        finally:
            next(running, None)  # the proxy stops: its sessions close
    store = open_store(str(root))
    try:
        [summary] = store.list()
        with store.open(summary.id, writable=False) as session:
            usages = [
                (e.usage.input, e.usage.cache_read, e.usage.cache_write)
                for e in session.entries()
                if isinstance(e, AssistantMessage) and e.usage is not None
            ]
        with running_server(store) as inspector:
            yield Proxied(inspector, summary.id, usages)
    finally:
        store.close()


def test_the_session_list_shows_the_proxied_claude_code_session(page: Watched, proxied: Proxied) -> None:  # noqa: F811 (the fixture imported above)
    p = page.page
    p.goto(proxied.running.url + "/")
    row = p.locator(f'tr[data-session="{proxied.session_id}"]')
    expect(row).to_have_count(1)
    expect(row.locator(".session-link")).to_contain_text(PROMPT)
    expect(row.locator("td.model")).to_have_text(MODEL)
    expect(row.locator("td").nth(8)).to_have_text("3")  # requests
    expect(row.locator(".status")).to_have_text("ended")
    expect(p.locator("#sessions")).not_to_contain_text("waiting for the model")
    shot(p, "proxy-sessions-list")


def test_the_session_page_shows_each_request_with_its_cache_figures(page: Watched, proxied: Proxied) -> None:  # noqa: F811 (the fixture imported above)
    assert len(proxied.usages) == 3
    assert proxied.usages[0][2] > 0 and proxied.usages[1][1] > 0  # written by the first request, read by the next
    p = page.page
    p.goto(f"{proxied.running.url}/sessions/{proxied.session_id}")
    expect(p.locator("#session-status .status")).to_have_text("ended")
    expect(p.locator("#branch-requests")).to_have_text("3")
    usage = p.locator("p.usage")
    expect(usage).to_have_count(3)
    for shown, (tokens, read, written) in zip(usage.all(), proxied.usages, strict=True):
        expect(shown).to_contain_text(f"in {tokens:,} · ")
        expect(shown).to_contain_text(f"cache read {read:,} · write {written:,}")
    for answer in ANSWERS:
        expect(p.get_by_text(answer)).to_be_visible()
    expect(p.locator("body")).not_to_contain_text("waiting for the model")
    shot(p, "proxy-session")
