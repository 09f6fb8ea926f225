"""Mid-conversation system messages (`role: "system"`, `clear_at`) and the cache, on the wire server's documented rules.

Why Lamina does not send one-shot parts this way (docs/providers.md, "Model discovery and mid-conversation
system messages"): appended after the last breakpoint, a system message keeps the cached prefix, and so
does Lamina's one-shot tail, which already sits there; inserted earlier, it rewrites everything after it.
Whether the server's clearing (`clear_at: "next_user_message"`: the message stays in the array, unseen)
keeps the prefix is not documented, and the wire server, which caches the bytes it is sent, cannot tell a
cleared message from a shown one: the last test shows it cannot answer the question.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

from tests.wire.fixtures import API_KEY
from tests.wire.script import Reply
from tests.wire.server import ManualClock, WireServer

BETAS = ["mid-conversation-system-2026-04-07", "mid-conversation-system-clear-at-2026-08-21"]
"""The beta headers the reference names for system messages in `messages` and for `clear_at`."""
_SYSTEM = [{"type": "text", "text": "You are a careful engineer. " * 200, "cache_control": {"type": "ephemeral"}}]
_HISTORY = "Here is the file we are working on:\n" + "def handler(event):\n    return event['body']\n" * 120


@pytest.fixture
async def client(wire: WireServer) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(api_key=API_KEY, base_url=wire.url, max_retries=0) as sdk:
        yield sdk


def _user(text: str, *, breakpoint: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if breakpoint:
        block["cache_control"] = {"type": "ephemeral"}
    return {"role": "user", "content": [block]}


def _assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def _note(clear_at: str = "next_user_message") -> dict[str, Any]:
    return {"role": "system", "content": "The build is red since commit 4f2a; say so once.", "clear_at": clear_at}


async def _send(client: anthropic.AsyncAnthropic, messages: list[dict[str, Any]]) -> tuple[int, int]:
    """One request with the beta headers; `(cache read, cache write)` as billed."""
    reply = await client.beta.messages.create(
        model="claude-opus-5",
        max_tokens=1024,
        system=_SYSTEM,  # type: ignore[arg-type]  # plain dicts of the SDK's TypedDict shapes
        messages=messages,  # type: ignore[arg-type]
        betas=BETAS,
    )
    return reply.usage.cache_read_input_tokens or 0, reply.usage.cache_creation_input_tokens or 0


async def test_a_system_message_appended_after_the_last_breakpoint_keeps_the_cached_prefix(
    wire: WireServer, client: anthropic.AsyncAnthropic
) -> None:
    wire.script(Reply(text="Looked."), Reply(text="Noted."))
    first = [_user(_HISTORY, breakpoint=True)]
    _, written = await _send(client, first)
    read, _ = await _send(client, [*first, _assistant("Looked."), _note(), _user("Fix the handler.", breakpoint=True)])
    assert read == written > 0  # everything turn 1 wrote is read: the note sits after it, as Lamina's tail does
    assert wire.requests[1].headers["anthropic-beta"] == ",".join(BETAS)


async def test_a_system_message_inserted_before_a_breakpoint_rewrites_everything_after_it(
    wire: WireServer, client: anthropic.AsyncAnthropic
) -> None:
    wire.script(Reply(text="Looked."), Reply(text="Noted."))
    _, written = await _send(client, [_user(_HISTORY, breakpoint=True)])
    moved = [_note(), _user(_HISTORY), _assistant("Looked."), _user("Fix the handler.", breakpoint=True)]
    read, rewritten = await _send(client, moved)
    assert 0 < read < written  # only tools and system are read; the history after the note is written again
    assert rewritten > written - read


async def test_the_wire_server_cannot_tell_a_cleared_system_message_from_a_shown_one(
    wire: WireServer, wire_clock: ManualClock, client: anthropic.AsyncAnthropic
) -> None:
    """The open question (does clearing keep the prefix?) is outside what the documented rules can model."""
    billed: dict[str, tuple[int, int]] = {}
    for clear_at in ("next_user_message", "never"):
        wire_clock.advance(7200)  # each run starts with nothing cached
        wire.script(Reply(text="Looked."), Reply(text="Noted."), Reply(text="Fixed."))
        first = [_user(_HISTORY, breakpoint=True)]
        await _send(client, first)
        second = [*first, _assistant("Looked."), _note(clear_at), _user("Fix the handler.", breakpoint=True)]
        _, written = await _send(client, second)
        # the next user message: with next_user_message the note is no longer shown to the model
        billed[clear_at] = read, _ = await _send(
            client, [*second, _assistant("Noted."), _user("Thanks.", breakpoint=True)]
        )
        assert read > written > 0  # the byte prefix through the note is read back
    assert billed["next_user_message"] == billed["never"]  # the same bytes bill alike: no evidence either way
