"""Generated provider views for compaction tests: realistic turns with parallel tool batches."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from hypothesis import strategies as st

from lamina.compaction import entry_tokens
from lamina.session import (
    AssistantMessage,
    Custom,
    Label,
    LogEntry,
    OutboxRecord,
    PartRecord,
    StateChange,
    ToolCall,
    ToolResult,
    TurnRecord,
    UnknownEntry,
    UserMessage,
)

SIZES = st.integers(0, 2_000).map(lambda n: n * n // 1_000)
"""Text sizes in characters, 0 to 4,000: mostly small, sometimes large."""


_SPRINKLES = ("state", "outbox", "label", "custom", "unknown", *([""] * 15))


def text_of(size: int, word: str = "word") -> str:
    return " ".join(itertools.repeat(word, size // (len(word) + 1)))[:size]


@st.composite
def views(draw: st.DrawFn) -> list[LogEntry]:
    """A provider view: optionally starting mid-turn (kept by an earlier compaction), then turns of a
    user message, its turn record and model responses with batches of 1-4 parallel calls, results in
    any order, non-conversation entries sprinkled anywhere, now and then a result that arrives late
    (after the next response or user message), and maybe calls left unanswered at the end.
    """
    numbers = itertools.count(1)
    out: list[LogEntry] = []
    late: list[ToolResult] = []

    def deliver_late() -> None:
        out.extend(late)
        late.clear()

    def next_id() -> str:
        return f"e{next(numbers):05d}"

    def sprinkle() -> None:
        # One draw says whether and what: most places get nothing.
        kind = draw(st.sampled_from(_SPRINKLES))
        entry_id = next_id()
        if kind == "state":
            out.append(StateChange(id=entry_id, key="mode", value="plan"))
        elif kind == "outbox":
            out.append(OutboxRecord(id=entry_id, part_id=f"p{entry_id}", status="queued", text="one shot"))
        elif kind == "label":
            out.append(Label(id=entry_id, target_id=out[-1].id if out else "nowhere", label="mark"))
        elif kind == "custom":
            out.append(Custom(id=entry_id, name="app", data={"n": 1}))
        elif kind == "unknown":
            out.append(UnknownEntry(id=entry_id, parent_id=None, ts=0.0, type="future", raw=b"{}"))

    def response(last: bool) -> None:
        sprinkle()
        out.append(AssistantMessage(id=next_id(), text=text_of(draw(SIZES), "thinking")))
        deliver_late()
        batch = draw(st.integers(0, 4))
        calls = [f"c{next_id()}" for _ in range(batch)]
        for call_id in calls:
            out.append(ToolCall(id=next_id(), call_id=call_id, name="Bash", input={"command": text_of(draw(SIZES))}))
            sprinkle()
        order = draw(st.permutations(calls))
        if last and order and draw(st.integers(0, 4)) == 0:
            order = order[: draw(st.integers(0, len(order) - 1))]  # interrupted: results missing
        for call_id in order:
            sprinkle()
            result = ToolResult(id=next_id(), call_id=call_id, name="Bash", content=text_of(draw(SIZES), "output"))
            (late if draw(st.integers(0, 9)) == 0 else out).append(result)

    if draw(st.booleans()):  # the view starts mid-turn, after an earlier compaction's cut
        for _ in range(draw(st.integers(1, 2))):
            response(last=False)
    turns = draw(st.integers(0, 6))
    for turn in range(turns):
        sprinkle()
        user = UserMessage(id=next_id(), text=text_of(draw(SIZES), "please"))
        out.append(user)
        if draw(st.booleans()):
            deliver_late()
        if draw(st.booleans()):
            volatile = (PartRecord(key="date_time", text=text_of(draw(st.integers(0, 60)), "today")),)
            record = TurnRecord(
                id=next_id(),
                turn_id=f"t{turn}",
                user_entry_id=user.id,
                stable_digest="d",
                stable_version=1,
                volatile=volatile,
            )
            out.append(record)
        steps = draw(st.integers(0, 5))
        for step in range(steps):
            response(last=turn == turns - 1 and step == steps - 1)
    if draw(st.booleans()):
        deliver_late()
    sprinkle()
    return out


def tokens(entries: Sequence[LogEntry]) -> int:
    return sum(entry_tokens(e) for e in entries)


def is_conversation(entry: LogEntry) -> bool:
    return isinstance(entry, UserMessage | AssistantMessage | ToolCall | ToolResult)


def turn_starts(entries: Sequence[LogEntry]) -> list[int]:
    """Where each turn starts, as far as a cut can tell: at 0 and at each user message that no tool call
    and its result straddle, with the non-conversation entries just before it (a turn record excepted:
    it belongs to the turn before)."""
    calls = {e.call_id: i for i, e in enumerate(entries) if isinstance(e, ToolCall)}
    pairs = [(calls[e.call_id], i) for i, e in enumerate(entries) if isinstance(e, ToolResult) and e.call_id in calls]
    starts = [0]
    for index, entry in enumerate(entries):
        if isinstance(entry, UserMessage) and not any(call < index <= result for call, result in pairs):
            start = index
            while (
                start > 0 and not isinstance(entries[start - 1], TurnRecord) and not is_conversation(entries[start - 1])
            ):
                start -= 1
            if start > starts[-1]:
                starts.append(start)
    return starts
