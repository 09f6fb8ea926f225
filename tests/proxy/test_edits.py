"""The proxy's edits, each against the wire server (which refuses what the API refuses), and their invariants."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lamina.pricing import SessionPace
from lamina.proxy import EditSettings, proxy_report
from lamina.proxy._edits import MAX_BREAKPOINTS, count_breakpoints, edit_request
from lamina.proxy._exchange import read_request
from lamina.session import Custom
from tests.proxy.conftest import RunningProxy, start_proxy
from tests.wire.fixtures import API_KEY
from tests.wire.script import Reply, ToolUse
from tests.wire.server import ManualClock, WireServer

MARK = {"type": "ephemeral"}
SYSTEM: list[Any] = [{"type": "text", "text": "You are a coding agent.", "cache_control": MARK}]
LONG = "word " * 1500


@pytest.fixture
def editing(wire: WireServer, tmp_path: Path) -> Iterator[RunningProxy]:
    yield from start_proxy(wire, tmp_path / "store", EditSettings(breakpoints=True))


def _unmarked(n: int) -> list[Any]:
    """A conversation whose client marks only its system prompt (as many simple clients do)."""
    messages: list[Any] = []
    for i in range(n):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"Question {i}: {LONG}"}]})
        if i < n - 1:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": f"Answer {i}."}]})
    return messages


def _without_marks(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_marks(v) for v in value]
    return value


@pytest.mark.slow
def test_the_rolling_breakpoint_is_added_and_the_next_request_reads_what_it_wrote(
    editing: RunningProxy, wire: WireServer
) -> None:
    client = anthropic.Anthropic(api_key=API_KEY, base_url=editing.url, max_retries=0)
    for n in (1, 2):
        wire.script(Reply(text=f"Answer {n - 1}."))
        client.messages.create(model="claude-sonnet-5", max_tokens=100, system=SYSTEM, messages=_unmarked(n))
    client.close()
    first, second = wire.requests
    assert first.body["messages"][-1]["content"][-1]["cache_control"] == MARK
    assert (
        _without_marks(first.body)
        == _without_marks(json.loads(first.raw))
        == _without_marks({"max_tokens": 100, "messages": _unmarked(1), "model": "claude-sonnet-5", "system": SYSTEM})
    )
    assert second.usage is not None and first.usage is not None
    assert second.usage.read > first.usage.read + 1000  # the first question, written by the added mark, is read
    [summary] = editing.store.list()
    with editing.store.open(summary.id, writable=False) as session:
        report = proxy_report(summary.id, session.entries())
    edits = [e for r in report.requests for e in r.edits]
    assert [e["edit"] for e in edits] == ["breakpoint", "breakpoint"]
    assert all(e["saved"] > e["cost"] > 0 for e in edits)
    assert report.net > 0


@pytest.mark.slow
def test_a_client_with_four_breakpoints_gets_no_fifth(editing: RunningProxy, wire: WireServer) -> None:
    tools: list[Any] = [
        {"name": f"tool{i}", "description": "A tool.", "input_schema": {"type": "object"}, "cache_control": MARK}
        for i in range(3)
    ]
    wire.script(Reply(text="Fine."))
    client = anthropic.Anthropic(api_key=API_KEY, base_url=editing.url, max_retries=0)
    client.messages.create(model="claude-sonnet-5", max_tokens=100, system=SYSTEM, tools=tools, messages=_unmarked(1))
    client.close()
    [received] = wire.requests
    assert received.status == 200
    assert count_breakpoints(received.body) == MAX_BREAKPOINTS
    assert received.body["messages"] == _unmarked(1)  # nothing added


@pytest.mark.slow
def test_signed_thinking_passes_an_edited_request_and_the_server_verifies_it(
    editing: RunningProxy, wire: WireServer
) -> None:
    wire.script(
        Reply(reasoning="I should read the file.", tool_calls=[ToolUse("read", {"path": "a.txt"}, id="toolu_1")]),
        Reply(text="Done."),
    )
    client = anthropic.Anthropic(api_key=API_KEY, base_url=editing.url, max_retries=0)
    thinking: Any = {"type": "enabled", "budget_tokens": 1024}
    messages = _unmarked(1)
    first = client.messages.create(
        model="claude-sonnet-5", max_tokens=2000, system=SYSTEM, messages=messages, thinking=thinking
    )
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": LONG}]},
    ]
    second = client.messages.create(
        model="claude-sonnet-5", max_tokens=2000, system=SYSTEM, messages=messages, thinking=thinking
    )
    client.close()
    assert second.content[-1].type == "text"
    sent = wire.requests[-1].body["messages"]
    assert sent[1]["content"][0] == messages[1]["content"][0]  # the signed block, as the client sent it
    assert sent[-1]["content"][-1]["cache_control"] == MARK  # the tool result got the rolling mark


def test_a_tampered_signature_is_refused_by_the_wire_server_as_by_the_api(wire: WireServer) -> None:
    wire.script(Reply(reasoning="Hmm.", tool_calls=[ToolUse("read", {"path": "a.txt"}, id="toolu_1")]), Reply(text="x"))
    client = anthropic.Anthropic(api_key=API_KEY, base_url=wire.url, max_retries=0)
    thinking: Any = {"type": "enabled", "budget_tokens": 1024}
    first = client.messages.create(model="claude-sonnet-5", max_tokens=2000, messages=_unmarked(1), thinking=thinking)
    blocks = [b.model_dump(exclude_none=True) for b in first.content]
    blocks[0]["thinking"] += " (edited)"
    messages = [
        *_unmarked(1),
        {"role": "assistant", "content": blocks},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]},
    ]
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(model="claude-sonnet-5", max_tokens=2000, messages=messages, thinking=thinking)
    client.close()


def test_edits_off_return_the_bytes_themselves() -> None:
    raw = json.dumps({"model": "m", "messages": _unmarked(2)}).encode()
    read = read_request("anthropic", raw)
    assert not isinstance(read, str)
    assert edit_request(read, raw, EditSettings()) == (raw, ())


def test_the_same_request_is_edited_the_same_way_every_time() -> None:
    raw = json.dumps({"model": "m", "system": SYSTEM, "messages": _unmarked(3)}).encode()
    read = read_request("anthropic", raw)
    assert not isinstance(read, str)
    once = edit_request(read, raw, EditSettings(breakpoints=True), pace=SessionPace(gaps=(5.0,) * 10))
    again = edit_request(read, raw, EditSettings(breakpoints=True), pace=SessionPace(gaps=(5.0,) * 10))
    assert once == again and once[0] != raw


def test_a_slow_session_is_not_edited_when_the_write_would_not_pay() -> None:
    raw = json.dumps({"model": "m", "messages": _unmarked(1)}).encode()
    read = read_request("anthropic", raw)
    assert not isinstance(read, str)
    slow = SessionPace(gaps=(3_600.0,) * 20, turns=20, calls=20)
    assert edit_request(read, raw, EditSettings(breakpoints=True), pace=slow) == (raw, ())


_BLOCK = st.sampled_from(["text", "tool_result", "thinking", "redacted_thinking", "image"]).map(
    lambda kind: {"type": kind, "text": "x " * 900}
)
_MESSAGE = st.builds(
    lambda role, blocks, marks: {
        "role": role,
        "content": [{**b, "cache_control": MARK} if m else b for b, m in zip(blocks, marks, strict=False)],
    },
    st.sampled_from(["user", "assistant"]),
    st.lists(_BLOCK, min_size=1, max_size=3),
    st.lists(st.booleans(), min_size=3, max_size=3),
)


@given(st.lists(_MESSAGE, min_size=1, max_size=6))
def test_an_edit_never_makes_a_fifth_breakpoint_nor_touches_another_block(messages: list[Any]) -> None:
    body = {"model": "m", "messages": messages}
    raw = json.dumps(body).encode()
    read = read_request("anthropic", raw)
    assert not isinstance(read, str)
    sent, made = edit_request(read, raw, EditSettings(breakpoints=True), pace=SessionPace(gaps=(5.0,) * 10))
    edited = json.loads(sent)
    if count_breakpoints(body) >= MAX_BREAKPOINTS:
        assert sent == raw
    assert count_breakpoints(edited) <= max(MAX_BREAKPOINTS, count_breakpoints(body))
    assert _without_marks(edited) == _without_marks(body)
    changed = [
        (i, j)
        for i, message in enumerate(messages)
        for j, block in enumerate(message["content"])
        if edited["messages"][i]["content"][j] != block
    ]
    assert changed == ([] if not made else [(len(messages) - 1, len(messages[-1]["content"]) - 1)])
    for i, j in changed:
        assert messages[i]["content"][j]["type"] not in ("thinking", "redacted_thinking")


def test_the_report_counts_a_request_entry_without_usage() -> None:
    entry = Custom(id="e1", name="proxy.request", data={"api": "anthropic", "model": "m", "edits": []})
    report = proxy_report("s", [entry])
    assert [r.status for r in report.requests] == [0]


BIG_SYSTEM: list[Any] = [{"type": "text", "text": "You are a coding agent. " + "Rule. " * 3000, "cache_control": MARK}]


@pytest.mark.slow
@pytest.mark.parametrize("ttl", [True, False])
def test_a_slow_session_holds_its_system_prompt_for_an_hour_and_reads_it_after_ten_minutes(
    wire: WireServer, wire_clock: ManualClock, tmp_path: Path, ttl: bool
) -> None:
    """Ten minutes apart, the one-hour TTL keeps the system prompt cached; the client's five minutes let it go."""
    running = start_proxy(wire, tmp_path / "store", EditSettings(ttl=ttl), clock=wire_clock)
    proxy = next(running)
    client = anthropic.Anthropic(api_key=API_KEY, base_url=proxy.url, max_retries=0)
    try:
        for _ in range(6):
            wire.script(Reply(text="Answer."))
            client.messages.create(
                model="claude-sonnet-5", max_tokens=100, system=BIG_SYSTEM, messages=_unmarked(1)[:1]
            )
            wire_clock.advance(600)
    finally:
        client.close()
        next(running, None)
    usages = [r.usage for r in wire.requests]
    assert all(u is not None for u in usages)
    read_later = sum(u.read for u in usages[1:] if u is not None)
    marks = [r.body["system"][0]["cache_control"] for r in wire.requests]
    if ttl:
        assert marks[-1] == {"type": "ephemeral", "ttl": "1h"}
        assert read_later > 0
    else:
        assert marks == [MARK] * 6
        assert read_later == 0  # every request ten minutes after the last: the five-minute cache is gone


