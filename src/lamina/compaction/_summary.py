"""The compaction summary's template: `StructuredSummary`, its Markdown rendering and its parser (pure).

Described in docs/compaction.md ("Summaries").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

_LIST_FIELDS: Final = (
    "constraints",
    "done",
    "in_progress",
    "blocked",
    "decisions",
    "next_steps",
    "critical_context",
)
_NONE: Final = "(none)"
_NONE_WORDS: Final = frozenset({"", "none", "n/a", "na", "nothing", "none yet", "nothing yet"})


@dataclass(frozen=True, slots=True)
class StructuredSummary:
    """A compaction summary in Lamina's template; each list holds items oldest first."""

    goal: str = ""
    """What the user wants to achieve overall."""
    constraints: tuple[str, ...] = ()
    """The rules and preferences in force, as the summariser reads the user's messages (latest state)."""
    done: tuple[str, ...] = ()
    in_progress: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()
    """Problems in the way, with their exact error messages."""
    decisions: tuple[str, ...] = ()
    next_steps: tuple[str, ...] = ()
    critical_context: tuple[str, ...] = ()
    """Exact paths, names, commands and error messages needed to continue."""
    notes: str = ""
    """Free text: anything a summariser wrote outside the template."""

    def render(self) -> str:
        """The summary as Markdown in the template; `parse_summary` reads it back unchanged."""
        lines = ["## Goal", *_paragraph(self.goal), ""]
        lines += ["## Constraints and preferences", *_items(self.constraints), ""]
        lines += ["## Progress", "", "### Done", *_items(self.done), ""]
        lines += ["### In progress", *_items(self.in_progress), ""]
        lines += ["### Blocked", *_items(self.blocked), ""]
        lines += ["## Key decisions", *_items(self.decisions), ""]
        lines += ["## Next steps", *_items(self.next_steps), ""]
        lines += ["## Critical context", *_items(self.critical_context)]
        if self.notes:
            lines += ["", "## Notes", *_paragraph(self.notes)]
        return "\n".join(lines)


# --- rendering and parsing ------------------------------------------------------------------------


def _is_none_word(text: str) -> bool:
    """Whether `text` says "nothing" (`(none)`, `N/A.`); any letter of any script or any digit makes it content."""
    return " ".join(re.sub(r"[^\w/ ]|_", " ", text.lower()).split()) in _NONE_WORDS


def _paragraph(text: str) -> list[str]:
    r"""Lines of free text; a line that could read as a heading or an escape gets a `\` first."""
    if not text:
        return [_NONE]
    lines = text.split("\n")
    escaped = [f"\\{line}" if line[:1] in ("#", "*", "\\") else line for line in lines]
    if _is_none_word(text) and not escaped[0].startswith("\\"):
        escaped[0] = f"\\{escaped[0]}"
    return escaped


def _items(items: Sequence[str]) -> list[str]:
    r"""`- first line`, then `  further line`; a first line that could read as empty gets a `\` first."""
    if not items:
        return [f"- {_NONE}"]
    lines: list[str] = []
    for item in items:
        first, *rest = item.split("\n")
        if first.startswith("\\") or (_is_none_word(first) and not rest):
            first = f"\\{first}"
        lines.append(f"- {first}")
        lines.extend(f"  {line}" for line in rest)
    return lines


_HEADING_RE: Final = re.compile(r"^(?:#{1,6}[ \t]*(?P<hash>.+?)[ \t#]*|\*\*(?P<bold>[^*]+?)\*\*[ \t]*:?[ \t]*)$")
_BULLET_RE: Final = re.compile(r"^ {0,3}(?:[-*+•]|\d{1,3}[.)])[ \t]+(?P<text>.*)$")
_SECTIONS: Final = {
    "goal": "goal",
    "goals": "goal",
    "objective": "goal",
    "constraints and preferences": "constraints",
    "constraints": "constraints",
    "preferences": "constraints",
    "user constraints": "constraints",
    "progress": "in_progress",
    "done": "done",
    "completed": "done",
    "in progress": "in_progress",
    "blocked": "blocked",
    "blockers": "blocked",
    "key decisions": "decisions",
    "decisions": "decisions",
    "next steps": "next_steps",
    "next": "next_steps",
    "critical context": "critical_context",
    "context": "critical_context",
    "notes": "notes",
    "additional notes": "notes",
    # the template's headings as a model may translate them
    "目标": "goal",
    "约束和偏好": "constraints",
    "约束与偏好": "constraints",
    "约束": "constraints",
    "进展": "in_progress",
    "已完成": "done",
    "进行中": "in_progress",
    "受阻": "blocked",
    "关键决策": "decisions",
    "下一步": "next_steps",
    "关键上下文": "critical_context",
    "备注": "notes",
    "цель": "goal",
    "ограничения и предпочтения": "constraints",
    "ограничения": "constraints",
    "прогресс": "in_progress",
    "сделано": "done",
    "в процессе": "in_progress",
    "заблокировано": "blocked",
    "ключевые решения": "decisions",
    "следующие шаги": "next_steps",
    "критический контекст": "critical_context",
    "заметки": "notes",
}


