"""What the proxy reads of an exchange: the conversation's key, the usage; never an exception."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lamina.proxy._exchange import api_of, read_request, read_response
from lamina.session import Usage


def _key(api: Any, body: Any) -> str:
    read = read_request(api, json.dumps(body).encode())
    assert not isinstance(read, str), read
    return read.key


def test_the_paths_of_the_three_apis() -> None:
    assert api_of("/v1/messages") == "anthropic"
    assert api_of("/v1/messages/count_tokens?beta=true") == "count_tokens"
    assert api_of("/v1/chat/completions") == "chat"
    assert api_of("/v1/responses") == "responses"
    assert api_of("/v1/models") is None


def test_a_conversation_keeps_its_key_as_it_grows_and_its_breakpoint_moves() -> None:
    first = {
        "role": "user",
        "content": [{"type": "text", "text": "Fix the bug.", "cache_control": {"type": "ephemeral"}}],
    }
    later = {"role": "user", "content": [{"type": "text", "text": "Fix the bug."}]}
    grown = [later, {"role": "assistant", "content": "Done."}, {"role": "user", "content": "Thanks."}]
    assert _key("anthropic", {"system": "S", "messages": [first]}) == _key(
        "anthropic", {"system": "S", "messages": grown}
    )
    assert _key("anthropic", {"system": "S", "messages": [first]}) != _key(
        "anthropic", {"system": "T", "messages": [first]}
    )


def test_count_tokens_belongs_to_its_conversation() -> None:
    body = {"system": "S", "messages": [{"role": "user", "content": "Hi."}]}
    assert _key("count_tokens", body) == _key("anthropic", body)


def test_a_session_is_titled_by_the_users_words_not_claude_codes_reminders() -> None:
    reminder = {"type": "text", "text": "<system-reminder>\nContents of CLAUDE.md ...\n</system-reminder>\n"}
    prompt = {"type": "text", "text": "Fix the bug.", "cache_control": {"type": "ephemeral"}}
    read = read_request(
        "anthropic", json.dumps({"messages": [{"role": "user", "content": [reminder, prompt]}]}).encode()
    )
    assert not isinstance(read, str) and read.first_text == "Fix the bug."
    alone = read_request("anthropic", json.dumps({"messages": [{"role": "user", "content": [reminder]}]}).encode())
    assert not isinstance(alone, str) and alone.first_text == reminder["text"]  # nothing else: the reminder it is


def test_responses_and_chat_keys_come_from_their_instructions_and_first_input() -> None:
    assert _key("responses", {"instructions": "I", "input": "Hi."}) == _key(
        "responses", {"instructions": "I", "input": [{"role": "user", "content": "Hi."}, {"type": "message"}]}
    )
    chat = [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi."}]
    assert _key("chat", {"messages": chat}) == _key(
        "chat", {"messages": [*chat, {"role": "assistant", "content": "x"}]}
    )


@given(st.binary(max_size=200))
def test_any_bytes_are_read_or_refused_with_a_reason(raw: bytes) -> None:
    for api in ("anthropic", "count_tokens", "chat", "responses"):
        found = read_request(api, raw)
        assert isinstance(found, str) or len(found.key) == 64
        assert read_response(api, raw, stream=True) is not None
        assert read_response(api, raw, stream=False) is not None


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["messages", "role", "content", "input", "type", "text", "usage"]), inner, max_size=4
        )
    ),
    max_leaves=12,
)


@given(_JSON)
def test_any_json_is_read_or_refused_with_a_reason(value: Any) -> None:
    raw = json.dumps(value).encode()
    for api in ("anthropic", "chat", "responses"):
        found = read_request(api, raw)
        assert isinstance(found, str) or len(found.key) == 64
        read_response(api, raw, stream=False)
        read_response(api, b"data: " + raw + b"\n\n", stream=True)


def test_the_usage_of_each_api_as_lamina_counts_it() -> None:
    anthropic = {
        "usage": {
            "input_tokens": 5,
            "output_tokens": 7,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 20,
        }
    }
    assert read_response("anthropic", json.dumps(anthropic).encode(), stream=False).usage == Usage(
        input=5, output=7, cache_read=100, cache_write=20
    )
    chat = {"usage": {"prompt_tokens": 120, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 100}}}
    assert read_response("chat", json.dumps(chat).encode(), stream=False).usage == Usage(
        input=20, output=9, cache_read=100
    )
    done = {
        "type": "response.completed",
        "response": {
            "usage": {
                "input_tokens": 50,
                "output_tokens": 4,
                "input_tokens_details": {"cached_tokens": 40},
                "output_tokens_details": {"reasoning_tokens": 2},
            }
        },
    }
    stream = b"event: response.completed\ndata: " + json.dumps(done).encode() + b"\n\n"
    assert read_response("responses", stream, stream=True).usage == Usage(
        input=10, output=4, cache_read=40, reasoning=2
    )
