"""What a turn shows while it runs in a terminal: a spinner with a timer, a tool's last lines, streamed Markdown (I/O).

The model's text is neutralised (`show_controls`) before it is parsed as Markdown, and Markdown
becomes rich `Text` without markup, so neither an escape sequence nor `[red]` acts on the terminal;
raw HTML and links print as text (a link's address next to its words, never a hidden hyperlink).
"""

from __future__ import annotations

import asyncio
import time
from typing import ClassVar, Final

from markdown_it import MarkdownIt
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, JustifyMethod, RenderableType, RenderResult
from rich.live import Live
from rich.markdown import Heading, Markdown, MarkdownElement
from rich.segment import Segment, Segments
from rich.spinner import Spinner
from rich.text import Text

from lamina.defang import show_controls

TAIL_LINES: Final = 5
"""Lines of a running tool's output shown under its name."""
LIVE_ROWS: Final = 8
"""Rows of streamed text kept live (redrawn as text comes); the rows above them are printed once, for good."""
REDRAW_SECONDS: Final = 0.08
"""The streamed text is redrawn at most this often."""
_PARSER: Final = MarkdownIt("commonmark", {"html": False}).enable("strikethrough").enable("table")
"""Rich's parser, but raw HTML is text (rich drops it: the model's words would go unseen)."""


def elapsed(seconds: float) -> str:
    """`7s`, `2m 05s`, `1h 02m`: a timer as a status line shows it."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


class _LeftHeading(Heading):
    """A heading at the left margin, every level (rich centres a level-1 heading)."""

    LEVEL_ALIGN: ClassVar[dict[str, JustifyMethod]] = dict.fromkeys(Heading.LEVEL_ALIGN, "left")


class SafeMarkdown(Markdown):
    """Rich's Markdown of untrusted text: controls shown as symbols, HTML as text, links with their address."""

    elements: ClassVar[dict[str, type[MarkdownElement]]] = {**Markdown.elements, "heading_open": _LeftHeading}

    def __init__(self, text: str) -> None:
        super().__init__("", hyperlinks=False)
        self.markup = show_controls(text)
        self.parsed = _PARSER.parse(self.markup)


class Activity:
    """The live line of something running: a spinner, its label, a timer, and the last lines it printed."""

    def __init__(self, label: Text) -> None:
        self.label = label
        self.started = time.monotonic()
        self.tail: tuple[str, ...] = ()
        """Its last complete lines (replaced whole, so the refresh thread reads a consistent tuple)."""
        self.partial = ""
        """Its unfinished last line."""
        self._spinner = Spinner("dots")

    def feed(self, output: str) -> None:
        """Take more output: the last lines are kept, a carriage return rewrites its line as in a terminal."""
        lines = (self.partial + output).split("\n")
        partial = lines.pop()
        done = [_shown(line) for line in lines[-TAIL_LINES:]]
        self.tail = (*self.tail, *done)[-TAIL_LINES:]
        self.partial = partial

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        frames = self._spinner.frames
        frame = frames[int(console.get_time() * 1000 / self._spinner.interval) % len(frames)]
        timer = Text(f" · {elapsed(time.monotonic() - self.started)}", style="dim")
        label = _one_row(self.label.copy(), max(width - cell_len(frame) - 1 - timer.cell_len, 1))
        yield _one_row(Text.assemble((frame, "green"), " ", label, timer), width)  # the label cut, not the timer
        partial = _shown(self.partial)
        for line in (*self.tail, partial)[-TAIL_LINES:] if partial else self.tail:
            yield _one_row(Text("  " + show_controls(line).expandtabs(), style="dim"), width)


def _shown(line: str) -> str:
    """What a terminal shows of a line written with carriage returns (a progress bar): its last rewrite."""
    return line.rstrip("\r").rsplit("\r", 1)[-1]


def _one_row(text: Text, width: int) -> Text:
    text.no_wrap = True
    text.truncate(width, overflow="ellipsis")
    return text


class TextStream:
    """The model's text as it streams: Markdown in a terminal, as it came elsewhere (a pipe, a file).

    Live, the last `LIVE_ROWS` rows are redrawn as the text grows; rows above them no longer change
    (a paragraph only grows at its end) and are printed once, above the live rows. Not live (no
    animation wanted), the Markdown is printed when the text ends.
    """

    def __init__(self, console: Console, *, live: bool) -> None:
        self.console = console
        self.markdown = console.is_terminal
        self.live = live and self.markdown
        self.text = ""
        self.printed = 0
        """Rows printed for good."""
        self.open_line = False
        """As it came: the last piece did not end its line."""
        self._live: Live | None = None
        self.below: RenderableType | None = None
        """Drawn under the live rows (the type-ahead queue)."""
        self._drawn = 0.0
        self._pending: asyncio.TimerHandle | None = None

    def add(self, piece: str) -> None:
        """Show more text."""
        if not self.markdown:
            self.console.print(Text(show_controls(piece)), end="")
            self.open_line = not piece.endswith("\n")
            return
        self.text += piece
        if not self.live or self._pending is not None:
            return
        wait = REDRAW_SECONDS - (time.monotonic() - self._drawn)
        if wait <= 0:
            self._draw()
            return
        try:
            self._pending = asyncio.get_running_loop().call_later(wait, self._draw)
        except RuntimeError:  # no event loop (a caller outside a turn): draw now
            self._draw()

    def close(self) -> None:
        """End the text: the rows not printed yet are printed for good."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        if not self.markdown:
            if self.open_line:
                self.console.print()
                self.open_line = False
            return
        if self._live is not None:
            self._live.stop()
            self._live = None
        rows = self._rows() if self.text.strip() else []
        if len(rows) > self.printed:
            self.console.print(_segments(rows[self.printed :], end=True))
        self.printed = len(rows)

    def _rows(self) -> list[list[Segment]]:
        return self.console.render_lines(SafeMarkdown(self.text), self.console.options, pad=False)

    def _draw(self) -> None:
        self._pending = None
        self._drawn = time.monotonic()
        rows = self._rows()
        settled = max(self.printed, len(rows) - LIVE_ROWS)
        if self._live is None:
            self._live = Live(
                console=self.console, auto_refresh=False, transient=True, redirect_stdout=False, redirect_stderr=False
            )
            self._live.start()
        if settled > self.printed:
            self.console.print(_segments(rows[self.printed : settled], end=True))  # above the live rows
            self.printed = settled
        live_rows = _segments(rows[settled:])
        self._live.update(live_rows if self.below is None else _Above(live_rows, self.below), refresh=True)

    def refresh(self) -> None:
        """Redraw the live rows (what is drawn under them changed)."""
        if self._live is not None:
            self._live.refresh()


class _Above:
    """The live rows, then what is drawn under them on rows of its own (when it draws anything)."""

    def __init__(self, rows: Segments, below: RenderableType) -> None:
        self.rows = rows
        self.below = below

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.rows
        for line in console.render_lines(self.below, options, pad=False):
            yield Segment.line()
            yield from line


def _segments(rows: list[list[Segment]], *, end: bool = False) -> Segments:
    """Rendered rows as one renderable, each but the last ended (the last too with `end`)."""
    joined: list[Segment] = []
    for number, row in enumerate(rows):
        if number:
            joined.append(Segment.line())
        joined.extend(row)
    if end and rows:
        joined.append(Segment.line())
    return Segments(joined)
