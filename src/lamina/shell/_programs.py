"""Which programs a command could run, for deny rules: every word that could be one (pure).

A word is a possible program where bash runs it (a command's first word) and in the arguments of
every program not known to never run its arguments (`env`, `sudo`, `xargs`, `find -exec`,
`bash -c`, `git`, …). A word whose value an expansion decides could be any program; a word that
looks like a script (`'rm x'` after `bash -c`) is read as one in turn. See docs/security.md.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Sequence
from typing import Final

from wcmatch import fnmatch

from lamina.shell._parse import read_command
from lamina.shell._syntax import CommandReading, SimpleCommand, Word

_WORD_FLAGS: Final = fnmatch.CASE | fnmatch.DOTMATCH | fnmatch.BRACE
MAX_NESTING: Final = 4
"""Scripts inside words inside scripts read at most this deep; deeper, the word could be any program."""
NON_RUNNERS: Final = frozenset(
    {
        "basename",
        "cat",
        "cd",
        "chgrp",
        "chmod",
        "chown",
        "cmp",
        "cp",
        "cut",
        "df",
        "diff",
        "dirname",
        "du",
        "echo",
        "egrep",
        "false",
        "fgrep",
        "grep",
        "head",
        "hostname",
        "id",
        "ln",
        "ls",
        "md5sum",
        "mkdir",
        "mktemp",
        "mv",
        "nl",
        "pwd",
        "readlink",
        "realpath",
        "rm",
        "rmdir",
        "seq",
        "sha1sum",
        "sha256sum",
        "sha512sum",
        "sleep",
        "stat",
        "tac",
        "tail",
        "tee",
        "touch",
        "tr",
        "tree",
        "true",
        "truncate",
        "uname",
        "uniq",
        "unlink",
        "wc",
        "which",
        "whoami",
    }
)
"""Programs that never run a word of their arguments as a command (`printf -v`, `test -v` and `sort
--compress-program` do, so they are not here)."""
_SCRIPT_CHARACTERS: Final = frozenset(" \t\n;&|()<>$`'\"\\")


def could_run(reading: CommandReading, prefix: Sequence[str]) -> str | None:
    """Whether the command could run `prefix` (a program and the words a deny rule names after it).

    Args:
        reading: The command, read.
        prefix: The rule's words: the program first (matched without its folder), then words that
            must follow it, in order but not necessarily next.

    Returns:
        None when it cannot; else what could (`rm x`, or why the reader cannot tell).
    """
    return _could_run(reading, tuple(prefix), 0)


def _could_run(reading: CommandReading, prefix: tuple[str, ...], depth: int) -> str | None:
    if reading.parse_error:
        return f"`{_short(reading.text)}`, which the reader cannot fully parse"
    for command in reading.commands:
        found = _command(command, prefix, depth)
        if found is not None:
            return found
    return None


def _command(command: SimpleCommand, prefix: tuple[str, ...], depth: int) -> str | None:
    words = command.words
    runs_arguments = bool(words) and (command.program is None or command.program not in NON_RUNNERS)
    for start in range(len(words) if runs_arguments else min(1, len(words))):
        found = _sequence(words[start:], prefix, depth)
        if found is not None:
            return found
    for assignment in command.assignments:  # `PAGER='rm x' git log`: a program may run a variable's value
        value = None if assignment.value is None else assignment.value.partition("=")[2]
        found = _sequence((Word(assignment.text, value, assignment.pattern),), prefix, depth)
        if found is not None:
            return f"{found} (a variable's value, which a later command may run)"
    if runs_arguments:
        for redirect in command.redirects:  # `bash <<EOF` or `sh <<< 'rm x'`: the text is a script
            script = redirect.body
            if redirect.operator == "<<<" and redirect.target is not None:
                script = redirect.target.value
                if script is None:
                    return f"`{redirect.target.text}` (an expansion: it could be any program)"
            if script:
                found = _script(script, prefix, depth)
                if found is not None:
                    return found
    return None


def _sequence(words: Sequence[Word], prefix: tuple[str, ...], depth: int) -> str | None:
    """Whether `words` could start with the rule's program, followed by its other words."""
    first = words[0]
    if first.value is None:
        return f"`{first.text}` (an expansion: it could be any program)"
    for variant in _variants(first.value):
        if any(char in _SCRIPT_CHARACTERS for char in variant):
            found = _script(variant, prefix, depth)
            if found is not None:
                return found
        elif _names(variant, prefix[0], pattern=first.pattern) and _follows(words[1:], prefix[1:]):
            return _short(" ".join(word.text for word in words))
    return None


def _script(text: str, prefix: tuple[str, ...], depth: int) -> str | None:
    if depth >= MAX_NESTING:
        return f"`{_short(text)}` (scripts nested too deep to read)"
    return _could_run(read_command(text), prefix, depth + 1)


def _variants(value: str) -> Iterator[str]:
    """The word, and what may be a program inside it: after `=` (`--rsh=rm`, `alias r=rm`), after a `!`."""
    yield value
    if "=" in value:
        yield value.partition("=")[2]
    if value.startswith("!"):
        yield value[1:]


def _names(word: str, program: str, *, pattern: bool) -> bool:
    name, wanted = posixpath.basename(word), posixpath.basename(program)
    if pattern:
        return could_match(wanted, name) or could_match(program, word)
    return name == wanted or word == program


def _follows(words: Sequence[Word], wanted: tuple[str, ...]) -> bool:
    """The wanted words appear among `words` in order; a word an expansion decides could be any of them."""
    rest = iter(words)
    for want in wanted:
        for word in rest:
            if word.value is None:
                return True
            if word.value == want or (word.pattern and could_match(want, word.value)):
                break
        else:
            return False
    return True


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:79] + "…"


def could_match(text: str, pattern: str) -> bool:
    """Whether the shell pattern `pattern` (a word the shell expands) could be `text`, in wcmatch's bash dialect.

    `*` crosses `/` and matches a leading dot, `[[:alpha:]]` and `[!x]` are classes, braces expand:
    a generous reading, since the callers refuse or ask on a match. A pattern wcmatch cannot read
    could be anything.
    """
    try:
        return fnmatch.fnmatch(text, pattern, flags=_WORD_FLAGS)
    except Exception:  # wcmatch's errors have no common base; an unreadable word could be anything
        return True
