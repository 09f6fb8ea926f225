"""Allow and deny rules for tool calls: their syntax, matching, and the rule "always" adds (pure).

A rule is `Tool` (every call of that tool), `Bash(git status:*)` (a command whose words start
with `git status`), `Bash(npm test)` (exactly that command) or `Edit(src/**)` (a call whose every
path matches the glob, relative to the workspace). A compound command is allowed only when each of
its simple commands is; a deny rule refuses a command when any part matches. A rule of a file tool
speaks for the tools that do the same to a file (`covers`). See docs/configuration.md.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final, Literal

from lamina.cli._shell import CommandLine, SimpleCommand, split_command
from lamina.errors import ConfigError

_RULE: Final = re.compile(r"(?P<tool>[A-Za-z_][A-Za-z0-9_.-]*)(?:\((?P<spec>.*)\))?", re.DOTALL)
_PLAIN_WORD: Final = re.compile(r"-{0,2}[A-Za-z][A-Za-z0-9_+:@-]*")
PREFIX_WORDS: Final = 3
"""At most this many words in the prefix "always" picks for a Bash command."""
READERS: Final = frozenset({"Read", "Grep", "Glob"})
"""The tools that read files (or list them): a rule of one is a rule of each."""
WRITERS: Final = frozenset({"Edit", "Write"})
"""The tools that change files: a rule of one is a rule of each."""


def covers(rule_tool: str, tool: str, *, deny: bool) -> bool:
    """Whether a rule written for `rule_tool` speaks for a call of `tool`.

    A Read rule speaks for Grep and Glob (and the other way round), an Edit rule for Write (and the
    other way round); a deny rule of a reader refuses Edit too, which reads the file it changes.
    Every other rule (Bash, a source's tool) speaks for its own tool only.
    """
    if rule_tool == tool:
        return True
    if rule_tool in READERS:
        return tool in READERS or (deny and tool == "Edit")
    return rule_tool in WRITERS and tool in WRITERS


@dataclass(frozen=True, slots=True)
class PermissionRule:
    """One parsed rule, as written in a config file or added by "always"."""

    tool: str
    kind: Literal["tool", "prefix", "exact", "paths"]
    """`tool`: every call; `prefix` and `exact`: a Bash command; `paths`: a glob over the call's paths."""
    value: tuple[str, ...] = ()
    """The prefix's words, the exact command (one item) or the glob (one item)."""
    origin: str = "this session"
    """The config file it came from, or `this session`."""

    @property
    def text(self) -> str:
        """The rule as it is written (`Bash(git status:*)`)."""
        match self.kind:
            case "tool":
                return self.tool
            case "prefix":
                return f"{self.tool}({' '.join(shlex.quote(word) for word in self.value)}:*)"
            case "exact" | "paths":
                return f"{self.tool}({self.value[0]})"

    def matches(self, tool: str, command: str | None, paths: Sequence[str]) -> bool:
        """Whether an allow rule covers the call: every simple command of `command`, every path.

        Args:
            tool: The tool's name.
            command: The Bash command, for Bash.
            paths: The call's paths relative to the workspace (absolute when outside it).
        """
        if not covers(self.tool, tool, deny=False):
            return False
        return _allows([self], command, paths)

    def refuses(self, tool: str, command: str | None, paths: Sequence[str]) -> bool:
        """Whether a deny rule covers the call: any simple command of `command` (substitutions too), any path."""
        if not covers(self.tool, tool, deny=True):
            return False
        if self.kind == "tool":
            return True
        if self.kind == "paths":
            return any(_glob_match(self.value[0], path) for path in paths)
        if command is None:
            return False
        if self.kind == "exact" and command.strip() == self.value[0]:
            return True
        return any(_refused_by(self, part) for part in _every_part(command))


def parse_rule(text: str, *, origin: str = "this session") -> PermissionRule:
    """Read one rule (`Read`, `Bash(git status:*)`, `Bash(make)`, `Edit(src/**)`).

    Raises:
        ConfigError: The text is not a rule (the message says what is wrong with it).
    """
    match = _RULE.fullmatch(text.strip())
    if match is None:
        raise ConfigError(f"{text!r} is not a rule: write Tool or Tool(specifier), e.g. Bash(git status:*)")
    tool, spec = match.group("tool"), match.group("spec")
    if spec is None:
        return PermissionRule(tool, "tool", origin=origin)
    spec = spec.strip()
    if not spec:
        raise ConfigError(f"{text!r}: empty specifier; write {tool} for every call")
    if tool != "Bash":
        return PermissionRule(tool, "paths", (spec,), origin=origin)
    if not spec.endswith(":*"):
        return PermissionRule(tool, "exact", (spec,), origin=origin)
    try:
        words = tuple(shlex.split(spec[:-2]))
    except ValueError as exc:
        raise ConfigError(f"{text!r}: {exc}") from None
    if not words:
        raise ConfigError(f"{text!r}: empty prefix; write Bash for every command")
    return PermissionRule(tool, "prefix", words, origin=origin)


@dataclass(frozen=True, slots=True)
class Permissions:
    """The allow and deny rules in effect; a deny rule wins over every allow rule."""

    allow: tuple[PermissionRule, ...] = ()
    deny: tuple[PermissionRule, ...] = ()

    def denying(self, tool: str, command: str | None, paths: Sequence[str]) -> PermissionRule | None:
        """The first deny rule that refuses the call, or None."""
        return next((rule for rule in self.deny if rule.refuses(tool, command, paths)), None)

    def allowing(self, tool: str, command: str | None, paths: Sequence[str]) -> tuple[PermissionRule, ...]:
        """The allow rules that cover the call (empty: none does, or a deny rule refuses it)."""
        if self.denying(tool, command, paths) is not None:
            return ()
        rules = [rule for rule in self.allow if covers(rule.tool, tool, deny=False)]
        alone = next((rule for rule in rules if _allows([rule], command, paths)), None)
        if alone is not None:
            return (alone,)
        if not _allows(rules, command, paths):
            return ()
        parts = split_command(command or "").commands  # a compound command: one prefix rule per part
        return tuple(r for r in rules if r.kind == "prefix" and any(p.words[: len(r.value)] == r.value for p in parts))

    def with_allowed(self, rules: Iterable[PermissionRule]) -> Permissions:
        """These permissions and `rules` allowed too (a rule already there is not repeated)."""
        known = {rule.text for rule in self.allow}
        added = tuple(rule for rule in rules if rule.text not in known)
        return Permissions(allow=self.allow + added, deny=self.deny)


def read_rules(files: Iterable[tuple[str, Sequence[str], Sequence[str]]]) -> Permissions:
    """The rules of several files, in order: (origin, allow texts, deny texts) each.

    Raises:
        ConfigError: A rule cannot be read; the message names the file, the list and the rule.
    """
    allow: list[PermissionRule] = []
    deny: list[PermissionRule] = []
    for origin, allowed, denied in files:
        for key, texts, into in (("allow", allowed, allow), ("deny", denied, deny)):
            for number, text in enumerate(texts):
                try:
                    into.append(parse_rule(text, origin=origin))
                except ConfigError as exc:
                    raise ConfigError(f"{origin}: permissions.{key}[{number}]: {exc}") from None
    return Permissions(allow=tuple(allow), deny=tuple(deny))


def always_rules(tool: str, command: str | None) -> tuple[PermissionRule, ...]:
    """What "always" allows for a call: the tool, or for Bash a prefix rule per simple command.

    The prefix is the program and the words after it up to the first that looks like a value
    (a path, a number, a glob, quoted text: anything but a plain word or flag), at most
    `PREFIX_WORDS` words: `git status -s` gives `git status -s`, `pytest tests/a.py` gives
    `pytest`. A command a prefix cannot cover (a substitution, a redirection to a file, leading
    assignments) gives an exact rule for the whole command.
    """
    if tool != "Bash" or command is None:
        return (PermissionRule(tool, "tool"),)
    line = split_command(command)
    if not line.complete or not line.commands or not all(part.plain for part in line.commands):
        return (PermissionRule(tool, "exact", (command.strip(),)),)
    rules: dict[tuple[str, ...], PermissionRule] = {}
    for part in line.commands:
        words = [part.words[0]]
        for word in part.words[1:PREFIX_WORDS]:
            if not _PLAIN_WORD.fullmatch(word):
                break
            words.append(word)
        rules.setdefault(tuple(words), PermissionRule(tool, "prefix", tuple(words)))
    return tuple(rules.values())


def relative_paths(paths: Iterable[Path], workspace: Path) -> tuple[str, ...]:
    """The call's paths as rules see them: relative to the workspace, absolute when outside it."""
    shown: list[str] = []
    for path in paths:
        try:
            shown.append(path.relative_to(workspace).as_posix())
        except ValueError:
            shown.append(path.as_posix())
    return tuple(shown)


def _allows(rules: Sequence[PermissionRule], command: str | None, paths: Sequence[str]) -> bool:
    if any(rule.kind == "tool" for rule in rules):
        return True
    globs = [rule.value[0] for rule in rules if rule.kind == "paths"]
    if globs and paths and all(any(_glob_match(glob, path) for glob in globs) for path in paths):
        return True
    return command is not None and _allows_command(rules, command)


def _allows_command(rules: Sequence[PermissionRule], command: str) -> bool:
    """Exactly an exact rule's command, or every simple command plain and under a prefix rule."""
    if any(rule.kind == "exact" and rule.value[0] == command.strip() for rule in rules):
        return True
    prefixes = [rule.value for rule in rules if rule.kind == "prefix"]
    if not prefixes:
        return False
    line = split_command(command)
    if not line.complete or not line.commands:
        return False
    return all(part.plain and any(part.words[: len(p)] == p for p in prefixes) for part in line.commands)


def _every_part(command: str) -> list[SimpleCommand]:
    """Every simple command of `command` and of the substitutions inside it (deny rules look at all)."""
    parts: list[SimpleCommand] = []
    pending, seen = [command], 0
    while pending and seen < 64:  # nested substitutions, bounded
        line: CommandLine = split_command(pending.pop())
        parts.extend(line.commands)
        pending.extend(line.nested)
        seen += 1
    return parts


def _refused_by(rule: PermissionRule, part: SimpleCommand) -> bool:
    if not part.words:
        return False
    # `/bin/rm -rf x` is refused by `Bash(rm:*)` too
    for words in {part.words, (PurePosixPath(part.words[0]).name, *part.words[1:])}:
        if rule.kind == "prefix" and words[: len(rule.value)] == rule.value:
            return True
        if rule.kind == "exact" and " ".join(words) == rule.value[0]:
            return True
    return False


def _glob_match(glob: str, path: str) -> bool:
    """`**` any number of folders, `*` and `?` within one name; a glob without `/` matches the name anywhere."""
    if "/" not in glob.rstrip("/"):
        glob = "**/" + glob
    return re.fullmatch(_glob_regex(glob[2:] if glob.startswith("./") else glob), path) is not None


def _glob_regex(glob: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    if glob.endswith("/"):
        out.append(".*")  # a folder: everything in it
    return "".join(out)
