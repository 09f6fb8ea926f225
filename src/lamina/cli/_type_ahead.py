"""Type-ahead: what the user types while chat starts or a turn runs, queued as messages (I/O: the terminal).

Between prompts the terminal is put in cbreak mode without echo (Ctrl-C still interrupts), so keys
never land in the spinner line; stdin is read on the event loop. Enter queues the line typed so
far as its own message (it never becomes a newline), Backspace on an empty line takes the last
queued message back to edit, Ctrl-U clears the line. The chat sends queued messages in order, one
turn each, before it shows the prompt again; a line typed without Enter becomes the prompt's draft.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import select
import sys
import termios
import tty
from collections.abc import Callable, Iterator
from typing import Any, Final

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from lamina.defang import show_controls

_SEQUENCE: Final = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|O.|.)?", re.DOTALL)
"""An escape sequence (an arrow key, a function key, Alt-something): read as nothing."""
_ERASE: Final = ("\x7f", "\x08")
_CLEAR: Final = "\x15"  # Ctrl-U
_ENTER: Final = ("\r", "\n")


class TypeAhead:
    """The keys typed while Lamina is busy: queued messages and the line being typed.

    Args:
        fd: The terminal's file descriptor (stdin).
    """

    def __init__(self, fd: int | None = None) -> None:
        self._fd = sys.stdin.fileno() if fd is None else fd
        self.queued: tuple[str, ...] = ()
        """Messages Enter ended, oldest first (replaced whole: a refresh thread reads it)."""
        self.typing = ""
        """The line being typed (no Enter yet)."""
        self.on_change: Callable[[], None] | None = None
        """Called after keys changed the queue or the line (to redraw where they are shown)."""
        self._saved: list[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def active(self) -> bool:
        """Whether keys are being collected now."""
        return self._saved is not None

    def start(self) -> None:
        """Collect keys from now on (no echo); nothing happens when stdin is not a terminal or no loop runs."""
        if self._saved is not None or not os.isatty(self._fd):
            return
        try:
            loop = asyncio.get_running_loop()
            saved = termios.tcgetattr(self._fd)
        except (RuntimeError, termios.error):
            return
        try:
            tty.setcbreak(self._fd, termios.TCSANOW)  # keeps ISIG: Ctrl-C still interrupts the turn
            loop.add_reader(self._fd, self._read)
        except (RuntimeError, OSError, termios.error):
            with contextlib.suppress(termios.error):  # the terminal as it was: echo back on
                termios.tcsetattr(self._fd, termios.TCSANOW, saved)
            return
        self._saved, self._loop = saved, loop

    def stop(self) -> None:
        """Stop collecting: read what is pending, then give the terminal back as it was."""
        if self._saved is None or self._loop is None:
            return
        with contextlib.suppress(OSError, ValueError):
            while select.select([self._fd], [], [], 0)[0]:
                if not self._read():
                    break
        self._loop.remove_reader(self._fd)
        with contextlib.suppress(termios.error):
            termios.tcsetattr(self._fd, termios.TCSANOW, self._saved)  # not TCSAFLUSH: unread keys stay
        self._saved = self._loop = None

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Let someone else read the terminal (a prompt, an approval) for a while."""
        was = self.active
        self.stop()
        try:
            yield
        finally:
            if was:
                self.start()

    def _read(self) -> bool:
        try:
            data = os.read(self._fd, 4096)
        except OSError:
            data = b""
        if not data:  # end of input: stop watching (the prompt sees the end itself)
            if self._loop is not None:
                self._loop.remove_reader(self._fd)
            return False
        self.feed(data.decode("utf-8", errors="replace"))
        return True

    def feed(self, keys: str) -> None:
        """Take typed keys: text, Enter (queue the line), Backspace, Ctrl-U; escape sequences are dropped."""
        keys = _SEQUENCE.sub("", keys)
        typing, queued = self.typing, list(self.queued)
        for key in keys:
            if key in _ENTER:
                if typing.strip():
                    queued.append(typing)
                typing = ""
            elif key in _ERASE:
                if typing:
                    typing = typing[:-1]
                elif queued:
                    typing = queued.pop()
            elif key == _CLEAR:
                typing = ""
            elif key == "\t" or key >= " ":
                typing += key
        self.typing, self.queued = typing, tuple(queued)
        if self.on_change is not None:
            self.on_change()

    def take(self) -> str | None:
        """The oldest queued message, taken off the queue (None: nothing queued)."""
        if not self.queued:
            return None
        first, *rest = self.queued
        self.queued = tuple(rest)
        return first

    def take_typing(self) -> str:
        """The line typed without Enter, taken (the next prompt's draft)."""
        typing, self.typing = self.typing, ""
        return typing

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """The queue under the spinner: each queued message, then the line being typed, one row each."""
        queued, typing = self.queued, self.typing
        for message in queued:
            yield _row(Text("⏵ queued: " + show_controls(" ".join(message.split())), style="dim"), options)
        if typing:
            yield _row(Text("› " + show_controls(typing)), options)
        if queued or typing:
            hint = "Enter queues · Backspace edits the last · Ctrl-U clears"
            yield _row(Text(hint, style="dim"), options)


def _row(text: Text, options: ConsoleOptions) -> Text:
    text.no_wrap = True
    text.truncate(options.max_width, overflow="ellipsis")
    return text