def _section_name(line: str) -> str | None:
    match = _HEADING_RE.match(line)
    if match is None:
        return None
    title = (match["hash"] or match["bold"] or "").replace("&", " and ")
    title = re.sub(r"^\d+[.)]\s*", "", title.lower())
    title = " ".join(re.sub(r"[*_`:：]", " ", title).split())
    return _SECTIONS.get(title)


def parse_summary(text: str) -> StructuredSummary:
    """A summary read back from `StructuredSummary.render` output or from a model's answer.

    Headings may be `#` to `######` or bold lines, in any case, numbered or not; bullets may be
    `-`, `*`, `+` or numbers, and an indented line continues the item above it. Text under an
    unknown heading, and before the first one, goes to `notes` with its heading. An answer with
    none of the template's headings is kept whole in `notes`.
    """
    lines = text.split("\n")
    if not any(_section_name(line) for line in lines):
        return StructuredSummary(notes=text.strip("\n"))
    read = _Sections()
    for line in lines:
        read.add(line)
    values: dict[str, Any] = {name: _kept_items(items) for name, items in read.lists.items()}
    for name, para in read.paragraphs.items():
        values[name] = _paragraph_value(para, escaped_first=read.escaped_first.get(name, False))
    return StructuredSummary(**values)


@dataclass(slots=True)
class _Sections:
    """The lines of a summary being read, gathered by section (raw: escapes and "none" words still in)."""

    paragraphs: dict[str, list[str]] = field(default_factory=lambda: {"goal": [], "notes": []})
    lists: dict[str, list[list[str]]] = field(default_factory=lambda: {name: [] for name in _LIST_FIELDS})
    escaped_first: dict[str, bool] = field(default_factory=dict)
    """Per paragraph section: whether its first text line was escaped (so a "none" word in it is content)."""
    section: str = "notes"

    def add(self, line: str) -> None:
        """Take the next line: a heading switches section, other lines go to the current one."""
        name = _section_name(line)
        if name is not None:
            self.section = name
            return
        if _HEADING_RE.match(line):  # a heading not in the template: its text goes to the notes
            self.section = "notes"
        if self.section in self.paragraphs:
            self._add_paragraph_line(line)
        else:
            _add_item_line(self.lists[self.section], line)

    def _add_paragraph_line(self, line: str) -> None:
        section = self.section
        if line.startswith("\\"):
            self.escaped_first.setdefault(section, not any(self.paragraphs[section]))
            line = line[1:]
        self.paragraphs[section].append(line)


def _add_item_line(items: list[list[str]], line: str) -> None:
    """Add a line of a list section: an indented line continues the item above, blank lines are skipped."""
    if line.startswith("  ") and items:
        items[-1].append(line[2:])
    elif not line.strip():
        return
    elif line.startswith("- "):
        items.append([line[2:]])
    elif bullet := _BULLET_RE.match(line):
        items.append([bullet["text"]])
    else:
        items.append([line.strip()])


def _kept_items(items: list[list[str]]) -> tuple[str, ...]:
    """The items of a list section, their escapes undone, "none" items dropped."""
    kept: list[str] = []
    for item in items:
        first = item[0]
        if first.startswith("\\"):
            item = [first[1:], *item[1:]]
        elif len(item) == 1 and _is_none_word(first):
            continue
        kept.append("\n".join(item))
    return tuple(kept)


def _paragraph_value(para: list[str], *, escaped_first: bool) -> str:
    """The text of a paragraph section; "" when it only says "none" (unless escaped)."""
    value = "\n".join(para).strip("\n")
    if not escaped_first and _is_none_word(value):
        value = ""
    return value
