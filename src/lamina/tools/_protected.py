"""Protected paths: files that change what git or Lamina runs, written only with the user's say-so (I/O: paths).

`.git` (config, hooks, info: any folder or file of that name), `.lamina` (config, project file,
skills), the workspace's `sources/` folder, the user's git config and Lamina's user config folder.
The pipeline asks about every call that writes one, in every mode, and no allow rule answers for
it. See docs/security.md, "The shell reader and protected paths".
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

import platformdirs

from lamina.shell import could_match, file_uses, read_command
from lamina.tools._bash import BashInput
from lamina.tools._rules import BoundCall

PROTECTED_NAMES: Final = (".git", ".lamina")
"""A path with a part of one of these names is protected, wherever it lies."""
PROTECTED_FOLDERS: Final = ("sources",)
"""Folders at the top of the working directory (and of each allowed root) that are protected."""


def protected_writes(call: BoundCall) -> tuple[Path, ...]:
    """The protected paths `call` would write: an editing tool's paths, a Bash command's visible targets.

    Args:
        call: The call as the pipeline binds it (paths resolved, final input).

    Returns:
        Each protected path once, in the order found (empty: nothing protected is written).
    """
    if call.tool.read_only:
        return ()
    found: dict[Path, None] = {}
    targets: Iterable[tuple[str, bool]] = ((str(path), False) for path in call.paths)
    if isinstance(call.input, BashInput):
        targets = _bash_targets(call.input.command)
    for raw, pattern in targets:
        for path in _spellings(call.context.cwd, raw):
            roots = (call.context.cwd, *call.context.allowed_roots)
            if _protected(path, roots, pattern=pattern):
                found.setdefault(path)
                break
    return tuple(found)


def protected_question(call: BoundCall, paths: tuple[Path, ...]) -> str:
    """The question put to the user: the call, and each protected path it writes."""
    shown = ", ".join(call.context.display(path) for path in paths)
    return (
        f"It writes {shown}: a protected path (it changes what git or Lamina runs). "
        "Only the user can allow this, once; no rule or earlier answer covers it."
    )


def _bash_targets(command: str) -> Iterator[tuple[str, bool]]:
    for write in file_uses(read_command(command)).writes:
        yield write.path, write.pattern


def _spellings(cwd: Path, raw: str) -> Iterator[Path]:
    """The path as written (from `cwd`, `~` expanded), then with its links followed."""
    given = cwd / os.path.expanduser(raw)
    yield Path(os.path.normpath(given))
    try:
        yield given.resolve()
    except (OSError, RuntimeError, ValueError):
        return


def _protected(path: Path, roots: tuple[Path, ...], *, pattern: bool) -> bool:
    if any(_could_be(part, name, pattern=pattern) for part in path.parts for name in PROTECTED_NAMES):
        return True
    for root in roots:
        if path.is_relative_to(root) and path != root:
            top = path.relative_to(root).parts[0]
            for name in PROTECTED_FOLDERS:  # `rm -rf *` reaches `sources/` only where there is one
                if top == name or (pattern and _could_be(top, name, pattern=True) and (root / name).exists()):
                    return True
    return any(path == outside or path.is_relative_to(outside) for outside in _outside())


def _could_be(part: str, name: str, *, pattern: bool) -> bool:
    """`part` is `name`, or a glob that matches it (a glob matches a dot file only when it starts with a dot)."""
    if part == name:
        return True
    return pattern and (part.startswith(".") or not name.startswith(".")) and could_match(name, part)


def _outside() -> tuple[Path, ...]:
    """The files outside the workspace that change what git or Lamina runs: the user's git and Lamina config."""
    home = Path.home()
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    return (
        home / ".gitconfig",
        xdg / "git",
        Path("/etc/gitconfig"),
        platformdirs.user_config_path("lamina"),
    )
