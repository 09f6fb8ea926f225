"""Cut points (SPEC F14, invariant 4): never between a tool call and its result, latest request kept."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lamina.compaction import CutPoint, entry_tokens, find_cut_point, freed_enough, should_compact
from lamina.context import INTERRUPTED_RESULT, ToolResultBlock, to_messages
from lamina.errors import UsageError
from lamina.session import (
    AssistantMessage,
    CompactionBoundary,
    LogEntry,
    StateChange,
    ToolCall,
    ToolResult,
    TurnRecord,
    UnknownEntry,
    UserMessage,
    provider_view,
)
from tests.compaction.logs import is_conversation, text_of, tokens, turn_starts, views

KEEP = st.one_of(st.just(0), st.integers(1, 300), st.integers(300, 6_000))


# --- properties over generated views ----------------------------------------------------------------
# Generating views costs more than cutting them, so each test checks several properties of one cut.


def check_partition(entries: list[LogEntry], cut: CutPoint) -> None:
    """summarised + kept is the view, in order: nothing lost, nothing duplicated."""
    assert [*cut.summarised, *cut.kept] == entries
    assert all(a is b for a, b in zip([*cut.summarised, *cut.kept], entries, strict=True))
    assert cut.first_kept_id == (cut.kept[0].id if cut.kept else None)
    assert cut.tokens_before == tokens(entries)
    assert cut.tokens_kept == tokens(cut.kept)


def check_no_split_pair(entries: list[LogEntry], cut: CutPoint) -> None:
    summarised_calls = {e.call_id for e in cut.summarised if isinstance(e, ToolCall)}
    kept_calls = {e.call_id for e in cut.kept if isinstance(e, ToolCall)}
    kept_results = {e.call_id for e in cut.kept if isinstance(e, ToolResult)}
    summarised_results = {e.call_id for e in cut.summarised if isinstance(e, ToolResult)}
    assert not summarised_calls & kept_results
    assert not kept_calls & summarised_results
    first = next((e for e in cut.kept if is_conversation(e)), None)
    assert first is None or isinstance(first, UserMessage | AssistantMessage)
    # What the model is sent after the compaction: the cut invents no interruption of its own.
    assert interrupted(cut.kept) <= interrupted(entries)


def interrupted(entries: Sequence[LogEntry]) -> set[str]:
    """Calls the model is shown as interrupted, their results missing (or out of place) in `entries`."""
    return {
        block.call_id
        for message in to_messages(entries)
        for block in message.blocks
        if isinstance(block, ToolResultBlock) and block.content == INTERRUPTED_RESULT
    }


def check_latest_request_kept(entries: list[LogEntry], cut: CutPoint) -> None:
    users = [e for e in entries if isinstance(e, UserMessage)]
    if users:
        assert any(e is users[-1] for e in cut.kept)


def check_boundary_view(entries: list[LogEntry], cut: CutPoint) -> None:
    """A boundary written from the cut makes the provider view exactly the kept entries."""
    boundary = CompactionBoundary(
        id="boundary",
        summary="s",
        first_kept_id=cut.first_kept_id,
        tokens_before=cut.tokens_before,
        tokens_after=cut.tokens_kept,
        trigger="threshold",
    )
    view = provider_view([*entries, boundary])
    assert list(view.entries) == [e for e in cut.kept if not isinstance(e, UnknownEntry)]


def check_kept_size(entries: list[LogEntry], cut: CutPoint, keep: int) -> None:
    """At least keep_tokens (when the view has them), at most one turn more."""
    total = tokens(entries)
    assert cut.tokens_kept >= min(keep, total)
    if cut.kept:
        start = len(cut.summarised)
        starts = turn_starts(entries)
        turn = max(s for s in starts if s <= start)
        following = [s for s in starts if s > turn]
        turn_size = tokens(entries[turn : following[0] if following else len(entries)])
        assert cut.tokens_kept <= keep + turn_size


def check_split_turn_prefix(cut: CutPoint) -> None:
    """A cut inside a turn reports that turn's start, the tail of the summarised part."""
    first = next((e for e in cut.kept if is_conversation(e)), None)
    if not cut.summarised or first is None or isinstance(first, UserMessage):
        assert cut.split_turn_prefix == ()
        assert cut.history == cut.summarised
        return
    prefix = cut.split_turn_prefix
    assert prefix
    assert cut.summarised[len(cut.summarised) - len(prefix) :] == prefix
    assert [*cut.history, *prefix] == list(cut.summarised)
    users = [i for i, e in enumerate(prefix) if isinstance(e, UserMessage)]
    assert users in ([], [next(i for i, e in enumerate(prefix) if is_conversation(e))])
    if not users:  # a view that starts mid-turn: the whole summarised part is that turn
        assert cut.history == ()


