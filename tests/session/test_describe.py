"""`describe_entry`: every entry type in words, the one wording the CLI and the inspector share (pure)."""

from __future__ import annotations

from typing import get_args

import pytest

from lamina.session import (
    AssistantMessage,
    BranchSummary,
    CompactionBoundary,
    CompactionDiscarded,
    Custom,
    Entry,
    EntryDescription,
    Label,
    LogEntry,
    OutboxRecord,
    PlanState,
    PreparedCompaction,
    StateChange,
    ToolCall,
    ToolOutputPruned,
    ToolResult,
    TurnRecord,
    UnknownEntry,
    UserMessage,
    describe_entry,
)

# one example of each entry type, with its words
EXAMPLES: list[tuple[LogEntry, EntryDescription]] = [
    (UserMessage(text="Fix it."), EntryDescription("user", "Fix it.")),
    (AssistantMessage(text="Done.", model="m-1"), EntryDescription("assistant · m-1", "Done.")),
    (
        ToolCall(call_id="c1", name="Read", input={"z": 1, "a": "x"}),
        EntryDescription("tool call Read", '{"a":"x","z":1}'),
    ),
    (
        ToolResult(call_id="c1", name="Bash", content="boom", is_error=True, full_output_path="data/c1.txt"),
        EntryDescription("tool result Bash (error)", "boom\n(full output: data/c1.txt)"),
    ),
    (
        CompactionBoundary(summary="S", first_kept_id=None, tokens_before=9, tokens_after=1, trigger="manual"),
        EntryDescription("compaction (manual)", "S"),
    ),
    (
        PreparedCompaction(
            boundary=CompactionBoundary(
                summary="S", first_kept_id=None, tokens_before=9, tokens_after=1, trigger="threshold"
            ),
            trigger="idle",
            covers="c",
        ),
        EntryDescription("compaction prepared in the background (idle), not applied", "S"),
    ),
    (
        CompactionDiscarded(prepared_id="p1", reason="a branch"),
        EntryDescription("prepared compaction p1 discarded", "a branch"),
    ),
    (
        TurnRecord(turn_id="t1", user_entry_id="u", stable_digest="d", stable_version=3, turn_ttl="1h"),
        EntryDescription("turn record t1 (stable v3, breakpoint TTL 1h)"),
    ),
    (
        ToolOutputPruned(call_ids=("c1", "c2"), tokens=1234),
        EntryDescription("prune: 2 results, ~1,234 tokens freed", "c1\nc2"),
    ),
    (
        BranchSummary(summary="the other way", from_id="e9"),
        EntryDescription("branch summary (from e9)", "the other way"),
    ),
    (StateChange(key="mode", value="plan", detail="by the user"), EntryDescription("state mode = plan", "by the user")),
    (
        OutboxRecord(part_id="p", status="delivered", kind="mode_transition", turn_id="t2"),
        EntryDescription("one-shot mode_transition delivered in t2"),
    ),
    (
        PlanState(plan_id="p1", state="rejected", plan_path="plans/p1.md", detail="too broad"),
        EntryDescription("plan p1: rejected", "plans/p1.md\ntoo broad"),
    ),
    (Label(target_id="e1", label=None), EntryDescription("label on e1", "(cleared)")),
    (Custom(name="mine", data={"k": [1]}), EntryDescription("custom mine", '{"k":[1]}')),
    (
        UnknownEntry(id="x", parent_id=None, ts=0.0, type="later", raw=b"{}"),
        EntryDescription("unknown entry type later (kept, skipped)"),
    ),
]


@pytest.mark.parametrize(("entry", "words"), EXAMPLES, ids=[type(e).__name__ for e, _ in EXAMPLES])
def test_each_entry_type_in_words(entry: LogEntry, words: EntryDescription) -> None:
    assert describe_entry(entry) == words


def test_the_examples_cover_every_entry_type() -> None:
    assert {type(entry) for entry, _ in EXAMPLES} == {*get_args(Entry), UnknownEntry}


@pytest.mark.parametrize(
    ("entry", "title"),
    [
        (AssistantMessage(text=""), "assistant"),
        (OutboxRecord(part_id="p", status="queued", text="hi"), "one-shot part queued"),
        (
            TurnRecord(turn_id="t1", user_entry_id="u", stable_digest="d", stable_version=1),
            "turn record t1 (stable v1)",
        ),
        (ToolOutputPruned(call_ids=("c1",)), "prune: 1 result"),
    ],
)
def test_what_is_missing_is_left_out_of_the_title(entry: LogEntry, title: str) -> None:
    assert describe_entry(entry).title == title


def test_data_json_cannot_encode_is_shown_as_python_would() -> None:
    assert describe_entry(Custom(name="odd", data={1.5: object})).detail.startswith("{1.5: <class 'object'>}")
