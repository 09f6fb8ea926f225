"""Tool calls as the inspector shows them: a call with its input, and Edit and Write as diffs (pure).

The input keeps the order the model gave it; a text value is shown as text (not JSON-quoted), other
values as JSON. Both the timeline and the request page's conversation use `call_out`.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import Any, Final

from lamina.serve._model import CallOut, DiffLine, PartText

__all__ = ["DIFF_LINES", "call_out", "calls_of_block"]

DIFF_LINES: Final = 400
"""Diff lines a call carries (the whole input is in the log)."""
ARGUMENT_CHARS: Final = 4_000
"""Characters of one argument a call carries."""
_TARGET_KEYS: Final = ("path", "file_path", "command", "pattern", "url", "query")


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _diff(old: str, new: str) -> list[DiffLine]:
    lines: list[DiffLine] = []
    before, after = old.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, a1, a2, b1, b2 in matcher.get_opcodes():
        if tag == "equal":
            lines.extend(DiffLine(op=" ", text=line) for line in before[a1:a2])
            continue
        lines.extend(DiffLine(op="-", text=line) for line in before[a1:a2])
        lines.extend(DiffLine(op="+", text=line) for line in after[b1:b2])
    return lines


def _change(name: str, args: Mapping[str, Any]) -> list[DiffLine]:
    """The diff an Edit or Write makes, from its input alone (the file before a Write is not in the call)."""
    if name == "Edit" and isinstance(args.get("old_string"), str) and isinstance(args.get("new_string"), str):
        return _diff(args["old_string"], args["new_string"])
    if name == "Write" and isinstance(args.get("content"), str):
        return [DiffLine(op="+", text=line) for line in args["content"].splitlines()]
    return []


def call_out(name: str, args: Mapping[str, Any]) -> CallOut:
    """A tool call as the pages show it.

    Args:
        name: The tool's name.
        args: Its input, as the model gave it.

    Returns:
        The call: its target (path, command, pattern), its arguments in order, and for Edit and
        Write the change as a diff (bounded to `DIFF_LINES`).
    """
    key = next((k for k in _TARGET_KEYS if k in args), None)
    target = _text(args[key]) if key is not None else ""
    diff = _change(name, args)
    shown = ({"old_string", "new_string", "content"} if diff else set()) | ({key} if key is not None else set())
    arguments = [PartText(key=str(k), text=_text(v)[:ARGUMENT_CHARS]) for k, v in args.items() if k not in shown]
    return CallOut(
        name=name,
        target=target[:ARGUMENT_CHARS],
        arguments=arguments,
        diff=diff[:DIFF_LINES],
        diff_cut=max(len(diff) - DIFF_LINES, 0),
    )


def _function_call(function: Mapping[str, Any]) -> CallOut:
    raw = function.get("arguments", "{}")
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        args = {"arguments": raw}
    return call_out(str(function.get("name", "")), args if isinstance(args, Mapping) else {"arguments": args})


def calls_of_block(block: object) -> list[CallOut]:
    """The tool calls a block of a request body holds (Anthropic `tool_use`, OpenAI `tool_calls`), if any."""
    if not isinstance(block, Mapping):
        return []
    if block.get("type") == "tool_use" and isinstance(block.get("input"), Mapping):
        return [call_out(str(block.get("name", "")), block["input"])]
    if block.get("type") == "function_call" and "name" in block:  # an OpenAI Responses input item
        return [_function_call(block)]
    calls = block.get("tool_calls")
    if isinstance(calls, list):
        return [
            _function_call(c["function"])
            for c in calls
            if isinstance(c, Mapping) and isinstance(c.get("function"), Mapping)
        ]
    return []
