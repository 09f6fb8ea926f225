"""The deterministic summary: the summary's sections built from the log and the ledger, without a model (pure).

Described in docs/compaction.md ("Summaries").
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from lamina.compaction._ledger import MAX_OPEN_TASKS
from lamina.compaction._summary import StructuredSummary
from lamina.errors import UsageError
from lamina.session import Ledger, LogEntry, ToolCall, ToolResult, UserMessage

DEFAULT_MAX_SUMMARY_CHARS: Final = 48_000
"""Longest deterministic summary, rendered (about 14k tokens, near pi's summary budget)."""
_MIN_SUMMARY_CHARS: Final = 4_000

_GOAL_CHARS: Final = 2_000
_REQUEST_CHARS: Final = 600
_ACTION_CHARS: Final = 300
_ERROR_CHARS: Final = 600
_NOTES_CHARS: Final = 4_000
_LISTED_FILES: Final = 30
_CAPS: Final = {
    "done": 40,
    "in_progress": 5,
    "blocked": 10,
    "decisions": 20,
    "next_steps": MAX_OPEN_TASKS,
    "critical_context": 40,
}
"""Most items of each list section (the ledger already bounds constraints and next steps)."""
_SHRINK_ORDER: Final = ("done", "critical_context", "decisions", "next_steps", "blocked", "in_progress", "constraints")
"""Which section gives way first when a summary is over `max_chars`; constraints go last."""

_WRITE_NAMES: Final = {"edit": "edited", "multiedit": "edited", "edit_file": "edited", "write": "wrote"}
_SILENT_NAMES: Final = frozenset({"read", "read_file", "view", "grep", "glob", "ls", "list_files"})
_EXIT_RE: Final = re.compile(r"\[(?P<status>exit code -?\d+|killed by signal \d+)[;\]]")
_ERROR_LINE_RE: Final = re.compile(r"error|exception|traceback|fail|fatal|panic", re.IGNORECASE)
_OMITTED_RE: Final = re.compile(r"^\[summary: (?P<count>\d+) older items omitted\]$")
_CUT_MARK_CHARS: Final = 40
"""More than the mark `_clip` adds."""
_NOTES_OMITTED: Final = "[summary: notes omitted]"
_GOAL_POINTER: Final = (
    "Set by the user's own messages, shown verbatim after this summary (the earliest first; later ones refine it)."
)
_CONSTRAINTS_POINTER: Final = (
    "The user's own messages after this summary are the rules in force; where a later message changes or withdraws "
    "an earlier instruction, the later one holds."
)
_GENERATED: Final = ("focus: ", "files modified: ", "files read: ")
"""Critical-context items rebuilt at every compaction rather than carried over."""


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} […{len(text) - limit} more characters]"


def _one_line(text: str, limit: int) -> str:
    return _clip(" ".join(text.split()), limit)


def _target(args: dict[str, Any]) -> str:
    """What a tool call acts on: its command, path or pattern."""
    for key in ("command", "path", "file_path", "pattern", "query", "url"):
        value = args.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _error_lines(content: str) -> list[str]:
    found = [line.strip() for line in content.split("\n") if _ERROR_LINE_RE.search(line)]
    return [_clip(line, _ACTION_CHARS) for line in found[:3]]


def _recent(items: Sequence[str], cap: int) -> tuple[str, ...]:
    """The last `cap` distinct items (a repeated item counts where it was last), older ones counted in a note."""
    unique = tuple(reversed(dict.fromkeys(reversed(items))))
    return _omit(unique, len(unique) - cap) if len(unique) > cap else unique


def _omit(items: tuple[str, ...], count: int) -> tuple[str, ...]:
    """`items` without their `count` oldest, behind one note that counts all omitted so far."""
    omitted = 0
    if items and (match := _OMITTED_RE.match(items[0])):
        omitted, items = int(match["count"]), items[1:]
    count = min(count, len(items))
    if not count and not omitted:
        return items
    return (f"[summary: {omitted + count} older items omitted]", *items[count:])


def _file_list(label: str, paths: Sequence[str]) -> list[str]:
    if not paths:
        return []
    shown = [_clip(p, _ACTION_CHARS) for p in paths[-_LISTED_FILES:]]
    more = f" (and {len(paths) - len(shown)} more in the ledger)" if len(paths) > len(shown) else ""
    return [f"{label}{', '.join(shown)}{more}"]