@pytest.mark.slow
@given(views(), KEEP)
def test_provider_view_never_splits_a_tool_call_from_its_result(entries: list[LogEntry], keep: int) -> None:
    cut = find_cut_point(entries, keep_tokens=keep)
    check_no_split_pair(entries, cut)
    check_latest_request_kept(entries, cut)
    check_boundary_view(entries, cut)


@pytest.mark.slow
@given(views(), KEEP)
def test_cut_keeps_the_view_whole_and_keep_tokens_verbatim(entries: list[LogEntry], keep: int) -> None:
    cut = find_cut_point(entries, keep_tokens=keep)
    check_partition(entries, cut)
    check_kept_size(entries, cut, keep)
    check_split_turn_prefix(cut)
    assert find_cut_point(list(entries), keep_tokens=keep) == cut  # deterministic


# --- examples -----------------------------------------------------------------------------------------


def user(n: int, size: int = 40) -> UserMessage:
    return UserMessage(id=f"u{n}", text=text_of(size, "please"))


def reply(name: str, size: int = 40) -> AssistantMessage:
    return AssistantMessage(id=name, text=text_of(size, "answer"))


def batch(name: str, sizes: list[int]) -> list[LogEntry]:
    calls: list[LogEntry] = [
        ToolCall(id=f"{name}.call{i}", call_id=f"{name}.{i}", name="Read", input={"path": f"f{i}.py"})
        for i in range(len(sizes))
    ]
    results: list[LogEntry] = [
        ToolResult(id=f"{name}.result{i}", call_id=f"{name}.{i}", name="Read", content=text_of(size, "line"))
        for i, size in enumerate(sizes)
    ]
    return [*calls, *results]


def test_a_giant_turn_is_split_inside_at_a_safe_point() -> None:
    giant = [
        user(2),
        reply("a1"),
        *batch("b1", [20_000]),
        reply("a2"),
        *batch("b2", [20_000, 20_000]),
        reply("a3"),
        *batch("b3", [20_000]),
        reply("a4"),
    ]
    entries: list[LogEntry] = [user(1), reply("a0"), *giant, user(3), reply("a5")]
    cut = find_cut_point(entries, keep_tokens=5_000)
    assert cut.first_kept_id == "a3"  # before the response that follows the completed b2 batch
    assert cut.split_turn_prefix == tuple(giant[: giant.index(reply("a3"))])
    assert cut.history == (user(1), reply("a0"))
    assert cut.kept[-2:] == (user(3), reply("a5"))
    assert cut.tokens_kept >= 5_000


def test_a_parallel_batch_stays_together() -> None:
    entries: list[LogEntry] = [user(1), reply("a1"), *batch("b", [3_000, 3_000, 3_000]), reply("a2", 10), user(2, 10)]
    # The keep target falls between the results: the cut moves before the response that made the batch.
    cut = find_cut_point(entries, keep_tokens=1_000)
    assert cut.first_kept_id == "a1"
    assert {e.id for e in cut.kept} >= {"b.call0", "b.call1", "b.call2", "b.result0", "b.result1", "b.result2"}
    assert find_cut_point(entries, keep_tokens=3).first_kept_id == "a2"


def test_a_call_answered_after_a_later_response_rules_out_cuts_in_between() -> None:
    entries: list[LogEntry] = [
        user(1),
        reply("a1"),
        ToolCall(id="call", call_id="x", name="Bash", input={"command": "sleep 1"}),
        reply("a2", 4_000),
        ToolResult(id="result", call_id="x", name="Bash", content="done"),
        user(2),
    ]
    cut = find_cut_point(entries, keep_tokens=100)
    assert cut.first_kept_id == "a1"


def test_the_latest_request_is_kept_even_with_nothing_to_keep() -> None:
    entries: list[LogEntry] = [user(1), reply("a1"), user(2, 4_000), reply("a2", 4_000)]
    cut = find_cut_point(entries, keep_tokens=0)
    assert cut.first_kept_id == "u2"
    assert cut.summarised == (user(1), reply("a1"))


