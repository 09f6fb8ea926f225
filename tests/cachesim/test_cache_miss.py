"""Why a request misses the cache, predicted: the first change by the documented order, or an expired cache."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lamina.cachesim import CacheMissPredictor, TimedRequest, cache_held, find_divergence, settle_miss
from lamina.session import CacheMiss

RULES = "\n".join(f"Rule {i}: keep functions small and name them after what they do." for i in range(150))
TOOLS = [{"name": "Read", "description": "Read a file.", "input_schema": {"type": "object"}}]


def _body(
    *texts: str, model: str = "claude-sonnet-5", tools: Any = TOOLS, system: str = RULES, **more: Any
) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": [{"type": "text", "text": t}]}
        for i, t in enumerate(texts)
    ]
    messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    body = {"model": model, "tools": tools, "messages": messages, **more}
    body["system"] = [{"type": "text", "text": system, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    return body


def _run(*bodies: dict[str, Any], gaps: tuple[float, ...] = ()) -> list[CacheMiss | None]:
    predictor, t, found = CacheMissPredictor("anthropic"), 0.0, []
    for i, body in enumerate(bodies):
        t += gaps[i - 1] if 0 < i <= len(gaps) else 1.0
        found.append(predictor.submit(TimedRequest(t, body))[1])
    return found


def test_appending_to_the_conversation_is_no_miss() -> None:
    assert _run(_body("hi"), _body("hi", "hello", "next")) == [None, CacheMiss(reason="none")]


def test_a_moved_cache_marker_is_no_change() -> None:
    moved = _body("hi", "hello", "next")
    moved["messages"][0]["content"][0]["cache_control"] = {"type": "ephemeral"}
    assert find_divergence(_body("hi", "hello", "next"), moved, fmt="anthropic") is None


def test_each_change_is_named_in_the_prefix_order() -> None:
    first = _body("hi", "hello")
    tools = _run(first, _body("hi", "hello", "x", tools=[*TOOLS, {"name": "Grep", "input_schema": {}}]))[1]
    system = _run(first, _body("hi", "hello", "x", system=RULES + "\nOne more rule."))[1]
    model = _run(first, _body("hi", "hello", "x", model="claude-opus-5"))[1]
    thinking = _run(first, _body("hi", "hello", "x", thinking={"type": "adaptive"}))[1]
    assert tools is not None and tools.reason == "tools_changed" and tools.missed_tokens > 1_000
    assert system is not None and system.reason == "system_changed" and 0 < system.missed_tokens < tools.missed_tokens
    assert model is not None and model.reason == "model_changed"
    assert thinking == CacheMiss(reason="unavailable")


def test_a_rewritten_message_names_its_position() -> None:
    edited = _run(_body("hi", "hello", "more"), _body("hi", "HELLO", "more", "next"))[1]
    assert edited is not None and edited.reason == "messages_changed" and edited.entry == 2


def test_an_idle_gap_past_the_ttl_is_an_expired_cache() -> None:
    expired = _run(_body("hi"), _body("hi", "hello", "next"), gaps=(3_700.0,))[1]
    assert expired is not None and expired.reason == "ttl_expired" and expired.missed_tokens > 1_000


def test_openai_instructions_are_the_start_of_its_input() -> None:
    old = {"model": "gpt-5", "instructions": "Be brief.", "input": [{"role": "user", "content": "hi"}]}
    new = {**old, "instructions": "Be thorough."}
    changed = find_divergence(old, new, fmt="openai")
    assert changed is not None and changed.reason == "messages_changed"
    key = find_divergence(old, {**old, "prompt_cache_key": "other"}, fmt="openai")
    assert key is not None and key.reason == "prompt_cache_key_changed"


def test_what_a_request_left_cached() -> None:
    assert cache_held("anthropic", read=2_000, write=500, total=2_600) == 2_500
    assert cache_held("openai", read=0, write=0, total=1_000) == 0
    assert cache_held("openai", read=0, write=0, total=1_300) == 1_280


@given(held=st.integers(0, 10_000), read=st.integers(0, 10_000))
def test_only_a_diagnosis_of_no_change_can_become_an_expiry(held: int, read: int) -> None:
    none = settle_miss(CacheMiss(reason="none"), held=held, read=read)
    expired = CacheMiss(reason="ttl_expired", missed_tokens=held - read)
    assert none == (expired if read < held else CacheMiss(reason="none"))
    tools = CacheMiss(reason="tools_changed", missed_tokens=5)
    assert settle_miss(tools, held=held, read=read) is tools


@given(st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=8), st.integers(0, 7))
def test_a_prefix_of_the_messages_is_never_a_divergence(texts: list[str], cut: int) -> None:
    cut = min(cut, len(texts) - 1)
    old, new = _body(*texts[: cut + 1]), _body(*texts)
    assert find_divergence(old, new, fmt="anthropic") is None
