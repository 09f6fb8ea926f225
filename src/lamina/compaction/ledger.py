"""The compaction ledger: files read and modified, user constraints and open tasks, from the log (pure).

The ledger travels with every compaction summary and is built by rules, not by a model, so what
it holds does not depend on a summariser's diligence. `update_ledger` folds newly summarised
entries into the ledger of the previous compaction:

- files read: paths of `Read`, `Grep` and `Glob` calls and the file arguments of shell commands
  that print files (`cat`, `head`, `tail`, ...); files modified: paths of `Edit` and `Write`
  calls. A call whose result is an error is not counted. Most recently used last.
- constraints: every sentence of a user message that states a rule, a preference or a
  prohibition ("never", "always", "don't", "must", "only", "prefer", "make sure", ...), kept
  verbatim, in the order first stated, across every compaction.
- open tasks: unchecked `- [ ]` items (closed by a matching `- [x]`), lines with `TODO`, and
  user requests that no assistant message followed.

Every list is bounded. Files beyond `MAX_FILES` drop the least recently used. Constraints and
open tasks beyond their cap drop the oldest, and never silently: the list then starts with a
note saying how many were dropped (`dropped_count` reads it back), kept up to date from one
compaction to the next.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

from lamina.session.entries import AssistantMessage, Ledger, LogEntry, ToolCall, ToolResult, UserMessage

__all__ = [
    "MAX_CONSTRAINTS",
    "MAX_FILES",
    "MAX_ITEM_CHARS",
    "MAX_OPEN_TASKS",
    "dropped_count",
    "find_constraints",
    "update_ledger",
]

MAX_FILES: Final = 200
"""Most paths kept in each of `files_read` and `files_modified`."""
MAX_CONSTRAINTS: Final = 100
"""Most constraints kept (besides the note saying how many older ones were dropped)."""
MAX_OPEN_TASKS: Final = 50
"""Most open tasks kept (besides the note saying how many older ones were dropped)."""
MAX_ITEM_CHARS: Final = 500
"""Longest constraint or task kept whole; a longer one (pasted data, not a rule) is cut with a mark."""

_READ_TOOLS: Final = frozenset({"read", "read_file", "view", "grep", "glob", "ls", "list_files"})
_WRITE_TOOLS: Final = frozenset({"edit", "write", "multiedit", "edit_file", "write_file", "notebookedit"})
_SHELL_TOOLS: Final = frozenset({"bash", "shell"})
_PATH_KEYS: Final = ("path", "file_path", "filepath", "notebook_path")

_PRINTERS: Final = frozenset(
    {"cat", "head", "tail", "less", "more", "nl", "wc", "bat", "tac", "diff", "cmp", "md5sum", "sha256sum"}
)
_VALUE_OPTIONS: Final = frozenset({"-n", "-c", "--lines", "--bytes"})
"""Options of `head` and `tail` whose value is the next word, not a file."""
_PREFIX_COMMANDS: Final = frozenset({"sudo", "env", "command", "time", "nice", "nohup"})
_SEPARATORS: Final = frozenset({";", "&&", "||", "|", "&", "|&", "(", ")", ";;"})
_OUTPUT_REDIRECTS: Final = frozenset({">", ">>", ">&", "&>", "&>>", ">|"})
_EXPANSIONS: Final = frozenset("*?[]{}$`~")

_FENCE_RE: Final = re.compile(r"^\s*(?:```|~~~)")
_LIST_MARK_RE: Final = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_BOUNDARY_RE: Final = re.compile(r"[.!?]+[\"'”’)\]]*\s+|[。！？]+")
_ABBREVIATIONS: Final = frozenset({"e.g.", "i.e.", "etc.", "vs.", "cf.", "mr.", "mrs.", "ms.", "dr.", "no.", "approx."})
_RULE_RE: Final = re.compile(
    r"\b(?:never|always|don['’]?t|do\s+not|must(?:n['’]?t)?|should(?:n['’]?t)?|only|avoid|prefer(?:s|red)?"
    r"|please\s+use|make\s+sure|ensure|forbidden|not\s+allowed|under\s+no\s+circumstances)\b"
    r"|不要|别再|必须|总是|一定要|永远|禁止|只能|只用|避免|请使用|务必|应该|不能|不允许|不得",
    re.IGNORECASE,
)
_UNCHECKED_RE: Final = re.compile(r"^\s*[-*+]\s+\[ \]\s+(?P<item>\S.*?)\s*$")
_CHECKED_RE: Final = re.compile(r"^\s*[-*+]\s+\[[xX]\]\s+(?P<item>\S.*?)\s*$")
_TODO_RE: Final = re.compile(r"\bTODO\b")
_UNANSWERED: Final = "Unanswered user request: "
_NOTE_RE: Final = re.compile(r"^\[ledger: (?P<count>\d+) older (?P<what>[a-z ]+) dropped")


def update_ledger(previous: Ledger, entries: Sequence[LogEntry]) -> Ledger:
    """The ledger of `previous` with what `entries` add, bounded (deterministic: same input, same ledger).

    Args:
        previous: The ledger of the previous compaction (`Ledger()` for the first one).
        entries: The entries being summarised, oldest first.
    """
    failed = {e.call_id for e in entries if isinstance(e, ToolResult) and e.is_error}
    files_read = dict.fromkeys(previous.files_read)
    files_modified = dict.fromkeys(previous.files_modified)
    constraints_dropped, old_constraints = dropped_count(previous.constraints)
    constraints = dict.fromkeys(old_constraints)
    tasks_dropped, old_tasks = dropped_count(previous.open_tasks)
    answered = any(isinstance(e, AssistantMessage) for e in entries)
    tasks = dict.fromkeys(t for t in old_tasks if not (answered and t.startswith(_UNANSWERED)))

    unanswered: list[str] = []
    for entry in entries:
        match entry:
            case ToolCall(call_id=call_id) if call_id in failed:
                pass
            case ToolCall(name=name, input=args):
                read, modified = _call_paths(name, args)
                _touch(files_read, read)
                _touch(files_modified, modified)
            case UserMessage(text=text):
                for constraint in find_constraints(text):
                    constraints.setdefault(constraint)
                _track_tasks(tasks, text)
                unanswered.append(_UNANSWERED + _clip(" ".join(text.split())))
            case AssistantMessage(text=text):
                _track_tasks(tasks, text)
                unanswered.clear()
            case _:
                pass
    tasks.update(dict.fromkeys(unanswered))
    return Ledger(
        files_read=tuple(files_read)[-MAX_FILES:],
        files_modified=tuple(files_modified)[-MAX_FILES:],
        constraints=_bounded(tuple(constraints), MAX_CONSTRAINTS, constraints_dropped, "constraints"),
        open_tasks=_bounded(tuple(tasks), MAX_OPEN_TASKS, tasks_dropped, "open tasks"),
    )


def dropped_count(items: Sequence[str]) -> tuple[int, tuple[str, ...]]:
    """How many older items a capped ledger list dropped, and its items without the note saying so."""
    if items and (match := _NOTE_RE.match(items[0])):
        return int(match["count"]), tuple(items[1:])
    return 0, tuple(items)


def _bounded(items: tuple[str, ...], cap: int, dropped: int, what: str) -> tuple[str, ...]:
    if len(items) > cap:
        dropped += len(items) - cap
        items = items[-cap:]
    if not dropped:
        return items
    return (f"[ledger: {dropped} older {what} dropped to keep this list bounded; the session log keeps them]", *items)


def _touch(paths: dict[str, None], new: Iterable[str]) -> None:
    """Mark `new` as the most recently used paths (moved to the end)."""
    for path in new:
        paths.pop(path, None)
        paths[path] = None


def _clip(text: str) -> str:
    if len(text) <= MAX_ITEM_CHARS:
        return text
    return f"{text[:MAX_ITEM_CHARS]} […{len(text) - MAX_ITEM_CHARS} more characters]"


# --- files ----------------------------------------------------------------------------------------


def _call_paths(name: str, args: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Paths a tool call read and paths it modified."""
    tool = name.lower()
    if tool in _SHELL_TOOLS:
        command = args.get("command")
        return (_shell_reads(command) if isinstance(command, str) else []), []
    paths = [value for key in _PATH_KEYS if isinstance(value := args.get(key), str) and value]
    if tool in _WRITE_TOOLS:
        return [], paths
    if tool in _READ_TOOLS:
        return paths, []
    return [], []