def test_a_huge_current_turn_is_kept_whole() -> None:
    entries: list[LogEntry] = [user(1), reply("a1"), user(2), reply("a2"), *batch("b", [50_000]), reply("a3", 50_000)]
    cut = find_cut_point(entries, keep_tokens=1_000)
    assert cut.first_kept_id == "u2"
    assert cut.split_turn_prefix == ()


def test_a_short_view_is_kept_whole_and_an_empty_one_gives_nothing() -> None:
    entries: list[LogEntry] = [user(1), reply("a1")]
    cut = find_cut_point(entries)
    assert cut.summarised == ()
    assert cut.first_kept_id == "u1"
    empty = find_cut_point([])
    assert empty == CutPoint(None, (), (), (), 0, 0)


def test_non_conversation_entries_before_the_cut_travel_with_the_entry_they_precede() -> None:
    mode = StateChange(id="mode", key="mode", value="plan")
    record = TurnRecord(id="record", turn_id="t2", user_entry_id="u2", stable_digest="d", stable_version=1)
    entries: list[LogEntry] = [user(1, 4_000), reply("a1", 4_000), mode, user(2), record, reply("a2")]
    cut = find_cut_point(entries, keep_tokens=10)
    assert cut.first_kept_id == "mode"
    assert cut.kept == (mode, user(2), record, reply("a2"))
    # A turn record stays with the user message it follows, even when its turn got no answer.
    entries = [user(1, 4_000), record, mode, user(3)]
    cut = find_cut_point(entries, keep_tokens=1)
    assert cut.summarised == (user(1, 4_000), record)


def test_entry_tokens_counts_what_is_sent() -> None:
    assert entry_tokens(UserMessage(text="x" * 35)) == 10
    assert entry_tokens(ToolCall(call_id="c", name="Read", input={"path": "a"})) > 0
    assert entry_tokens(StateChange(key="mode", value="plan")) == 0


def test_negative_keep_tokens_is_refused() -> None:
    with pytest.raises(UsageError, match="keep_tokens"):
        find_cut_point([], keep_tokens=-1)


def test_should_compact_leaves_the_reserve_free() -> None:
    assert not should_compact(100_000 - 16_384, context_window=100_000)
    assert should_compact(100_000 - 16_383, context_window=100_000)
    assert should_compact(50, context_window=100, reserve=60)
    with pytest.raises(UsageError, match="context_window"):
        should_compact(1, context_window=0)
    with pytest.raises(UsageError, match="reserve"):
        should_compact(1, context_window=10, reserve=-1)


def test_freed_enough_detects_a_stalled_compaction() -> None:
    assert freed_enough(100_000, 95_000)
    assert not freed_enough(100_000, 95_001)
    assert not freed_enough(100_000, 120_000)
    assert not freed_enough(0, 0)
    assert freed_enough(1_000, 800, minimum_ratio=0.2)
    with pytest.raises(UsageError, match="minimum_ratio"):
        freed_enough(1, 1, minimum_ratio=1.5)


def test_a_turn_that_fits_the_budget_is_kept_whole_with_its_user_message() -> None:
    """Regression: the cut fell before a turn's last response, leaving its request summarised."""
    entries: list[LogEntry] = [
        user(1, 4_000),
        reply("a1", 4_000),
        user(2, 40),
        reply("a2", 40),
        *batch("b", [200]),
        reply("a3", 40),
        user(3, 2_000),
        reply("a4", 40),
    ]
    keep = tokens(entries[entries.index(reply("a3", 40)) :])  # reached first inside turn 2
    assert tokens(entries[2:7]) <= keep  # and turn 2 fits the budget on its own
    cut = find_cut_point(entries, keep_tokens=keep)
    assert cut.first_kept_id == "u2" and cut.split_turn_prefix == ()
    # a turn larger than the budget on its own is still cut inside, at a safe point
    big: list[LogEntry] = [user(1, 4_000), reply("a1", 40), *batch("b", [4_000]), reply("a2", 400), user(2, 40)]
    cut = find_cut_point(big, keep_tokens=200)
    assert cut.first_kept_id == "a1" and cut.split_turn_prefix == (user(1, 4_000),)
