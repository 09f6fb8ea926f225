"""The `lamina` command line: thin commands over the public API (I/O).

Each command's module is imported when that command runs, and imports the engine, the SDKs, rich and
prompt_toolkit inside its functions, so `lamina --help` and shell completion stay fast. This package
imports nothing of the `cli` extra: `main` answers `lamina --version` alone, then checks that typer,
rich and prompt_toolkit are installed and otherwise names the extra.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import TYPE_CHECKING, Final

from lamina._lazy import load_lazily

if TYPE_CHECKING:
    from lamina.cli._app import app

__all__ = [
    "app",
    "main",
]

_LAZY: Final = {"app": "lamina.cli._app"}
_CLI_MODULES: Final = ("typer", "rich", "prompt_toolkit")
"""The modules of the `cli` extra, checked (not imported) before the command line starts."""


def __getattr__(name: str) -> object:
    return load_lazily(globals(), __name__, _LAZY, name)


def main() -> None:
    """Console-script entry point: every `LaminaError` ends as one line and its exit code.

    Without the `cli` extra, one line names it and the exit code is 2 (a usage error).
    """
    args = _resume_without_id(sys.argv[1:])
    if args == ["--version"]:  # the one answer that needs neither typer nor the rest of the cli extra
        from lamina.cli._version import version_line

        print(version_line())
        return
    from lamina.errors import MissingExtraError

    missing = next((name for name in _CLI_MODULES if importlib.util.find_spec(name) is None), None)
    if missing is not None:
        print(f"error: {MissingExtraError('the lamina command', 'cli', missing)}", file=sys.stderr)
        sys.exit(2)
    from lamina.cli._app import start

    start(args)


def _resume_without_id(args: list[str]) -> list[str]:
    """`chat --resume` with no id (last, or followed by an option) becomes `--resume ''`: the picker."""
    fixed = list(args)
    for i, arg in enumerate(fixed):
        if arg == "--resume" and (i + 1 == len(fixed) or fixed[i + 1].startswith("-")):
            fixed.insert(i + 1, "")
            break
    return fixed
