r"""The one console wrapper of the CLI: stdout for results, stderr for messages (I/O).

`--json` output goes to stdout as one JSON document; progress and warnings go to stderr, so a script
can pipe the result. `NO_COLOR` is honoured by rich. Lines wrap at spaces in a terminal, not piped.

Every string that did not come from Lamina's own code (the model's text, a tool's input or
output, a file, a session title, the user's words) goes through `safe` before it is printed:
it neutralises control characters and terminal escape sequences, then escapes Rich markup, so
`[/red]` prints as `[/red]` and `\x1b]52;…` cannot reach the terminal.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Annotated, Any, Final, NoReturn

import msgspec
import typer
from rich.cells import cell_len
from rich.console import Console, JustifyMethod, OverflowMethod
from rich.style import Style
from rich.text import Text

from lamina.defang import show_controls
from lamina.errors import LaminaError, ProviderError, SessionError, UsageError


class WrappingConsole(Console):
    """A console that wraps lines at spaces in a terminal, and leaves them whole in a pipe or a file.

    Rich's `soft_wrap` leaves a long line to the terminal, which breaks it inside a word; without it,
    rich wraps a pipe's lines at 80 columns. So the default follows `is_terminal`, looked at on each print.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)  # sets `soft_wrap`, hence `fixed_wrap`: cleared below
        self.fixed_wrap: bool | None = None
        """Set `soft_wrap` to fix it (the demo wraps a pipe's lines too); None: it follows `is_terminal`."""

    @property
    def soft_wrap(self) -> bool:
        """Whether a line is left whole (not a terminal), unless `fixed_wrap` says otherwise."""
        return (not self.is_terminal) if self.fixed_wrap is None else self.fixed_wrap

    @soft_wrap.setter
    def soft_wrap(self, value: bool) -> None:
        self.fixed_wrap = value

    def print(  # rich's own signature
        self,
        *objects: Any,
        sep: str = " ",
        end: str = "\n",
        style: str | Style | None = None,
        justify: JustifyMethod | None = None,
        overflow: OverflowMethod | None = None,
        no_wrap: bool | None = None,
        emoji: bool | None = None,
        markup: bool | None = None,
        highlight: bool | None = None,
        width: int | None = None,
        height: int | None = None,
        crop: bool = True,
        soft_wrap: bool | None = None,
        new_line_start: bool = False,
    ) -> None:
        """Print as rich does; in a terminal, a text's lines wrap at spaces with a hanging indent.

        A continuation line starts two columns right of its line's own indent (`fit`), so a
        wrapped message never runs back to column 0 nor breaks inside a word.
        """
        plain = justify is None and width is None and not no_wrap and soft_wrap is None
        if plain and objects and not self.soft_wrap and all(isinstance(o, str | Text) for o in objects):
            texts = [self.render_str(o, markup=markup, emoji=emoji) if isinstance(o, str) else o for o in objects]
            objects = (Text("\n").join(hanging(Text(sep).join(texts), self.width)),)
            soft_wrap = True
        super().print(
            *objects,
            sep=sep,
            end=end,
            style=style,
            justify=justify,
            overflow=overflow,
            no_wrap=no_wrap,
            emoji=emoji,
            markup=markup,
            highlight=highlight,
            width=width,
            height=height,
            crop=crop,
            soft_wrap=soft_wrap,
            new_line_start=new_line_start,
        )


out = WrappingConsole(highlight=False, emoji=False)
err = WrappingConsole(stderr=True, highlight=False, emoji=False)

_BRACKET: Final = re.compile(r"(\\*)\[")
_TAG_LIKE: Final = re.compile(r"\[[a-z#/@][^[]*?]")
"""What rich's markup parser takes for a tag (its `RE_TAGS`, without the backslashes)."""
WORD_JOINER: Final = "\u2060"
"""Zero-width; `safe` appends it to a text that ends with a backslash."""
_WORD: Final = re.compile(r"\S+")


def safe(value: object) -> str:
    """`value` as text that prints exactly as it reads: neutralised (`show_controls`) and markup-escaped.

    Use it for every untrusted string put into a markup string (`f"[red]{safe(x)}[/red]"`).
    """
    text = show_controls(str(value))
    if text.endswith("\\"):
        # A trailing backslash would escape whatever markup follows it; rich's own fix (doubling it)
        # prints two backslashes when nothing follows. An invisible word joiner keeps both cases right.
        text += WORD_JOINER
    return _BRACKET.sub(_escape_bracket, text)


