"""What resuming shows: the sessions to pick from, a recap of the last turns, the messages to rewind to (I/O).

The `--resume` picker and `/sessions` share one list (last activity, entries, model, workspace,
first message); a resumed chat opens with a recap; `/rewind` lists the user's recent messages.
Every text that came from a session goes through `safe` and is shortened to the terminal's width.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from lamina.cli._console import err, safe
from lamina.cli._session import is_listed, session_settings, when
from lamina.cli._turn_view import call_summary
from lamina.errors import LaminaError
from lamina.session import AssistantMessage, LogEntry, SessionStore, SessionSummary, ToolCall, UserMessage

RECAP_TURNS: Final = 3
"""Turns a resumed chat's recap shows (the latest ones)."""
REWIND_CHOICES: Final = 10
"""The user's messages `/rewind` offers, newest first."""


@dataclass(frozen=True, slots=True)
class PickerRow:
    """One session as the picker and `/sessions` list it."""

    summary: SessionSummary
    model: str
    """The model the session recorded ("-": none recorded, "?": it could not be read)."""


def session_rows(store: SessionStore, workspace: Path, *, limit: int, everywhere: bool) -> list[PickerRow]:
    """The latest sessions with messages, this folder's first (`everywhere`: others too when it has none)."""
    rows = [r for r in store.list() if is_listed(r) and r.problem is None]
    here = [r for r in rows if r.cwd == str(workspace)]
    chosen = (here or rows) if everywhere else here
    return [PickerRow(row, _model_of(store, row.id)) for row in chosen[:limit]]


def _model_of(store: SessionStore, session_id: str) -> str:
    try:
        return session_settings(store, session_id).model or "-"
    except LaminaError:  # locked by a writer that is mid-open, damaged: the list still shows the row
        return "?"


def _place(cwd: str) -> str:
    home = str(Path.home())
    return "~" + cwd[len(home) :] if cwd == home or cwd.startswith(home + "/") else cwd or "-"


def print_session_rows(rows: Sequence[PickerRow], *, current: str | None = None) -> None:
    """The rows as numbered columns (the current session marked `*`), each line fitted to the terminal's width.

    What does not fit is cut at its end with `…` (a model spec, a path, a long first message), never wrapped.
    """
    width = max(60, err.width)
    model_width = min(max((len(r.model) for r in rows), default=5), max(12, width // 6))
    places = [_place(r.summary.cwd) for r in rows]
    place_width = min(max(map(len, places), default=9), max(12, width // 5))
    head = f"{'#':>4}  {'last activity':<16}  {'entries':>7}  {'model':<{model_width}}  {'workspace':<{place_width}}  "
    err.print(f"[dim]{head}first message[/dim]")
    for number, (row, place) in enumerate(zip(rows, places, strict=True), 1):
        info = row.summary
        mark = "*" if info.id == current else " "
        line = (
            f"{mark}{number:>3}  {when(info.updated_at):<16}  {info.entry_count:>7,}  "
            f"{shorten(row.model, model_width):<{model_width}}  {shorten(place, place_width):<{place_width}}  "
        )
        err.print(safe(line + shorten(info.title, max(10, width - len(line)))))


def chosen_row(rows: Sequence[PickerRow], answer: str) -> PickerRow | None:
    """The row a number (1 = the first) or a session id names, or None."""
    answer = answer.strip()
    for row in rows:
        if row.summary.id == answer:
            return row
    if answer.isdigit() and 1 <= int(answer) <= len(rows):
        return rows[int(answer) - 1]
    return None


def shorten(text: str, width: int) -> str:
    """`text` on one line (whitespace collapsed), cut with `…` to `width` characters."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: max(0, width - 1)] + "…"


def _recap_lines(view: Sequence[LogEntry], width: int) -> list[str]:
    starts = [i for i, e in enumerate(view) if isinstance(e, UserMessage)]
    lines: list[str] = []
    first = starts[-min(RECAP_TURNS, len(starts))] if starts else len(view)
    for entry in view[first:]:
        match entry:
            case UserMessage():
                words = entry.typed or "(Lamina's message: a plan's execution or feedback)"
                lines.append(f"> {safe(shorten(words, width - 2))}")
            case AssistantMessage(text=text) if text.strip():
                lines.append(f"  {safe(shorten(text, width - 2))}")
            case ToolCall(name=name, input=args):
                summary = shorten(f"{name} {call_summary(name, args)}", width - 4)
                lines.append(f"  [cyan]→[/cyan] {safe(summary)}")
    return lines


def print_recap(view: Sequence[LogEntry], *, summarised: bool) -> None:
    """The last turns of a resumed session, one line per message and per tool call, before its prompt."""
    lines = _recap_lines(view, max(20, err.width))
    if not lines:
        if summarised:
            err.print("[dim]earlier turns are summarised by a compaction (`lamina sessions show ID` has them)[/dim]")
        return
    err.print(f"[dim]── the last turns{' (older ones are summarised)' if summarised else ''} ──[/dim]")
    for line in lines:
        err.print(line)
    err.print("[dim]──[/dim]")


def rewind_choices(view: Sequence[LogEntry]) -> list[UserMessage]:
    """The user's own messages in the provider view that a rewind can go back to, newest first."""
    mine = [e for e in view if isinstance(e, UserMessage) and not e.by_lamina and e.parent_id is not None]
    return mine[::-1][:REWIND_CHOICES]


def print_rewind_choices(choices: Sequence[UserMessage]) -> None:
    """The messages `/rewind` offers, numbered from the latest (1), each on one line."""
    for number, message in enumerate(choices, 1):
        err.print(f"{number:>3}  {safe(shorten(message.text, max(20, err.width - 5)))}")
