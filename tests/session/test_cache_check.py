"""The cache check on an assistant message: recorded beside the answer, absent from older logs."""

from __future__ import annotations

from lamina.session import AssistantMessage, CacheCheck, CacheMiss, decode_entry, encode_entry


def test_a_cache_check_round_trips_through_the_log() -> None:
    check = CacheCheck(
        provider=CacheMiss(reason="tools_changed", missed_tokens=4_210),
        predicted=CacheMiss(reason="messages_changed", missed_tokens=3_900, entry=7),
    )
    entry = AssistantMessage(id="a1", text="done", cache_check=check)
    assert decode_entry(encode_entry(entry)) == entry


def test_an_older_log_line_reads_without_a_check() -> None:
    line = b'{"type":"assistant","id":"a1","parent_id":null,"ts":1.0,"text":"done"}'
    entry = decode_entry(line)
    assert isinstance(entry, AssistantMessage) and entry.cache_check is None