def test_the_ttl_edit_leaves_a_client_that_named_its_ttl() -> None:
    system = [{"type": "text", "text": "S " * 3000, "cache_control": {"type": "ephemeral", "ttl": "5m"}}]
    raw = json.dumps({"model": "m", "system": system, "messages": _unmarked(1)}).encode()
    read = read_request("anthropic", raw)
    assert not isinstance(read, str)
    slow = SessionPace(gaps=(600.0,) * 20, turns=20, calls=20)
    assert edit_request(read, raw, EditSettings(ttl=True), pace=slow) == (raw, ())


def test_the_ttl_edit_is_not_made_for_a_fast_session() -> None:
    raw = json.dumps({"model": "m", "system": BIG_SYSTEM, "messages": _unmarked(1)}).encode()
    read = read_request("anthropic", raw)
    assert not isinstance(read, str)
    fast = SessionPace(gaps=(5.0,) * 40, turns=40, calls=40)
    assert edit_request(read, raw, EditSettings(ttl=True), pace=fast) == (raw, ())
    slow = SessionPace(gaps=(600.0,) * 20, turns=20, calls=20)
    sent, made = edit_request(read, raw, EditSettings(ttl=True), pace=slow)
    assert [m["edit"] for m in made] == ["ttl_1h"] and made[0]["saved"] > made[0]["cost"]
    assert json.loads(sent)["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_the_wire_server_refuses_a_one_hour_breakpoint_after_a_five_minute_one(wire: WireServer) -> None:
    client = anthropic.Anthropic(api_key=API_KEY, base_url=wire.url, max_retries=0)
    messages: Any = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Hi.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        }
    ]
    with pytest.raises(anthropic.BadRequestError, match="must not come after"):
        client.messages.create(model="claude-sonnet-5", max_tokens=10, system=SYSTEM, messages=messages)
    client.close()


