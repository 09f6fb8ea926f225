"""Invariants 1–3 through the context engine: logged equals sent, one-shots exactly once, stable prefix."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lamina.context import INTERRUPTED_RESULT, VolatileInputs, build_volatile_parts, render_tail
from lamina.engine import ContextEngine
from lamina.errors import UsageError
from lamina.placement import AnthropicTarget, OpenAIChatTarget, OpenAIResponsesTarget, SdkManagedTarget, render
from lamina.session import AssistantMessage, LocalSessionStore, StateChange, ToolCall, ToolResult, TurnRecord, Usage
from tests.support.engine import ANTHROPIC, Clock, make_engine
from tests.support.wire_types import validate_anthropic, validate_openai_chat, validate_openai_responses

REPO = Path(__file__).parents[1]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("Run the tests with `make test`.\n")
    return root


def answer(engine: ContextEngine, text: str = "Done.") -> None:
    engine.record(AssistantMessage(text=text, usage=Usage(input=10, output=5)))


def last_user_text(body: Any) -> str:
    return str(body["messages"][-1]["content"][-1]["text"])


def body_text(body: Any) -> str:
    return json.dumps(body)


def test_logged_equals_sent(tmp_path: Path, workspace: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock, on_disk=True)  # the log is read back from disk
    engine.settings.set_mode("execute")
    turn = engine.prepare_turn("Fix the bug in app.py")
    bodies = {
        "anthropic": validate_anthropic(render(turn, ANTHROPIC)),
        "chat": validate_openai_chat(render(turn, OpenAIChatTarget(model="gpt-5"))),
        "responses": validate_openai_responses(render(turn, OpenAIResponsesTarget(model="gpt-5"))),
    }
    engine.commit(turn)
    session_id = engine.session.id
    engine.session.close()
    with LocalSessionStore(tmp_path / "store").open(session_id, writable=False) as reopened:
        records = [e for e in reopened.entries() if isinstance(e, TurnRecord)]
    assert len(records) == 1 and records[0].turn_id == turn.id
    logged_tail = render_tail(records[0].volatile, records[0].one_shots)
    assert "mode_transition" in logged_tail and "Europe/Paris" in logged_tail
    assert last_user_text(bodies["anthropic"]) == logged_tail
    assert bodies["chat"]["messages"][-1]["content"][-1]["text"] == logged_tail
    assert bodies["responses"]["input"][-1]["content"][0]["text"] == logged_tail
    assert render(turn, SdkManagedTarget()).prompt.endswith(logged_tail)  # type: ignore[union-attr]


def test_volatile_parts_have_no_side_effects_and_use_the_users_time_zone() -> None:
    inputs = VolatileInputs(
        now=datetime(2026, 11, 29, 23, 30, tzinfo=UTC), time_zone="Asia/Tokyo", permission_mode="explore"
    )
    first, second = build_volatile_parts(inputs), build_volatile_parts(inputs)
    assert first == second
    assert "2026-11-30 08:30" in first[0].text and "Asia/Tokyo" in first[0].text  # not the server's zone
    with pytest.raises(UsageError, match="unknown time zone 'Mars/Olympus'"):
        build_volatile_parts(VolatileInputs(now=inputs.now, time_zone="Mars/Olympus"))


def count(text: str, needle: str) -> int:
    return text.count(needle)


def test_one_shot_survives_a_failed_send_and_a_retry_then_never_repeats(tmp_path: Path, workspace: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    engine.queue_one_shot("note", "UNIQUE-ONE-SHOT-7f3a")
    turn = engine.prepare_turn("first request")
    failed = body_text(render(turn, ANTHROPIC))  # the send fails: no commit
    assert count(failed, "UNIQUE-ONE-SHOT-7f3a") == 1
    retried = body_text(render(turn, ANTHROPIC))  # the retry carries it again, from the same turn object
    assert retried == failed
    engine.commit(turn)
    answer(engine)
    clock.advance(1)
    second = body_text(render(engine.prepare_turn("second request"), ANTHROPIC))
    assert count(second, "UNIQUE-ONE-SHOT-7f3a") == 1  # once: in the first turn's history, not the new tail
    assert engine.pending_one_shots == ()


def test_one_shot_of_an_abandoned_turn_moves_to_the_next_tail_not_twice(tmp_path: Path, workspace: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    engine.queue_one_shot("note", "UNIQUE-ONE-SHOT-b2")
    engine.prepare_turn("this request is never accepted")
    clock.advance(1)
    turn = engine.prepare_turn("try again")
    body = body_text(render(turn, ANTHROPIC))
    assert count(body, "UNIQUE-ONE-SHOT-b2") == 1
    assert "UNIQUE-ONE-SHOT-b2" in turn.tail


CRASH_SCRIPT = """
import os, signal, sys, json
sys.path[:0] = [{src!r}, {repo!r}]
from pathlib import Path
from tests.support.engine import Clock, make_engine, ANTHROPIC
from lamina.placement import render
tmp, ws, phase = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
engine = make_engine(tmp, ws, Clock(), on_disk=True)
engine.queue_one_shot("note", "CRASH-ONE-SHOT")
turn = engine.prepare_turn("request before the crash")
body = json.dumps(render(turn, ANTHROPIC))
assert "CRASH-ONE-SHOT" in body
print(engine.session.id, flush=True)  # the provider accepted the request
if phase == "after":
    engine.commit(turn)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.slow
