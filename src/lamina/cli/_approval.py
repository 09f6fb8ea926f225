"""Ask mode in the terminal: show a tool call (a coloured diff for Edit and Write), ask yes / no / always (I/O).

"always" approves every later call of that tool for the rest of the session (this process); it
is never written anywhere.
"""

from __future__ import annotations

import asyncio
import difflib
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Final

import msgspec

from lamina.cli._console import err, safe
from lamina.tools import Allow, Deny, PermissionRequest

MAX_DIFF_LINES: Final = 80
"""Diff lines shown before the rest is summarised as a count."""
MAX_VALUE_CHARS: Final = 400
"""Characters of one input field shown in the approval prompt."""
DECLINED: Final = "the user declined this call"

AskLine = Callable[[str], Awaitable[str]]
"""Reads one answer from the user (raises EOFError at the end of input, KeyboardInterrupt on Ctrl-C)."""


class Approver:
    """The `ask` callback of an interactive session: prompts for every call the mode or a rule asks about."""

    def __init__(self, ask_line: AskLine) -> None:
        self._ask_line = ask_line
        self.always: set[str] = set()
        """Tools the user approved for the rest of the session."""

    async def __call__(self, request: PermissionRequest) -> Allow | Deny:
        name = request.call.name
        if name in self.always:
            return Allow()
        show_call(request)
        while True:
            try:
                answer = (await self._ask_line(f"Allow {name}? [y]es / [n]o / [a]lways for {name}: ")).strip().lower()
            except EOFError:
                answer = "n"
            except KeyboardInterrupt:
                # Ctrl-C at the question cancels the whole turn (the agent records the call as interrupted)
                task = asyncio.current_task()
                assert task is not None
                task.cancel()
                await asyncio.sleep(0)
                raise AssertionError("unreachable: the task was cancelled") from None
            if answer in {"y", "yes"}:
                return Allow()
            if answer in {"", "n", "no"}:
                err.print(f"[dim]declined {safe(name)}[/dim]")
                return Deny(DECLINED)
            if answer in {"a", "always"}:
                self.always.add(name)
                err.print(f"[dim]{safe(name)} is approved for the rest of this session[/dim]")
                return Allow()
            err.print("answer y (yes), n (no) or a (always for this tool in this session)")


def call_fields(value: Any) -> dict[str, Any]:
    """A tool input (a msgspec struct after validation, or a mapping) as a plain dict."""
    if isinstance(value, msgspec.Struct):
        return msgspec.structs.asdict(value)
    if isinstance(value, Mapping):
        return dict(value)
    return {"input": value}


def show_call(request: PermissionRequest) -> None:
    """Print the call the user is asked about: its fields, and for Edit and Write the change as a diff."""
    call = request.call
    fields = call_fields(call.input)
    # ask mode's own question only repeats the call; a rule's question says why it asks
    why = "" if request.asked_by == "permission_mode" else f" [dim]{safe(request.question)}[/dim]"
    err.print(f"\n[bold yellow]?[/bold yellow] [bold]{safe(call.name)}[/bold]{why}")
    diff = _proposed_change(call.name, fields, call.paths)
    shown = {"old_string", "new_string", "content"} if diff is not None else set()
    for key, value in fields.items():
        if key in shown or value is None or value is False:
            continue
        text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
        if len(text) > MAX_VALUE_CHARS:
            text = text[:MAX_VALUE_CHARS] + f"… ({len(text) - MAX_VALUE_CHARS:,} more characters)"
        err.print(f"  [cyan]{safe(key)}[/cyan]: {safe(text)}")
    if diff is not None:
        print_diff(diff)


def _proposed_change(name: str, fields: Mapping[str, Any], paths: tuple[Path, ...]) -> list[str] | None:
    """The unified diff an Edit or Write would make (None for other tools)."""
    if name not in {"Edit", "Write"} or not isinstance(fields.get("path"), str):
        return None
    label = str(fields["path"])
    target = paths[0] if paths else Path(label)
    try:
        before = target.read_text(encoding="utf-8", errors="replace")
    except OSError:
        before = ""
    if name == "Write":
        after = str(fields.get("content", ""))
    else:
        old, new = str(fields.get("old_string", "")), str(fields.get("new_string", ""))
        if old and old in before:
            after = before.replace(old, new) if fields.get("replace_all") else before.replace(old, new, 1)
        else:  # the edit will fail; still show what was asked
            before, after = old, new
    return list(
        difflib.unified_diff(
            before.splitlines(), after.splitlines(), fromfile=f"a/{label}", tofile=f"b/{label}", lineterm=""
        )
    )


def print_diff(lines: list[str]) -> None:
    """A unified diff, coloured (removed red, added green, hunks cyan), cut after `MAX_DIFF_LINES`."""
    if not lines:
        err.print("  [dim](no change)[/dim]")
        return
    for line in lines[:MAX_DIFF_LINES]:
        if line.startswith(("+++", "---")):
            err.print(f"  [bold]{safe(line)}[/bold]")
        elif line.startswith("@@"):
            err.print(f"  [cyan]{safe(line)}[/cyan]")
        elif line.startswith("+"):
            err.print(f"  [green]{safe(line)}[/green]")
        elif line.startswith("-"):
            err.print(f"  [red]{safe(line)}[/red]")
        else:
            err.print(f"  {safe(line)}")
    if len(lines) > MAX_DIFF_LINES:
        err.print(f"  [dim]… {len(lines) - MAX_DIFF_LINES:,} more diff lines[/dim]")
