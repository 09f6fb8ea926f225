"""What the shell reader finds in a command: words, redirections, simple commands (pure data).

Filled in by `lamina.shell._parse` from tree-sitter-bash's syntax tree. See docs/security.md,
"The shell reader and protected paths".
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Final

_DESCRIPTOR: Final = re.compile(r"\d+|-")
OUTPUT_OPERATORS: Final = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
"""Redirections that open their target for writing (`<>` reads and writes)."""
INPUT_OPERATORS: Final = frozenset({"<", "<>"})
DUPLICATIONS: Final = frozenset({">&", "<&"})
CLOSINGS: Final = frozenset({">&-", "<&-"})


@dataclass(frozen=True, slots=True)
class Word:
    """One word as bash sees it after quote removal, when the command itself decides its value."""

    text: str
    """The word as written."""
    value: str | None
    """After quote removal; None when an expansion or a substitution decides it when the command runs."""
    pattern: bool = False
    """It holds an unquoted glob (`*`, `?`, `[`), a brace expansion or a leading `~`: bash may turn it
    into other words."""

    @property
    def literal(self) -> bool:
        """Its value is known and bash passes it on unchanged."""
        return self.value is not None and not self.pattern


@dataclass(frozen=True, slots=True)
class Redirect:
    """One redirection: `2>>log`, `>/dev/null`, `2>&1`, `<input`, a here-document or a here-string."""

    operator: str
    """`>`, `>>`, `>|`, `&>`, `&>>`, `<`, `<>`, `>&`, `<&`, `>&-`, `<&-`, `<<`, `<<-` or `<<<`."""
    target: Word | None
    """The file or descriptor; the here-string's word; None for a here-document and `>&-`."""
    descriptor: str | None = None
    """The descriptor written before the operator (`2` in `2>&1`), if any."""
    body: str | None = None
    """A here-document's text (a here-string's is its target)."""

    @property
    def harmless(self) -> bool:
        """Only `/dev/null` (literally) or a descriptor duplication or closing: no file is opened."""
        if self.operator in CLOSINGS:
            return True
        if self.target is None or not self.target.literal:
            return False
        value = self.target.value
        if self.operator in DUPLICATIONS:
            return value is not None and _DESCRIPTOR.fullmatch(value) is not None
        return self.operator in OUTPUT_OPERATORS | INPUT_OPERATORS and value == "/dev/null"

    @property
    def written(self) -> Word | None:
        """The file this redirection opens for writing (`>&file` writes both streams there), or None."""
        if self.target is None or self.harmless:
            return None
        if self.operator in OUTPUT_OPERATORS or self.operator == ">&":
            return self.target
        return None

    @property
    def read(self) -> Word | None:
        """The file this redirection opens for reading (`<file`, `<>file`), or None."""
        if self.target is None or self.harmless or self.operator not in INPUT_OPERATORS:
            return None
        return self.target


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One simple command: leading assignments, the program and its arguments, its redirections."""

    words: tuple[Word, ...]
    """The program and its arguments (empty for `x=1` alone or `>file` alone)."""
    assignments: tuple[Word, ...] = ()
    """`NAME=value` words before the program; their value is the whole `NAME=value`."""
    redirects: tuple[Redirect, ...] = ()
    nested: bool = False
    """It runs inside a substitution, a group, a function or a keyword's body, not at the top level."""
    start: int = 0
    """Where it starts in the text, in bytes of UTF-8 (commands are kept in this order)."""

    @property
    def program(self) -> str | None:
        """The program's name without its folder (`rm` for `/bin/rm`); None when an expansion decides it."""
        if not self.words or self.words[0].value is None:
            return None
        return posixpath.basename(self.words[0].value)

    @property
    def plain(self) -> bool:
        """Only literal words, no assignment, nothing but harmless redirections: what an allow rule shows."""
        return (
            bool(self.words)
            and not self.assignments
            and not self.nested
            and all(redirect.harmless for redirect in self.redirects)
        )


@dataclass(frozen=True, slots=True)
class CommandReading:
    """A command line as the shell reader understands it: every simple command in its tree, and what it did not."""

    text: str
    commands: tuple[SimpleCommand, ...]
    """Every simple command anywhere in the tree (substitutions, groups, bodies), in the order written."""
    problems: tuple[str, ...] = ()
    """What the reader does not fully understand (`command substitution $(…)`, `a here-document`, …):
    an allow rule never matches a command with any."""
    parse_error: bool = False
    """tree-sitter-bash could not parse part of it: what bash would run there is unknown."""

    @property
    def understood(self) -> bool:
        """Nothing in it is beyond the reader: each simple command is all there is to run."""
        return not self.problems