def deterministic_summary(
    previous: StructuredSummary | None,
    entries: Sequence[LogEntry],
    ledger: Ledger,
    *,
    focus: str | None = None,
    max_chars: int = DEFAULT_MAX_SUMMARY_CHARS,
) -> StructuredSummary:
    """A summary of `entries` built from the log and the ledger, without a model.

    It does not repeat the user's words, which follow every summary verbatim: Goal is the
    previous one (a model's), else a pointer to the user's messages, and Constraints one item
    saying that those messages, latest last, are the rules in force. Done: the changes and
    commands that completed ("edited src/x.py", "ran `pytest` (exit code 1)"). In progress:
    nothing a rule could know (the engine adds the start of a turn it cut). Blocked: tool errors
    not cleared by a later success of the same call, verbatim up to a cut. Key decisions: the
    previous ones. Next steps: the ledger's open tasks. Critical context: the focus, the files
    modified and read, and the error lines of failed tools. Items are cut to a few hundred
    characters and each list is capped; when the rendering is still over `max_chars`, the oldest
    items go first, each list saying how many it omitted.

    Args:
        previous: The previous summary (`parse_summary` of the last boundary's text), or `None`.
        entries: The entries being summarised, oldest first.
        ledger: The ledger after these entries (`update_ledger`).
        focus: What the user asked the summary to focus on; noted first in critical context.
        max_chars: Longest rendering.

    Raises:
        UsageError: `max_chars` is below 4,000.
    """
    if max_chars < _MIN_SUMMARY_CHARS:
        raise UsageError(f"max_chars must be at least {_MIN_SUMMARY_CHARS}, not {max_chars}")
    base = previous or StructuredSummary()
    outcomes = _tool_outcomes(base, entries)
    requests = [e for e in entries if isinstance(e, UserMessage)]
    goal = _clip(base.goal, _GOAL_CHARS) if base.goal and base.goal != _GOAL_POINTER else ""
    critical = [f"focus: {_one_line(focus, _REQUEST_CHARS)}"] if focus else []
    critical += _file_list("files modified: ", ledger.files_modified)
    critical += _file_list("files read: ", ledger.files_read)
    summary = StructuredSummary(
        goal=goal or (_GOAL_POINTER if requests or base.goal else ""),
        constraints=(_CONSTRAINTS_POINTER,) if requests or base.constraints else (),
        done=_recent(outcomes.done, _CAPS["done"]),
        in_progress=(),
        blocked=_recent(tuple(outcomes.blocked.values()), _CAPS["blocked"]),
        decisions=_recent(base.decisions, _CAPS["decisions"]),
        next_steps=_recent(ledger.open_tasks, _CAPS["next_steps"]),
        critical_context=(*_recent(outcomes.errors, _CAPS["critical_context"]), *critical),
        notes=_clip(base.notes, _NOTES_CHARS),
    )
    return _fit(summary, max_chars)


@dataclass(slots=True)
class _Outcomes:
    """What the tool results of the summarised entries add to the previous summary."""

    done: list[str]
    """Changes and commands that completed, oldest first."""
    blocked: dict[tuple[str, str], str]
    """Errors by (tool, target): a later success of the same call clears one."""
    errors: list[str]
    """Error lines of failed tools (critical context)."""


def _tool_outcomes(base: StructuredSummary, entries: Sequence[LogEntry]) -> _Outcomes:
    """The previous summary's done, blocked and error items, with each tool result of `entries` added."""
    calls = {e.call_id: e for e in entries if isinstance(e, ToolCall)}
    outcomes = _Outcomes(
        done=list(base.done),
        blocked={(f"previous {i}", ""): item for i, item in enumerate(base.blocked)},
        errors=[item for item in base.critical_context if not item.startswith(_GENERATED)],
    )
    for entry in entries:
        if not isinstance(entry, ToolResult) or (call := calls.get(entry.call_id)) is None:
            continue
        _add_outcome(outcomes, call, entry)
    return outcomes


def _add_outcome(outcomes: _Outcomes, call: ToolCall, result: ToolResult) -> None:
    """Add one tool result: an error is blocked (in place of an earlier one of the same call), a success done."""
    target = _target(call.input)
    key = (call.name, target)
    shown = _one_line(target, _ACTION_CHARS)
    outcomes.blocked.pop(key, None)
    if result.is_error:
        outcomes.blocked[key] = f"{call.name} {shown}".rstrip() + f": {_clip(result.content.strip(), _ERROR_CHARS)}"
        outcomes.errors.extend(_error_lines(result.content))
        return
    tool = call.name.lower()
    if tool in ("bash", "shell"):
        statuses = _EXIT_RE.findall(result.content)
        status = statuses[-1] if statuses else "done"
        outcomes.done.append(f"ran `{shown}` ({status})")
        if status != "exit code 0":
            outcomes.errors.extend(_error_lines(result.content))
    elif tool in _WRITE_NAMES:
        outcomes.done.append(f"{_WRITE_NAMES[tool]} {shown}")
    elif tool not in _SILENT_NAMES:
        outcomes.done.append(f"called {call.name} {shown}".rstrip())


def _fit(summary: StructuredSummary, max_chars: int) -> StructuredSummary:
    """`summary` with its oldest items dropped, section by section, until it renders in `max_chars`."""
    while (excess := len(summary.render()) - max_chars) > 0:
        for name in _SHRINK_ORDER:
            items: tuple[str, ...] = getattr(summary, name)
            real = items[1:] if items and _OMITTED_RE.match(items[0]) else items
            if not real:
                continue
            freed = count = 0
            while count < len(real) and freed < excess:
                freed += len(real[count]) + 3  # "- ", the line break
                count += 1
            shorter: dict[str, Any] = {name: _omit(items, count)}
            summary = dataclasses.replace(summary, **shorter)
            break
        else:
            # Only the notes and the goal are left to cut, the notes first.
            if summary.notes and summary.notes != _NOTES_OMITTED:
                keep = len(summary.notes) - excess - _CUT_MARK_CHARS
                summary = dataclasses.replace(summary, notes=_clip(summary.notes, keep) if keep > 0 else _NOTES_OMITTED)
            elif summary.goal and (keep := len(summary.goal) - excess - _CUT_MARK_CHARS) > 0:
                summary = dataclasses.replace(summary, goal=_clip(summary.goal, keep))
            else:  # pragma: no cover - the template and its notes are far below the minimum max_chars
                break
    return summary


def turn_prefix_item(entries: Sequence[LogEntry]) -> str:
    """The "In progress" item for the start of a turn too large to keep whole (`CutPoint.split_turn_prefix`).

    One item, so that the next compaction reads the summary back with the same sections (a second
    summary appended under its own headings would grow a new goal paragraph every time).
    """
    done = deterministic_summary(None, entries, Ledger()).done
    what = "; ".join(done) if done else "nothing finished yet"
    return (
        "The turn of the first request kept after this summary began before the cut (its request is among the "
        f"user's messages); done in it so far: {_clip(what, _GOAL_CHARS)}"
    )
