"""The one console wrapper of the CLI: stdout for results, stderr for messages (I/O).

`--json` output goes to stdout as one JSON document; progress and warnings go to stderr, so a
script can pipe the result. `NO_COLOR` is honoured by rich itself.
"""

from __future__ import annotations

import os
import sys
from typing import Any, NoReturn

import msgspec
import typer
from rich.console import Console

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def print_json(data: Any) -> None:
    """Print one JSON document to stdout (dataclasses, msgspec structs and paths included)."""
    raw = msgspec.json.encode(data, enc_hook=_enc_hook, order="deterministic")
    sys.stdout.write(msgspec.json.format(raw, indent=2).decode() + "\n")


def _enc_hook(obj: Any) -> Any:
    if hasattr(obj, "__fspath__"):
        return os.fspath(obj)
    raise NotImplementedError(f"cannot encode {type(obj).__name__} as JSON")


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/yellow] {message}", highlight=False)


def abort(message: str, code: int = 1) -> NoReturn:
    """Stop the command with a one-line error (a traceback only when LAMINA_DEBUG=1)."""
    if os.environ.get("LAMINA_DEBUG") == "1" and sys.exc_info()[1] is not None:
        raise
    err.print(f"[red]error:[/red] {message}", highlight=False)
    raise typer.Exit(code)
