"""Reading the user's input: prompt_toolkit in a terminal, plain lines from a pipe (I/O).

In a terminal, Enter sends the message; Alt-Enter (or Esc then Enter) and Ctrl-J start a new
line; a paste (bracketed paste, which every current terminal supports) is one message however long
it is: a long one shows as `[pasted N lines]` (Ctrl-T unfolds it) and is sent whole. History is
kept per user in the state directory (`platformdirs`). Tab completes slash commands and `[skill:`
names. Between prompts, keys typed ahead are queued as messages (`_type_ahead`).

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
from prompt_toolkit.application import Application, get_app
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent, merge_key_bindings
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import FormattedTextControl, Layout, Window
from rich.text import Text

from lamina.cli._pastes import FoldedPastes
from lamina.cli._type_ahead import TypeAhead
from lamina.defang import show_controls

_SKILL_PREFIX: Final = re.compile(r"\[skill:([\w.-]*)$")
REWIND_LINE: Final = "/rewind 1"
"""What Esc pressed twice at an empty prompt sends: a rewind to before the latest message (as Claude Code's)."""


class LineReader(Protocol):
    """Where a session's messages and answers come from."""

    async def message(self, draft: str = "", *, mode: str = "") -> str:
        """The next message (may span lines); `draft` is put in the input first, where the reader can edit.

        `mode` (the session's permission mode) is shown in the prompt, so the user always sees it.
        """
        ...

    async def answer(self, question: str) -> str:
        """A one-line answer to `question`."""
        ...

    async def key(self, question: str, keys: str) -> str:
        """One of `keys`, pressed (no Enter) in a terminal; from a pipe, a line's first letter (empty: `keys[0]`)."""
        ...


def prompt_line(mode: str) -> str:
    """The prompt before the user's message: the permission mode, then `>` (`ask > `)."""
    return f"{mode} > " if mode else "> "


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

    async def message(self, draft: str = "", *, mode: str = "") -> str:
        return await self._line("\n" + prompt_line(mode))

    async def answer(self, question: str) -> str:
        return await self._line(question)

    async def key(self, question: str, keys: str) -> str:
        answer = (await self._line(question)).strip().lower()
        return answer[:1] if answer else keys[0]


class TerminalReader:
    """prompt_toolkit line editor: history, multi-line input and pastes, completion."""

    def __init__(
        self,
        commands: Sequence[str],
        skills: Callable[[], Iterable[str]],
        *,
        history: Path | None,
        keys: KeyBindings | None = None,
    ) -> None:
        """Set up the line editor.

        Args:
            commands: The slash commands Tab completes.
            skills: The skill names Tab completes after `[skill:`.
            history: The file of past messages (None: this session only).
            keys: More key bindings for the message prompt (the chat's Ctrl-O).
        """
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

        self.pastes = FoldedPastes()
        """The long pastes of the message being typed, folded to one line each."""

        @bindings.add(Keys.BracketedPaste)
        def _paste(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text(self.pastes.fold(event.data))

        @bindings.add("c-t")
        def _unfold(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            buffer.text = self.pastes.expand(buffer.text)
            buffer.cursor_position = len(buffer.text)

        past: History = InMemoryHistory()
        if history is not None:
            try:
                history.parent.mkdir(parents=True, exist_ok=True)
                past = FileHistory(str(history))
            except OSError:  # a read-only home: history for this session only
                pass
        self._messages: PromptSession[str] = PromptSession(
            history=_PasteHistory(past, self.pastes),
            multiline=True,
            key_bindings=merge_key_bindings([bindings, _stray_sequences(), *([keys] if keys else [])]),
            completer=_Completer(commands, skills),
            complete_while_typing=False,
            prompt_continuation=lambda width, line_number, wrap_count: "." * (width - 1) + " ",
        )
        self._answers: PromptSession[str] = PromptSession()
        self.ahead = TypeAhead()
        """Keys typed while chat starts or a turn runs: queued messages, sent before the prompt shows again."""
        self.ahead.start()

    async def message(self, draft: str = "", *, mode: str = "") -> str:
        self.ahead.stop()
        queued = self.ahead.take()
        if queued is not None:  # typed ahead: sent as it was queued, shown as if typed at the prompt
            self._echo(prompt_line(mode) + queued)
            self.ahead.start()
            return queued
        draft += self.ahead.take_typing()
        try:
            return self.pastes.expand(
                await self._messages.prompt_async(prompt_line(mode), default=draft, handle_sigint=False)
            )
        finally:
            self.pastes.clear()
            self.ahead.start()

    async def answer(self, question: str) -> str:
        with self.ahead.paused():
            return await self._answers.prompt_async(question, handle_sigint=False)

    async def key(self, question: str, keys: str) -> str:
        from lamina.cli._console import err, hanging

        lines = hanging(Text(question.rstrip()), err.width)  # wrapped at spaces: the prompt's own wrap cuts words
        with self.ahead.paused():
            return await _read_key("\n".join(line.plain for line in lines) + " ", keys)

    def close(self) -> None:
        """Give the terminal back as it was (keys typed after the last prompt are dropped)."""
        self.ahead.stop()

    @staticmethod
    def _echo(line: str) -> None:
        from lamina.cli._console import err

        err.print(Text(show_controls(line)), soft_wrap=True)


class _PasteHistory(History):
    """The message history, with folded pastes kept whole (the file and Up both give the full text)."""

    def __init__(self, inner: History, pastes: FoldedPastes) -> None:
        super().__init__()
        self._inner = inner
        self._pastes = pastes

    def load_history_strings(self) -> Iterable[str]:
        return self._inner.load_history_strings()

    def append_string(self, string: str) -> None:
        super().append_string(self._pastes.expand(string))

    def store_string(self, string: str) -> None:
        self._inner.store_string(string)


def _stray_sequences() -> KeyBindings:
    """Escape sequences a terminal sends only when asked (mouse reports), read as nothing.

    prompt_toolkit parses `ESC [ 1 m` and the like as a mouse report even with the mouse off, and
    its handler then raises (`not enough values to unpack`): typed or pasted outside bracketed
    paste, such a sequence is dropped instead, and the line being typed stays as it was.
    """
    bindings = KeyBindings()

    @bindings.add(Keys.Vt100MouseEvent, eager=True)
    def _ignore(event: KeyPressEvent) -> None:
        pass

    return bindings


async def _read_key(question: str, keys: str) -> str:
    """Show `question`, wait for one of `keys` (other keys, Enter included, do nothing) and return it.

    Raises:
        KeyboardInterrupt: Ctrl-C.
        EOFError: Ctrl-D.
    """
    pressed: list[str] = []
    bindings = KeyBindings()

    def _answer(key: str) -> None:
        @bindings.add(key)
        def _press(event: KeyPressEvent) -> None:
            pressed.append(key)
            event.app.exit(result=key)

    for key in keys:
        _answer(key)

    @bindings.add("c-c")
    def _interrupt(event: KeyPressEvent) -> None:
        event.app.exit(exception=KeyboardInterrupt())

    @bindings.add("c-d")
    def _end(event: KeyPressEvent) -> None:
        event.app.exit(exception=EOFError())

    @bindings.add(Keys.Any)
    def _other(event: KeyPressEvent) -> None:
        pass

    shown = FormattedTextControl(lambda: question + "".join(pressed), show_cursor=False)
    application: Application[str] = Application(
        layout=Layout(Window(shown, dont_extend_height=True, wrap_lines=True)),
        key_bindings=merge_key_bindings([bindings, _stray_sequences()]),
        full_screen=False,
    )
    return await application.run_async(handle_sigint=False)


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