@pytest.mark.parametrize(("phase", "expected_in_tail"), [("before", True), ("after", False)])
def test_one_shot_across_a_crash(tmp_path: Path, workspace: Path, phase: str, expected_in_tail: bool) -> None:
    script = CRASH_SCRIPT.format(src=str(REPO / "src"), repo=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path), str(workspace), phase],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    session_id = proc.stdout.strip()
    engine = make_engine(tmp_path, workspace, Clock(), session_id=session_id, on_disk=True)
    turn = engine.prepare_turn("request after the crash")
    body = body_text(render(turn, ANTHROPIC))
    assert ("CRASH-ONE-SHOT" in turn.tail) is expected_in_tail
    assert count(body, "CRASH-ONE-SHOT") == 1  # redelivered in the tail, or seen once in history
    engine.session.close()
    assert os.path.exists(tmp_path / "store" / session_id / "log.jsonl")


TOOL_CRASH_SCRIPT = """
import os, signal, sys
sys.path[:0] = [{src!r}, {repo!r}]
from pathlib import Path
from tests.support.engine import Clock, make_engine
from lamina.session._entries import AssistantMessage, ToolCall, Usage
tmp, ws = Path(sys.argv[1]), Path(sys.argv[2])
engine = make_engine(tmp, ws, Clock(), on_disk=True)
turn = engine.prepare_turn("read the readme")
engine.commit(turn)
engine.record(AssistantMessage(text="Reading it.", usage=Usage(input=10, output=5)))
engine.record(ToolCall(call_id="call_crash", name="Read", input={{"path": "README.md"}}))
print(engine.session.id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # the tool was running: its result never reaches the log
"""


@pytest.mark.slow
def test_a_crash_between_a_tool_call_and_its_result_sends_an_interrupted_result(
    tmp_path: Path, workspace: Path
) -> None:
    script = TOOL_CRASH_SCRIPT.format(src=str(REPO / "src"), repo=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path), str(workspace)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    engine = make_engine(tmp_path, workspace, Clock(), session_id=proc.stdout.strip(), on_disk=True)
    assert not any(isinstance(e, ToolResult) for e in engine.session.entries())  # the log has the call alone
    turn = engine.prepare_turn("go on")
    anthropic = validate_anthropic(render(turn, ANTHROPIC))
    chat = validate_openai_chat(render(turn, OpenAIChatTarget(model="gpt-5")))
    responses = validate_openai_responses(render(turn, OpenAIResponsesTarget(model="gpt-5")))
    engine.session.close()
    # the request pairs the call with a synthetic result, right after it (an API refuses a lone call)
    messages = anthropic["messages"]
    call_at = next(i for i, m in enumerate(messages) if any(b.get("type") == "tool_use" for b in m["content"]))
    result = next(b for b in messages[call_at + 1]["content"] if b.get("type") == "tool_result")
    assert result["tool_use_id"] == "call_crash" and result["is_error"] is True
    assert INTERRUPTED_RESULT in json.dumps(result["content"])
    tool_message = next(m for m in chat["messages"] if m["role"] == "tool")
    assert tool_message["tool_call_id"] == "call_crash" and INTERRUPTED_RESULT in json.dumps(tool_message)
    output = next(i for i in responses["input"] if i.get("type") == "function_call_output")
    assert output["call_id"] == "call_crash" and INTERRUPTED_RESULT in output["output"]


def _prefix(body: Any) -> str:
    """The stable prefix: tools, system, and the first user message (the stable project parts)."""
    first = body["messages"][0]
    return json.dumps({"tools": body.get("tools"), "system": body.get("system"), "context": first}, sort_keys=True)


