"""Reading the user's input: prompt_toolkit in a terminal, plain lines from a pipe (I/O).

In a terminal, Enter sends the message; Alt-Enter (or Esc then Enter) and Ctrl-J start a new
line; a paste (bracketed paste, which every current terminal supports) is inserted whole, newlines
included, and sent as one message however long it is. History is kept per user in the state
directory (`platformdirs`). Tab completes slash commands and `[skill:` names.

Both readers raise `EOFError` at the end of input (Ctrl-D) and `KeyboardInterrupt` on Ctrl-C.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Final, Protocol

import platformdirs
from prompt_toolkit import PromptSession
from prompt_toolkit.application import get_app
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

_SKILL_PREFIX: Final = re.compile(r"\[skill:([\w.-]*)$")
REWIND_LINE: Final = "/rewind 1"
"""What Esc pressed twice at an empty prompt sends: a rewind to before the latest message (as Claude Code's)."""


class LineReader(Protocol):
    """Where a session's messages and answers come from."""

    async def message(self, draft: str = "") -> str:
        """The next message (may span lines); `draft` is put in the input first, where the reader can edit."""
        ...

    async def answer(self, question: str) -> str:
        """A one-line answer to `question`."""
        ...


def history_path() -> Path:
    """The per-user file of past messages."""
    return platformdirs.user_state_path("lamina") / "chat_history"


class PipeReader:
    """Reads lines from a non-interactive stdin: one line, one message."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self._write = write

    async def _line(self, prompt: str) -> str:
        self._write(prompt)
        line: str = await asyncio.to_thread(sys.stdin.readline)
        if not line:
            raise EOFError
        return line.rstrip("\n")

    async def message(self, draft: str = "") -> str:
        return await self._line("\n> ")

    async def answer(self, question: str) -> str:
        return await self._line(question)


class TerminalReader:
    """prompt_toolkit line editor: history, multi-line input and pastes, completion."""

    def __init__(self, commands: Sequence[str], skills: Callable[[], Iterable[str]], *, history: Path | None) -> None:
        bindings = KeyBindings()

        @bindings.add("enter")
        def _send(event: KeyPressEvent) -> None:
            event.current_buffer.validate_and_handle()

        @bindings.add("escape", "enter")
        @bindings.add("c-j")
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @bindings.add("escape", "escape", filter=Condition(lambda: not get_app().current_buffer.text))
        def _rewind(event: KeyPressEvent) -> None:
            event.app.exit(result=REWIND_LINE)  # not kept in the history: the user did not type it

        past: History = InMemoryHistory()
        if history is not None:
            try:
                history.parent.mkdir(parents=True, exist_ok=True)
                past = FileHistory(str(history))
            except OSError:  # a read-only home: history for this session only
                pass
        self._messages: PromptSession[str] = PromptSession(
            history=past,
            multiline=True,
            key_bindings=bindings,
            completer=_Completer(commands, skills),
            complete_while_typing=False,
            prompt_continuation=lambda width, line_number, wrap_count: "." * (width - 1) + " ",
        )
        self._answers: PromptSession[str] = PromptSession()

    async def message(self, draft: str = "") -> str:
        return await self._messages.prompt_async("> ", default=draft, handle_sigint=False)

    async def answer(self, question: str) -> str:
        return await self._answers.prompt_async(question, handle_sigint=False)


class _Completer(Completer):
    """Completes `/commands` at the start of the input and skill names after `[skill:`."""

    def __init__(self, commands: Sequence[str], skills: Callable[[], Iterable[str]]) -> None:
        self._commands = commands
        self._skills = skills

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        before = document.text_before_cursor
        if before.startswith("/") and " " not in before:
            for command in self._commands:
                if command.startswith(before):
                    yield Completion(command, start_position=-len(before))
            return
        match = _SKILL_PREFIX.search(before)
        if match is not None:
            typed = match.group(1)
            for name in sorted(self._skills()):
                if name.startswith(typed):
                    yield Completion(name + "]", start_position=-len(typed), display=name)
