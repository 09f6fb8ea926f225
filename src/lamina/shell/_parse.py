"""The shell reader: a Bash command line through tree-sitter-bash into simple commands (pure).

Every node type is either understood (a list, a pipeline, a simple command, quoting, `$name`,
`${name}`, a redirection) or recorded as a problem, and walked all the same so that no command
inside it is missed. See docs/security.md, "The shell reader and protected paths".
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Final

from lamina.shell._syntax import CommandReading, Redirect, SimpleCommand, Word

if TYPE_CHECKING:
    from tree_sitter import Language, Node, Parser

MAX_DEPTH: Final = 64
"""Nodes nested deeper than this are not read: the command is then a parse error (fail closed)."""
_GLOB: Final = re.compile(r"[*?\[]")
_BRACES: Final = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")
_SIMPLE: Final = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]|[@*#?$!-])")
_BRACED: Final = re.compile(r"\$\{(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])\}")
_UNESCAPED_QUOTE: Final = re.compile(r"(?<!\\)(?:\\\\)*['\"`$]")
_REDIRECTS: Final = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_OPERATORS: Final = frozenset({">", ">>", ">|", "&>", "&>>", "<", "<>", ">&", "<&", ">&-", "<&-"})
_KEYWORDS: Final = {
    "if_statement": "the keyword `if`",
    "while_statement": "the keyword `while` or `until`",
    "for_statement": "the keyword `for` or `select`",
    "c_style_for_statement": "the keyword `for ((…))`",
    "case_statement": "the keyword `case`",
    "test_command": "a test `[[ … ]]` or `(( … ))`",
    "negated_command": "`!` before a command",
    "subshell": "a subshell `( … )`",
    "compound_statement": "a group `{ …; }`",
    "function_definition": "a function definition",
    "declaration_command": "`declare`, `export`, `local`, `readonly` or `typeset`",
    "unset_command": "`unset`",
}
_WORDS: Final = frozenset(
    {
        "word",
        "number",
        "raw_string",
        "string",
        "ansi_c_string",
        "translated_string",
        "concatenation",
        "simple_expansion",
        "expansion",
        "command_substitution",
        "process_substitution",
        "arithmetic_expansion",
        "brace_expression",
        "extglob_pattern",
    }
)
_ASCII: Final = bytes(range(128)) + b"x" * 128
"""Maps every byte of a non-ASCII character to `x`, the rest to itself."""


@functools.lru_cache(maxsize=512)
def read_command(text: str) -> CommandReading:
    """Read a Bash command line: every simple command in it, and what the reader does not understand.

    Args:
        text: The command, as the model sent it to the Bash tool.

    Returns:
        The reading (cached: the same text gives the same object).
    """
    source = text.encode("utf-8", "surrogatepass")
    # tree-sitter-bash's scanner sometimes crashes the process on non-ASCII text (`{` and a character
    # beyond U+FFFF): it parses a copy where each byte of such a character is `x`. Bash's syntax is
    # ASCII, so the tree is the same; every word is then read from the text itself, at the same offsets.
    tree = _new_parser().parse(source.translate(_ASCII))
    reader = _Reader(source)
    reader.walk(tree.root_node)
    if "\x00" in text:
        reader.problem("a NUL character", error=True)
    if tree.root_node.has_error:
        reader.problem("text tree-sitter-bash cannot parse", error=True)
    commands = tuple(sorted(reader.commands, key=lambda command: command.start))
    return CommandReading(text, commands, tuple(reader.problems), parse_error=reader.error)


@functools.cache
def _language() -> Language:
    """The Bash grammar, loaded once (tree-sitter is imported on the first command read)."""
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Language(tree_sitter_bash.language())


def _new_parser() -> Parser:
    """A parser of its own for each command (under a microsecond; nothing carries from one to the next)."""
    import tree_sitter

    return tree_sitter.Parser(_language())


class _Word:
    """A word being put together: its value so far (None once unknown), and its shape for patterns."""

    def __init__(self) -> None:
        self.parts: list[str] | None = []
        self.shape: list[str] = []
        """The unquoted characters as they are, each quoted one as a placeholder."""

    def quoted(self, text: str) -> None:
        if self.parts is not None:
            self.parts.append(text)
        self.shape.append("\x00" * len(text))

    def unquoted(self, text: str) -> None:
        if self.parts is not None:
            self.parts.append(text)
        self.shape.append(text)

    def unknown(self) -> None:
        self.parts = None
        self.shape.append("\x00")

    def done(self, text: str) -> Word:
        shape = "".join(self.shape)
        pattern = bool(_GLOB.search(shape) or _BRACES.search(shape) or shape.startswith("~"))
        return Word(text, None if self.parts is None else "".join(self.parts), pattern)


class _Reader:
    """One walk over a syntax tree, collecting simple commands and problems."""

    def __init__(self, source: bytes) -> None:
        self.source = source
        self.commands: list[SimpleCommand] = []
        self.problems: list[str] = []
        self.error = False
        self.nesting = 0
        self.depth = 0

    def text(self, node: Node) -> str:
        return self.gap(node.start_byte, node.end_byte)

    def gap(self, start: int, end: int) -> str:
        """The text between two offsets; one inside a character means the tree is not bash's: a parse error."""
        try:
            return self.source[start:end].decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            self.problem("a node boundary inside a character", error=True)
            return self.source[start:end].decode("utf-8", "replace")

    def problem(self, what: str, *, error: bool = False) -> None:
        self.error = self.error or error
        if what not in self.problems:
            self.problems.append(what)

    def walk(self, node: Node) -> None:
        """Read a statement (or any node): its simple commands, and every command nested in it."""
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                self.problem("commands nested too deep to read", error=True)
                return
            self._walk(node)
        finally:
            self.depth -= 1

    def _walk(self, node: Node) -> None:
        kind = node.type
        if kind in ("program", "list", "pipeline", "comment"):
            self.walk_children(node)
        elif kind == "command":
            self.command(node, ())
        elif kind == "redirected_statement":
            self.redirected(node)
        elif kind in ("variable_assignment", "variable_assignments"):
            found = [node] if kind == "variable_assignment" else list(node.named_children)
            words = tuple(self.assignment(child) for child in found if child.type == "variable_assignment")
            self.add(SimpleCommand((), words, start=node.start_byte))
        elif kind in ("declaration_command", "unset_command"):
            self.problem(_KEYWORDS[kind])
            self.declaration(node)
        elif kind in _KEYWORDS:
            arithmetic = kind == "compound_statement" and self.text(node).startswith("((")
            self.problem("an arithmetic command `(( … ))`" if arithmetic else _KEYWORDS[kind])
            self.nested(node)
        elif kind in _WORDS:
            self.word([node])
        elif kind == "ERROR":
            self.problem("text tree-sitter-bash cannot parse", error=True)
            self.nested(node)
        else:  # the parts of keywords and tests (do_group, case_item, binary_expression, heredoc_body, …)
            self.walk_children(node)

    def walk_children(self, node: Node) -> None:
        for child in node.named_children:
            self.walk(child)

    def nested(self, node: Node) -> None:
        self.nesting += 1
        try:
            self.walk_children(node)
        finally:
            self.nesting -= 1

    def add(self, command: SimpleCommand) -> None:
        if self.nesting:
            command = SimpleCommand(command.words, command.assignments, command.redirects, True, command.start)
        self.commands.append(command)

    def redirected(self, node: Node) -> None:
        body = node.child_by_field_name("body")
        redirects: list[Redirect] = []
        extra: list[Node] = []
        for child in node.children:
            if child.type in _REDIRECTS:
                redirect, more = self.redirect(child)
                redirects.append(redirect)
                extra.extend(more)
        if body is not None and body.type == "command":
            self.command(body, tuple(redirects), extra)
            return
        before = len(self.commands)
        if body is not None:
            self.walk(body)
        words = tuple(self.word(group) for group in self.groups(extra))
        # tree-sitter hangs `a && b >f` on the list: bash gives the redirections to the last element only
        # (`b`), and to every command of a group or keyword (`{ a; b; } >f`, `! bash <<EOF`)
        last = body
        while last is not None and last.type in ("list", "pipeline") and last.named_children:
            last = [child for child in last.named_children if child.type != "comment"][-1]
        start, end = (last.start_byte, last.end_byte) if last is not None else (0, 0)
        inside = [i for i in range(before, len(self.commands)) if start <= self.commands[i].start < end]
        if words or not inside:
            self.add(SimpleCommand(words, (), tuple(redirects), start=node.start_byte))
        for i in inside:
            found = self.commands[i]
            self.commands[i] = replace(found, redirects=found.redirects + tuple(redirects))

    def command(self, node: Node, redirects: tuple[Redirect, ...], extra: Sequence[Node] = ()) -> None:
        assignments: list[Word] = []
        pieces: list[Node] = list(extra)
        found = list(redirects)
        for child in node.children:
            kind = child.type
            if kind == "variable_assignment" and not pieces:
                assignments.append(self.assignment(child))
            elif kind in _REDIRECTS:
                redirect, more = self.redirect(child)
                found.append(redirect)
                pieces.extend(more)
            elif kind == "command_name":
                pieces.extend(child.children)
            elif kind != "comment":
                pieces.append(child)
        words = tuple(self.word(group) for group in self.groups(sorted(pieces, key=lambda n: n.start_byte)))
        if words and words[0].value == "eval":
            self.problem("`eval`")
        self.add(SimpleCommand(words, tuple(assignments), tuple(found), start=node.start_byte))

    def declaration(self, node: Node) -> None:
        words: list[Word] = []
        for child in node.children:
            if child.type == "variable_assignment":
                words.append(self.assignment(child))
            elif child.is_named:
                words.append(self.word([child]) if child.type in _WORDS else Word(self.text(child), self.text(child)))
            else:  # the keyword itself
                words.append(Word(child.type, child.type))
        self.add(SimpleCommand(tuple(words), start=node.start_byte))

    def groups(self, pieces: Sequence[Node]) -> Iterator[list[Node]]:
        """The pieces bash joins into one word: nothing but line continuations between them."""
        group: list[Node] = []
        for piece in pieces:
            if group and self.gap(group[-1].end_byte, piece.start_byte).replace("\\\n", "") != "":
                yield group
                group = []
            group.append(piece)
        if group:
            yield group

    def redirect(self, node: Node) -> tuple[Redirect, list[Node]]:
        """The redirection, and the words after its target (tree-sitter hangs a command's later arguments there)."""
        descriptor_node = node.child_by_field_name("descriptor")
        descriptor = None if descriptor_node is None else self.text(descriptor_node)
        if node.type == "heredoc_redirect":
            self.problem("a here-document")
            operator, words = "<<", []
            for child in node.children:
                if child.type in ("<<", "<<-"):
                    operator = child.type
                elif child.type == "heredoc_body":
                    self.nested(child)
                elif child.type in _WORDS:
                    words.append(child)  # `cat <<EOF more`: the command's next words hang here
                elif child.type not in ("heredoc_start", "heredoc_end") and child.is_named:
                    self.walk(child)  # `cat <<EOF | rm x`: the rest of the line hangs here
            return Redirect(operator, None, descriptor, self.heredoc_body(node)), words
        if node.type == "herestring_redirect":
            self.problem("a here-string `<<<`")
            pieces = [child for child in node.named_children if child.type != "file_descriptor"]
            target = self.word(pieces) if pieces else None
            return Redirect("<<<", target, descriptor), []
        operator = next((child.type for child in node.children if child.type in _OPERATORS), "?")
        groups = list(self.groups(node.children_by_field_name("destination")))
        target = self.word(groups[0]) if groups else None
        return Redirect(operator, target, descriptor), [piece for group in groups[1:] for piece in group]

    def heredoc_body(self, node: Node) -> str:
        """The here-document's lines as written, from the line after the operator to the delimiter.

        Taken from the text, not from tree-sitter's nodes: it reads a body that starts with a
        backslash as a word of the command line.
        """
        end = next((child.start_byte for child in node.children if child.type == "heredoc_end"), len(self.source))
        start = self.source.find(b"\n", node.start_byte, end)
        return "" if start < 0 else self.gap(start + 1, end)

    def assignment(self, node: Node) -> Word:
        """`NAME=value` as one word: its value is the whole text once the value part is known."""
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        built = _Word()
        built.unquoted(self.text(node)[: (value.start_byte if value is not None else node.end_byte) - node.start_byte])
        if value is not None and value.type == "array":
            self.problem("an array assignment")
            self.walk_children(value)
            built.unknown()
        elif value is not None:
            self.piece(value, built)
        if name is not None and name.type != "variable_name":
            self.problem("an assignment to an array element")
        return built.done(self.text(node))

    def word(self, pieces: Sequence[Node]) -> Word:
        built = _Word()
        for piece in pieces:
            self.piece(piece, built)
        return built.done(self.gap(pieces[0].start_byte, pieces[-1].end_byte))

    def piece(self, node: Node, built: _Word) -> None:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                self.problem("commands nested too deep to read", error=True)
                built.unknown()
                return
            self._piece(node, built)
        finally:
            self.depth -= 1

    def _piece(self, node: Node, built: _Word) -> None:
        kind, text = node.type, self.text(node)
        if kind in ("word", "number", "brace_expression", "extglob_pattern"):
            self.unquoted(text, built)
        elif kind == "raw_string" and len(text) >= 2 and text[0] == text[-1] == "'":
            built.quoted(text[1:-1])
        elif kind == "string":
            self.double_quoted(node, built)
        elif kind == "ansi_c_string" and "\\" not in text and text.startswith("$'"):
            built.quoted(text[2:-1])
        elif kind == "concatenation":
            for child in node.children:
                self.piece(child, built)
        elif kind == "variable_assignment":
            assigned = self.assignment(node)
            built.unknown() if assigned.value is None else built.unquoted(assigned.value)
        elif kind in ("simple_expansion", "expansion"):
            if not (_SIMPLE if kind == "simple_expansion" else _BRACED).fullmatch(text):
                self.problem("a parameter expansion with an operator (`${x:-…}`, `${x[…]}`, `${!x}`, …)")
                self.nested(node)
            built.unknown()
        else:
            self.problem(_PIECES.get(kind, f"`{text[:20]}` ({kind})"), error=kind == "ERROR")
            self.nested(node)
            built.unknown()

    def unquoted(self, text: str, built: _Word) -> None:
        if _UNESCAPED_QUOTE.search(text):  # quoting or an expansion tree-sitter left inside a word: not ours to guess
            self.problem(f"quoting the reader cannot place in `{text[:20]}`", error=True)
            built.unknown()
            return
        i = 0
        while i < len(text):
            if text[i] == "\\":
                if text[i + 1 : i + 2] not in ("\n", ""):
                    built.quoted(text[i + 1])
                i += 2
            else:
                j = text.find("\\", i)
                j = len(text) if j < 0 else j
                built.unquoted(text[i:j])
                i = j

    def double_quoted(self, node: Node, built: _Word) -> None:
        start, end = node.start_byte + 1, node.end_byte - 1
        for child in node.named_children:
            self.dq_literal(self.gap(start, child.start_byte), built)
            if child.type == "string_content":
                self.dq_literal(self.text(child), built)
            else:
                self.piece(child, built)
            start = child.end_byte
        self.dq_literal(self.gap(start, end), built)

    def dq_literal(self, text: str, built: _Word) -> None:
        """Text between double quotes: a backslash escapes only `$`, a backquote, `"`, itself and a newline."""
        out: list[str] = []
        i = 0
        while i < len(text):
            if text[i] == "\\" and text[i + 1 : i + 2] in ('"', "\\", "$", "`", "\n"):
                if text[i + 1] != "\n":
                    out.append(text[i + 1])
                i += 2
            else:
                out.append(text[i])
                i += 1
        if out:
            built.quoted("".join(out))


_PIECES: Final = {
    "command_substitution": "command substitution `$(…)` or backquotes",
    "process_substitution": "process substitution `<(…)` or `>(…)`",
    "arithmetic_expansion": "arithmetic expansion `$((…))`",
    "ansi_c_string": "ANSI-C quoting `$'…'` with escapes",
    "translated_string": 'locale quoting `$"…"`',
    "$": 'a `$` the reader cannot place (locale quoting `$"…"`?)',
    "ERROR": "text tree-sitter-bash cannot parse",
}