def _shell_reads(command: str) -> list[str]:
    """Files a shell command prints with `cat`, `head`, `tail`, ... (a plain word-level reading)."""
    found: list[str] = []
    for line in command.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            words = list(lexer)
        except ValueError:  # unbalanced quotes: not worth guessing
            continue
        found.extend(_printed_files(words))
    return found


def _printed_files(words: list[str]) -> Iterator[str]:
    program: str | None = None
    skip_next = False
    for word in words:
        if word in _SEPARATORS:
            program, skip_next = None, False
            continue
        if skip_next:
            skip_next = False
            continue
        if word in _OUTPUT_REDIRECTS:
            skip_next = True
            continue
        if program is None:
            if word in _PREFIX_COMMANDS or ("=" in word and not word.startswith("=")):
                continue
            program = word.rsplit("/", 1)[-1]
            continue
        if program not in _PRINTERS or word == "<":
            continue
        if program in {"head", "tail"} and word in _VALUE_OPTIONS:
            skip_next = True
        elif not word.startswith("-") and not word.isdigit() and not _EXPANSIONS.intersection(word):
            yield word


# --- constraints and tasks ------------------------------------------------------------------------


def _prose_lines(text: str) -> Iterator[str]:
    """The lines of `text` outside fenced code blocks."""
    fenced = False
    for line in text.splitlines():
        if _FENCE_RE.match(line):
            fenced = not fenced
        elif not fenced:
            yield line


def _sentences(line: str) -> Iterator[str]:
    start = 0
    for match in _BOUNDARY_RE.finditer(line):
        end = match.end()
        words = line[start : match.start() + 1].split()
        if words and words[-1].lower() in _ABBREVIATIONS:
            continue
        yield line[start:end].strip()
        start = end
    yield line[start:].strip()


def find_constraints(text: str) -> tuple[str, ...]:
    """The sentences of a user's `text` that state a rule, a preference or a prohibition, verbatim.

    Text is split into lines (fenced code skipped, a list marker dropped), lines into sentences;
    a sentence counts when it holds a rule word in any letter case. A sentence longer than
    `MAX_ITEM_CHARS` is cut with a mark saying how much was left out.
    """
    found: dict[str, None] = {}
    for line in _prose_lines(text):
        for sentence in _sentences(_LIST_MARK_RE.sub("", line, count=1)):
            if sentence and _RULE_RE.search(sentence):
                found[_clip(sentence)] = None
    return tuple(found)


def _track_tasks(tasks: dict[str, None], text: str) -> None:
    for line in _prose_lines(text):
        if match := _CHECKED_RE.match(line):
            tasks.pop(_clip(match["item"]), None)
        elif match := _UNCHECKED_RE.match(line):
            tasks.setdefault(_clip(match["item"]))
        elif _TODO_RE.search(line):
            tasks.setdefault(_clip(_LIST_MARK_RE.sub("", line, count=1).strip()))
