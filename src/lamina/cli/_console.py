r"""The one console wrapper of the CLI: stdout for results, stderr for messages (I/O).

`--json` output goes to stdout as one JSON document; progress and warnings go to stderr, so a
script can pipe the result. `NO_COLOR` is honoured by rich itself.

Every string that did not come from Lamina's own code (the model's text, a tool's input or
output, a file, a session title, the user's words) goes through `safe` before it is printed:
it neutralises control characters and terminal escape sequences, then escapes Rich markup, so
`[/red]` prints as `[/red]` and `\x1b]52;…` cannot reach the terminal.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, Final, NoReturn

import msgspec
import typer
from rich.console import Console

from lamina.defang import show_controls
from lamina.errors import LaminaError, ProviderError, SessionError, UsageError

out = Console(soft_wrap=True, highlight=False, emoji=False)
err = Console(stderr=True, soft_wrap=True, highlight=False, emoji=False)

_BRACKET: Final = re.compile(r"(\\*)\[")
_TAG_LIKE: Final = re.compile(r"\[[a-z#/@][^[]*?]")
"""What rich's markup parser takes for a tag (its `RE_TAGS`, without the backslashes)."""
WORD_JOINER: Final = "\u2060"
"""Zero-width; `safe` appends it to a text that ends with a backslash."""


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