@pytest.mark.slow
def test_stable_prefix_is_byte_identical_for_50_turns_and_an_edit_arrives_once_in_the_tail(
    tmp_path: Path, workspace: Path
) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    prefixes: list[str] = []
    chat_systems: list[str] = []
    previous_messages: list[Any] = []
    for n in range(50):
        if n in (10, 25, 40):
            engine.settings.set_mode(("execute", "explore", "ask")[n // 15])
        if n % 7 == 3:
            engine.settings.set_sources(["github"] if n % 2 else ["github", "linear"])
        if n == 30:
            (workspace / "AGENTS.md").write_text("Run the tests with `make test`. Never push to main.\n")
        clock.advance(3)
        turn = engine.prepare_turn(f"request {n}")
        body = render(turn, ANTHROPIC)
        validate_anthropic(body)
        prefixes.append(_prefix(body))
        chat = render(turn, OpenAIChatTarget(model="gpt-5"))
        chat_systems.append(json.dumps(chat["messages"][:2]))  # type: ignore[index]  # system, project parts
        messages = chat["messages"]  # type: ignore[index]
        # every earlier message is repeated byte for byte, the edit included: it travels in a tail
        assert messages[: len(previous_messages)] == previous_messages
        previous_messages = list(messages)
        last_body = body
        engine.record(ToolCall(call_id=f"c{n}", name="Read", input={"path": "app.py"}))
        engine.record(ToolResult(call_id=f"c{n}", name="Read", content="print('hi')"))
        answer(engine, f"answer {n}")
        engine.commit(turn)
    assert len(set(prefixes)) == 1
    assert len(set(chat_systems)) == 1
    assert body_text(last_body).count("Never push to main") == 1  # delivered once, in turn 30's tail
    changes = [e for e in engine.session.entries() if isinstance(e, StateChange) and e.key == "stable"]
    assert [c.value.split(":")[0] for c in changes] == ["1", "2"]
    assert "changed context.agents" in changes[1].detail
    assert changes[1].prefix_version == 1


def test_stable_version_survives_a_reopen_without_a_new_record(tmp_path: Path, workspace: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    first = engine.prepare_turn("hello")
    engine.commit(first)
    engine.session.close()
    again = make_engine(tmp_path, workspace, clock, session_id=engine.session.id)
    second = again.prepare_turn("hello again")
    assert second.stable == first.stable
    assert second.stable_seen
    stable_changes = [e for e in again.session.entries() if isinstance(e, StateChange) and e.key == "stable"]
    assert len(stable_changes) == 1


def test_tail_repeats_only_what_changed(tmp_path: Path, workspace: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    first = engine.prepare_turn("one")
    assert [p.key for p in first.volatile] == ["date_time", "session_state", "sources"]
    engine.commit(first)
    clock.advance(5)
    second = engine.prepare_turn("two")
    assert [p.key for p in second.volatile] == ["date_time"]
    engine.settings.set_mode("execute")
    clock.advance(5)
    third = engine.prepare_turn("three")
    assert [p.key for p in third.volatile] == ["date_time", "session_state"]
    assert [o.kind for o in third.one_shots] == ["mode_transition"]


def test_anthropic_breakpoints_move_with_every_call_of_a_tool_loop(tmp_path: Path, workspace: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    for n in range(3):
        turn = engine.prepare_turn(f"turn {n}")
        for call in range(4):
            body = validate_anthropic(render(turn, ANTHROPIC, continuation=engine.continuation(turn)))
            ttls = {
                (i, j): b["cache_control"]["ttl"]
                for i, m in enumerate(body["messages"])
                for j, b in enumerate(m["content"])
                if isinstance(b, dict) and "cache_control" in b
            }
            marks = list(ttls)
            system_marks = [b for b in body["system"] if "cache_control" in b]
            assert len(marks) + len(system_marks) <= 4
            last = len(body["messages"]) - 1
            newest = (last, len(body["messages"][last]["content"]) - 1)
            assert newest in marks  # rolling: on the newest block
            assert (0, len(body["messages"][0]["content"]) - 1) in marks  # the stable project parts
            messages = body["messages"]
            user = max(i for i, m in enumerate(messages) if any(b.get("text") == f"turn {n}" for b in m["content"]))
            turn_mark = (user, len(body["messages"][user]["content"]) - 1)
            # the turn's tail: 1 hour, what the user's next turn reads after however long they took
            assert ttls[turn_mark] == "1h"
            if call:
                assert len(marks) == 3 and ttls[newest] == "5m"  # the tool loop's next call comes in seconds
            engine.record(AssistantMessage(text=f"step {call}"))
            engine.record(ToolCall(call_id=f"t{n}{call}", name="Read", input={"path": "x"}))
            engine.record(ToolResult(call_id=f"t{n}{call}", name="Read", content="x"))
        answer(engine)
        engine.commit(turn)


def test_rolling_ttl_may_not_outlive_the_stable_ttl(tmp_path: Path, workspace: Path) -> None:
    with pytest.raises(UsageError, match="1-hour entries must come first"):
        AnthropicTarget(model="m", anthropic_cache_ttl="1h", stable_ttl="5m")
    engine = make_engine(tmp_path, workspace, Clock())
    body = render(engine.prepare_turn("hi"), AnthropicTarget(model="m", anthropic_cache_ttl="1h", stable_ttl="1h"))
    marks = [b["cache_control"] for m in body["messages"] for b in m["content"] if "cache_control" in b]  # type: ignore[index]
    assert marks == [{"type": "ephemeral", "ttl": "1h"}] * 2  # the stable project parts, the newest block
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}  # type: ignore[index]


def test_sdk_managed_sends_stable_parts_only_when_new(tmp_path: Path, workspace: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    first = render(engine.prepare_turn("one"), SdkManagedTarget())
    assert "You are a careful coding agent." in first.prompt  # type: ignore[union-attr]
    clock.advance(1)
    second = render(engine.prepare_turn("two"), SdkManagedTarget())
    assert "You are a careful coding agent." not in second.prompt  # type: ignore[union-attr]
    assert "date_time" in second.prompt  # type: ignore[union-attr]
    (workspace / "AGENTS.md").write_text("New rules.\n")
    third = render(engine.prepare_turn("three"), SdkManagedTarget())
    assert "New rules." in third.prompt  # type: ignore[union-attr]


def _without_cache_marks(value: Any) -> Any:
    """`value` with every `cache_control` left out (the newest block carries the mark, so it moves)."""
    if isinstance(value, dict):
        return {k: _without_cache_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_marks(v) for v in value]
    return value


def test_time_advancing_changes_only_the_tail(tmp_path: Path, workspace: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    first_turn = engine.prepare_turn("one")
    first = _without_cache_marks(render(first_turn, ANTHROPIC))
    engine.commit(first_turn)
    answer(engine)
    clock.advance(timedelta(hours=5).total_seconds() / 60)
    second = _without_cache_marks(render(engine.prepare_turn("two"), ANTHROPIC))
    # the prefix (system, tools, the first turn as it was sent) is byte for byte the same
    assert second["system"] == first["system"] and second["tools"] == first["tools"]
    sent = len(first["messages"])
    assert second["messages"][:sent] == first["messages"]
    assert [m["role"] for m in second["messages"][sent:]] == ["assistant", "user"]
    # only the new tail says the new time; the first turn keeps the time it was sent with
    assert "10:00" in last_user_text(first) and "10:00" not in last_user_text(second)
    assert "15:00" in last_user_text(second) and "15:00" not in json.dumps(second["messages"][:-1])
    assert json.dumps(second["system"]).count("15:00") == 0


def test_one_shot_redelivered_by_a_later_turn_appears_once_in_all_later_history(
    tmp_path: Path, workspace: Path
) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    engine.queue_one_shot("note", "UNIQUE-ONE-SHOT-c3")
    engine.prepare_turn("never accepted")
    clock.advance(1)
    second = engine.prepare_turn("accepted")
    engine.commit(second)
    answer(engine)
    clock.advance(1)
    third = engine.prepare_turn("later")
    assert count(body_text(render(third, ANTHROPIC)), "UNIQUE-ONE-SHOT-c3") == 1


@pytest.mark.parametrize("target", [ANTHROPIC, OpenAIChatTarget(model="gpt-5"), OpenAIResponsesTarget(model="gpt-5")])
def test_render_cache_gives_the_same_bodies(tmp_path: Path, workspace: Path, target: Any) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    for n in range(8):
        if n == 3:
            engine.queue_one_shot("note", "abandoned turn coming")
            engine.prepare_turn("this one is never answered")
        if n == 5:
            engine.settings.set_mode("execute")
        turn = engine.prepare_turn(f"request {n}")
        for call in range(n % 3):
            assert engine.request(turn, target) == render(turn, target, continuation=engine.continuation(turn))
            engine.record(ToolCall(call_id=f"k{n}{call}", name="Read", input={"path": "a", "b": 2}))
            if call != 1 or n % 2:
                engine.record(ToolResult(call_id=f"k{n}{call}", name="Read", content="x"))
        assert engine.request(turn, target) == render(turn, target, continuation=engine.continuation(turn))
        engine.commit(turn)
        answer(engine)
