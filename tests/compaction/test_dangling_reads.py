"""A Read that points at an earlier result is shown as a note once that result is gone from the view."""

from __future__ import annotations

from lamina.compaction import apply_prunes
from lamina.compaction._prune import is_pruned
from lamina.session import LogEntry, ReadStamp, ToolCall, ToolOutputPruned, ToolResult


def _read(call_id: str, content: str, **stamp: str) -> list[LogEntry]:
    read = ReadStamp(path="/w/app.py", sha256="ab" * 32, **stamp)  # type: ignore[arg-type]
    return [
        ToolCall(call_id=call_id, name="Read", input={"path": "app.py"}),
        ToolResult(call_id=call_id, name="Read", content=content, read=read),
    ]


FIRST = _read("c1", "1\tdef total(xs):")
POINTER = _read("c2", "[app.py is unchanged since the latest Read of these lines]", unchanged_from="c1")
CHANGES = _read("c3", "@@ -1 +1 @@\n-def total(xs):\n+1\tdef total(ys):", changes_from="c1")
POINTER_TO_CHANGES = _read("c4", "[app.py is unchanged since the latest Read of these lines]", unchanged_from="c3")


def _shown(entries: list[LogEntry]) -> dict[str, str]:
    return {e.call_id: e.content for e in apply_prunes(entries) if isinstance(e, ToolResult)}


def test_a_pointer_whose_result_is_in_the_view_stays() -> None:
    shown = _shown([*FIRST, *POINTER, *CHANGES, *POINTER_TO_CHANGES])
    assert shown["c2"].startswith("[app.py is unchanged") and shown["c3"].startswith("@@")
    assert shown["c4"].startswith("[app.py is unchanged")


def test_a_pointer_whose_result_was_compacted_away_becomes_a_note() -> None:
    shown = _shown([*POINTER, *CHANGES, *POINTER_TO_CHANGES])  # the first read is before the boundary
    for call_id in ("c2", "c3", "c4"):  # the changes list's base is gone, so the pointer to it is too
        assert "call it again" in shown[call_id]


def test_a_pointer_whose_result_was_pruned_becomes_a_note() -> None:
    entries = apply_prunes([*FIRST, *POINTER, ToolOutputPruned(call_ids=("c1",), tokens=500)])
    results = [e for e in entries if isinstance(e, ToolResult)]
    assert all(is_pruned(r) for r in results)