def _escape_bracket(match: re.Match[str]) -> str:
    # Rich reads a run of n backslashes before a tag-like `[x…]` as n // 2 backslashes (odd n: the tag is
    # literal), and removes one backslash before any other `[`. `rich.markup.escape` covers only the first.
    run = len(match.group(1))
    if _TAG_LIKE.match(match.string, match.end() - 1):
        return "\\" * (2 * run + 1) + "["
    return "\\" * (run + 1) + "["


def hanging(text: Text, width: int, *, hang: int = 2) -> list[Text]:
    """`text`'s lines fitted to `width`, each continuation `hang` columns right of its own line's indent."""
    rows: list[Text] = []
    for line in text.split("\n", allow_blank=True):
        lead = len(line.plain) - len(line.plain.lstrip(" "))
        rows += fit(line[lead:], width, indent=lead, hang=hang)
    return rows


def fit(text: Text, width: int | None, *, indent: int = 0, hang: int = 2, fold: bool = True) -> list[Text]:
    """`text` as lines of at most `width` cells, broken at spaces, never inside a word but one too long for a line.

    Args:
        text: The text (its own line breaks kept; tabs expanded).
        width: The width of the line, indents included; None: no wrapping (one line per line of `text`).
        indent: Spaces before the first line.
        hang: More spaces before each line after the first.
        fold: A word longer than a line is cut across lines (a terminal); False: it is left whole on its own line.

    Returns:
        The lines, indented, without trailing spaces.
    """
    room = None if width is None else max(width - indent - hang, 1)
    lines: list[Text] = []
    for paragraph in text.split("\n", allow_blank=True):
        paragraph.expand_tabs()
        rows = [paragraph] if room is None else paragraph.divide(_breaks(paragraph.plain, room, fold=fold))
        for row in rows:
            row.rstrip()
            pad = " " * (indent if not lines else indent + hang) if row.plain else ""
            lines.append(Text(pad) + row)
    return lines


def _breaks(plain: str, width: int, *, fold: bool) -> list[int]:
    """Where to break `plain` into lines of at most `width` cells: before a word, inside one only if it must."""
    breaks: list[int] = []
    start = 0
    for word in _WORD.finditer(plain):
        if word.start() > start and plain[start : word.start()].strip() and cell_len(plain[start : word.end()]) > width:
            breaks.append(word.start())
            start = word.start()
        while fold and cell_len(plain[start : word.end()]) > width:
            start += _fitting(plain[start : word.end()], width)
            breaks.append(start)
    return breaks


def _fitting(text: str, width: int) -> int:
    """How many characters of `text` fit in `width` cells (at least one)."""
    used = 0
    for count, char in enumerate(text):
        used += cell_len(char)
        if used > width:
            return max(count, 1)
    return len(text)


JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document to stdout.")]
"""A command's `--json` flag: its answer as one document (`print_json`) instead of tables and lines."""


def print_json(data: Any) -> None:
    """Print one JSON document to stdout (dataclasses, msgspec structs and paths included)."""
    raw = msgspec.json.encode(data, enc_hook=_enc_hook, order="deterministic")
    sys.stdout.write(msgspec.json.format(raw, indent=2).decode() + "\n")


def _enc_hook(obj: Any) -> Any:
    if hasattr(obj, "__fspath__"):
        return os.fspath(obj)
    raise NotImplementedError(f"cannot encode {type(obj).__name__} as JSON")


def warn(message: str) -> None:
    """A warning line on stderr; `message` is printed as plain text."""
    err.print(f"[yellow]warning:[/yellow] {safe(message)}")


def exit_code(error: LaminaError) -> int:
    """The exit code for an error: 2 the caller's mistake, 3 the session store, 4 the provider, else 1."""
    if isinstance(error, UsageError):
        return 2
    if isinstance(error, SessionError):
        return 3
    if isinstance(error, ProviderError):
        return 4
    return 1


def abort(message: str, code: int | None = None) -> NoReturn:
    """Stop the command with a one-line error (a traceback only when LAMINA_DEBUG=1).

    Without `code`, the exit code is `exit_code` of the `LaminaError` being handled, else 1.
    """
    current = sys.exc_info()[1]
    if os.environ.get("LAMINA_DEBUG") == "1" and current is not None:
        raise
    if code is None:
        code = exit_code(current) if isinstance(current, LaminaError) else 1
    err.print(f"[red]error:[/red] {safe(message)}")
    raise typer.Exit(code)