def _tool_loop(rounds: int) -> list[Any]:
    """A conversation of `rounds` tool calls, each answered by a long result."""
    messages: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "Read every file."}]}]
    for i in range(rounds):
        call = {"type": "tool_use", "id": f"toolu_{i:03d}", "name": "read", "input": {"path": f"f{i}.txt"}}
        messages.append({"role": "assistant", "content": [call]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i:03d}", "content": f"file {i}: " + "line " * 2000}
        messages.append({"role": "user", "content": [result]})
    messages[-1]["content"][-1] = {**messages[-1]["content"][-1], "cache_control": MARK}  # the client's rolling mark
    return messages


def _notes(body: Any) -> dict[str, str]:
    return {
        block["tool_use_id"]: block["content"]
        for message in body["messages"]
        for block in (message["content"] if isinstance(message["content"], list) else [])
        if block.get("type") == "tool_result" and "was pruned" in str(block["content"])
    }


@pytest.mark.slow
def test_old_results_are_pruned_on_a_cold_cache_and_stay_pruned_the_same_way(
    wire: WireServer, wire_clock: ManualClock, tmp_path: Path
) -> None:
    running = start_proxy(wire, tmp_path / "store", EditSettings(prune=True), clock=wire_clock)
    proxy = next(running)
    client = anthropic.Anthropic(api_key=API_KEY, base_url=proxy.url, max_retries=0)
    try:
        for rounds, wait in ((6, 600), (7, 5), (8, 5)):
            wire.script(Reply(text="Next."))
            client.messages.create(model="claude-sonnet-5", max_tokens=100, system=SYSTEM, messages=_tool_loop(rounds))
            wire_clock.advance(wait)
        [summary] = proxy.store.list()
        with proxy.store.open(summary.id, writable=False) as session:
            report = proxy_report(summary.id, session.entries())
    finally:
        client.close()
        next(running, None)
    first, second, third = wire.requests
    assert _notes(first.body) == {}  # the first request: the proxy does not know the cache's state
    pruned = _notes(second.body)
    assert pruned and set(pruned) <= {f"toolu_{i:03d}" for i in range(7 - 2)}  # never the newest results
    assert {k: v for k, v in _notes(third.body).items() if k in pruned} == pruned  # the same notes again
    assert all(r.status == 200 for r in wire.requests)  # every call kept its result: nothing orphaned
    assert third.usage is not None and third.usage.read > 0  # the pruned prefix stayed cached
    prunes = [e for r in report.requests for e in r.edits if e["edit"] == "prune"]
    assert prunes[0]["ids"] == sorted(pruned) and prunes[0]["saved"] > prunes[0]["cost"]


def test_a_result_pruned_before_is_pruned_again_without_a_new_price() -> None:
    raw = json.dumps({"model": "m", "messages": _tool_loop(8)}).encode()
    read = read_request("anthropic", raw)
    assert not isinstance(read, str)
    sent, made = edit_request(read, raw, EditSettings(prune=True), pruned=frozenset({"toolu_001"}), idle_seconds=None)
    assert list(_notes(json.loads(sent))) == ["toolu_001"]
    assert [(m["edit"], m["ids"], m["kept"]) for m in made] == [("prune", [], ["toolu_001"])]


def test_a_message_that_is_not_an_object_is_forwarded_untouched_with_prune_on() -> None:
    raw = json.dumps({"model": "m", "messages": ["not a message", *_tool_loop(8)]}).encode()
    read = read_request("anthropic", raw)
    assert not isinstance(read, str)
    assert edit_request(read, raw, EditSettings(prune=True), idle_seconds=None) == (raw, ())


def test_tools_that_are_not_a_list_leave_the_body_untouched_with_breakpoints_on() -> None:
    raw = json.dumps({"model": "m", "tools": 5, "messages": _tool_loop(2)}).encode()
    read = read_request("anthropic", raw)
    assert not isinstance(read, str)
    sent, _ = edit_request(read, raw, EditSettings(breakpoints=True), pace=SessionPace(gaps=(5.0,) * 10))
    assert json.loads(sent)["tools"] == 5
