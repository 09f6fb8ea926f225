"""The compaction ledger: files read and modified and open tasks, from the log (pure).

Described in docs/compaction.md ("The ledger").
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

from lamina.session import AssistantMessage, Ledger, LogEntry, ToolCall, ToolResult, UserMessage
from lamina.shell import FileAccess, file_uses, read_command

__all__ = [
    "MAX_FILES",
    "MAX_ITEM_CHARS",
    "MAX_OPEN_TASKS",
    "canonical_path",
    "dropped_count",
    "update_ledger",
]

MAX_FILES: Final = 200
"""Most paths kept in each of `files_read` and `files_modified`."""
MAX_OPEN_TASKS: Final = 50
"""Most open tasks kept (besides the note saying how many older ones were dropped)."""
MAX_ITEM_CHARS: Final = 500
"""Longest open task kept whole; a longer one (pasted data, not a task) is cut with a mark."""

_READ_TOOLS: Final = frozenset({"read", "read_file", "view", "grep", "glob", "ls", "list_files"})
_WRITE_TOOLS: Final = frozenset({"edit", "write", "multiedit", "edit_file", "write_file", "notebookedit"})
_SHELL_TOOLS: Final = frozenset({"bash", "shell"})
_PATH_KEYS: Final = ("path", "file_path", "filepath", "notebook_path")

_FENCE_RE: Final = re.compile(r"^\s*(?:```|~~~)")
_LIST_MARK_RE: Final = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_UNCHECKED_RE: Final = re.compile(r"^\s*[-*+]\s+\[ \]\s+(?P<item>\S.*?)\s*$")
_CHECKED_RE: Final = re.compile(r"^\s*[-*+]\s+\[[xX]\]\s+(?P<item>\S.*?)\s*$")
_TODO_RE: Final = re.compile(r"\bTODO\b")
_UNANSWERED: Final = "Unanswered user request: "
"""The open tasks older ledgers filed for user requests: dropped at the next compaction (the lane has them)."""
_NOTE_RE: Final = re.compile(r"^\[ledger: (?P<count>\d+) older (?P<what>[a-z ]+) dropped")


def update_ledger(previous: Ledger, entries: Sequence[LogEntry], *, workspace: str = "") -> Ledger:
    """The ledger of `previous` with what `entries` add, bounded (deterministic: same input, same ledger).

    Args:
        previous: The ledger of the previous compaction (`Ledger()` for the first one).
        entries: The entries being summarised, oldest first.
        workspace: The session's working directory: paths inside it are written relative to it.
    """
    failed = {e.call_id for e in entries if isinstance(e, ToolResult) and e.is_error}
    files_read = dict.fromkeys(canonical_path(p, workspace) for p in previous.files_read)
    files_modified = dict.fromkeys(canonical_path(p, workspace) for p in previous.files_modified)
    tasks_dropped, old_tasks = dropped_count(previous.open_tasks)
    tasks = dict.fromkeys(t for t in old_tasks if not t.startswith(_UNANSWERED))
    for entry in entries:
        match entry:
            case ToolCall(call_id=call_id) if call_id in failed:
                pass
            case ToolCall(name=name, input=args):
                read, modified = _call_paths(name, args)
                _touch(files_read, (canonical_path(p, workspace) for p in read))
                _touch(files_modified, (canonical_path(p, workspace) for p in modified))
            case UserMessage(text=text) | AssistantMessage(text=text):
                _track_tasks(tasks, text)
            case _:
                pass
    return Ledger(
        files_read=tuple(files_read)[-MAX_FILES:],
        files_modified=tuple(files_modified)[-MAX_FILES:],
        constraints=previous.constraints,
        open_tasks=_bounded(tuple(tasks), MAX_OPEN_TASKS, tasks_dropped, "open tasks"),
    )


def canonical_path(path: str, workspace: str = "") -> str:
    """One spelling per file: `path` normalised, relative to `workspace` when it lies inside it.

    Lexical only (no file system access, symlinks are not followed): `./a`, `a//b/../a` and
    `<workspace>/a` all become `a`; a relative path that climbs out of the workspace becomes absolute.
    """
    text = path.strip()
    if not text:
        return text
    root = posixpath.normpath(workspace) if workspace.startswith("/") else ""
    absolute = text.startswith("/")
    if not absolute and root:
        joined = posixpath.normpath(posixpath.join(root, text))
        return _relative(joined, root)
    normal = posixpath.normpath(text)
    if normal.startswith("//"):  # POSIX keeps a leading double slash; a file path does not need it
        normal = "/" + normal.lstrip("/")
    return _relative(normal, root) if absolute and root else normal


def _relative(path: str, root: str) -> str:
    if path == root:
        return "."
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path


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
        if not isinstance(command, str):
            return [], []
        uses = file_uses(read_command(command))
        return _seen(uses.reads), _seen(uses.writes)
    paths = [value for key in _PATH_KEYS if isinstance(value := args.get(key), str) and value]
    if tool in _WRITE_TOOLS:
        return [], paths
    if tool in _READ_TOOLS:
        return paths, []
    return [], []


def _seen(files: Iterable[FileAccess]) -> list[str]:
    """The files the shell reader names exactly: no glob, no `~`, no folder a `cd` hid."""
    return [file.path for file in files if file.folder_known and not file.pattern]


# --- open tasks ------------------------------------------------------------------------


def _prose_lines(text: str) -> Iterator[str]:
    """The lines of `text` outside fenced code blocks."""
    fenced = False
    for line in text.splitlines():
        if _FENCE_RE.match(line):
            fenced = not fenced
        elif not fenced:
            yield line


def _track_tasks(tasks: dict[str, None], text: str) -> None:
    for line in _prose_lines(text):
        if match := _CHECKED_RE.match(line):
            tasks.pop(_clip(match["item"]), None)
        elif match := _UNCHECKED_RE.match(line):
            tasks.setdefault(_clip(match["item"]))
        elif _TODO_RE.search(line):
            tasks.setdefault(_clip(_LIST_MARK_RE.sub("", line, count=1).strip()))
