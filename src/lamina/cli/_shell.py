"""A Bash command split into its simple commands, for permission rules (pure).

Not a shell: enough of POSIX quoting and Bash's operators to say which programs a command line
runs. What it cannot reason about (command and process substitution, subshells, here-documents,
unterminated quotes) is marked, so an allow rule never matches it; a deny rule still looks inside.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

_SEPARATORS: Final = ("&&", "||", "|&", ";;", ";", "|", "&", "\n")
_REDIRECT: Final = re.compile(r"(\d*|&)(>>|>\||>&|>|<<<|<<|<>|<&|<)")
_HARMLESS_TARGETS: Final = frozenset({"/dev/null", "&1", "&2", "1", "2"})
_ASSIGNMENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_SPACE: Final = " \t"


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One program a command line runs: its words (quotes removed) and what else the shell does with it."""

    words: tuple[str, ...]
    """Program and arguments, after quote removal, without leading assignments or redirections."""
    assignments: tuple[str, ...] = ()
    """`NAME=value` words before the program (they change its environment)."""
    writes: bool = False
    """A redirection reads or writes a file other than `/dev/null` (or duplicates a descriptor oddly)."""
    opaque: bool = False
    """Part of it is decided when it runs: `$(…)`, backticks, `<(…)`, a subshell, a here-document."""

    @property
    def plain(self) -> bool:
        """Only a program and its arguments: nothing an allow rule's prefix would not show."""
        return bool(self.words) and not (self.assignments or self.writes or self.opaque)


@dataclass(frozen=True, slots=True)
class CommandLine:
    """A command line's simple commands, in order, and the commands inside its substitutions."""

    commands: tuple[SimpleCommand, ...]
    nested: tuple[str, ...] = ()
    """The text of each `$(…)`, backtick or `<(…)` substitution, to be split in turn."""
    complete: bool = True
    """False when a quote or a substitution is not closed (the split is a best guess)."""


def split_command(text: str) -> CommandLine:
    """Split `text` at `&&`, `||`, `;`, `|`, `&` and newlines, outside quotes, into simple commands.

    Args:
        text: One Bash command line, as the model sent it.

    Returns:
        The simple commands (empty ones dropped), substitutions found on the way, and whether every
        quote and substitution was closed.
    """
    return _Splitter(text).run()


class _Splitter:
    """One left-to-right pass over a command line."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.commands: list[SimpleCommand] = []
        self.nested: list[str] = []
        self.complete = True
        self._reset()

    def _reset(self) -> None:
        self.words: list[str] = []
        self.assignments: list[str] = []
        self.writes = False
        self.opaque = False
        self.word: list[str] | None = None
        self.pending_redirect: str | None = None

    def run(self) -> CommandLine:
        while self.i < len(self.text):
            self._step()
        self._end_command()
        return CommandLine(tuple(self.commands), tuple(self.nested), self.complete)

    def _step(self) -> None:
        text, i = self.text, self.i
        char = text[i]
        if char in "<>" and text.startswith("(", i + 1):  # process substitution, inside a word or not
            if self.word is None:
                self.word = []
            self._substitution(i + 2, ")")
        elif self.word is None:
            self._between_words(char)
        elif char in _SPACE or char in "\n;&|()<>":
            self._end_word()
        else:
            self._in_word(char)

    def _between_words(self, char: str) -> None:
        text, i = self.text, self.i
        if char in _SPACE:
            self.i += 1
            return
        separator = next((s for s in _SEPARATORS if text.startswith(s, i)), None)
        if separator is not None:
            self._end_command()
            self.i += len(separator)
        elif char == "#":
            end = text.find("\n", i)
            self.i = len(text) if end < 0 else end
        elif char in "()":
            self.opaque = True
            self.i += 1
        elif (redirect := _REDIRECT.match(text, i)) is not None:
            self._redirect(redirect.group(2))
            self.i = redirect.end()
        else:
            self.word = []  # the next step reads the word's first character

    def _in_word(self, char: str) -> None:
        assert self.word is not None
        text, i = self.text, self.i
        if char == "\\":
            if i + 1 < len(text) and text[i + 1] != "\n":
                self.word.append(text[i + 1])
            self.i += 2
        elif char == "'":
            end = text.find("'", i + 1)
            if end < 0:
                self.complete = False
                end = len(text)
            self.word.append(text[i + 1 : end])
            self.i = end + 1
        elif char == '"':
            self._double_quoted()
        elif char == "`":
            self._substitution(i + 1, "`")
        elif text.startswith("$(", i):
            self._substitution(i + 2, ")")
        elif text.startswith("${", i):
            end = text.find("}", i)
            self.complete = self.complete and end >= 0
            stop = len(text) if end < 0 else end + 1
            self.word.append(text[i:stop])
            self.i = stop
        else:
            self.word.append(char)
            self.i += 1

    def _double_quoted(self) -> None:
        assert self.word is not None
        text, i = self.text, self.i + 1
        while i < len(text) and text[i] != '"':
            if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in '"\\$`\n':
                if text[i + 1] != "\n":
                    self.word.append(text[i + 1])
                i += 2
            elif text[i] == "`" or text.startswith("$(", i):
                self.i = i
                self._substitution(i + (1 if text[i] == "`" else 2), "`" if text[i] == "`" else ")")
                i = self.i
            else:
                self.word.append(text[i])
                i += 1
        if i >= len(text):
            self.complete = False
        self.i = i + 1

    def _substitution(self, start: int, closer: str) -> None:
        """Skip a substitution (nested parentheses counted), keep its text, mark the command opaque."""
        depth, i = 1, start
        while i < len(self.text):
            char = self.text[i]
            if char == "\\":
                i += 2
                continue
            if closer == ")" and char == "(":
                depth += 1
            elif char == closer:
                depth -= 1
                if depth == 0:
                    break
            i += 1
        if i >= len(self.text):
            self.complete = False
        self.nested.append(self.text[start:i])
        self.opaque = True
        if self.word is not None:
            self.word.append("$(…)")
        self.i = i + 1

    def _redirect(self, operator: str) -> None:
        if operator in {"<<", "<<<"}:
            self.opaque = True  # a here-document's body follows on later lines
        self.pending_redirect = operator

    def _end_word(self) -> None:
        if self.word is None:
            return
        word, self.word = "".join(self.word), None
        if self.pending_redirect is not None:
            operator, self.pending_redirect = self.pending_redirect, None
            if operator.startswith("<") or word not in _HARMLESS_TARGETS:
                self.writes = True
            return
        if not self.words and _ASSIGNMENT.match(word):
            self.assignments.append(word)
            return
        self.words.append(word)

    def _end_command(self) -> None:
        self._end_word()
        if self.pending_redirect is not None:
            self.writes = True  # a redirection with no target
        if self.words or self.assignments or self.writes or self.opaque:
            self.commands.append(
                SimpleCommand(tuple(self.words), tuple(self.assignments), writes=self.writes, opaque=self.opaque)
            )
        self._reset()
