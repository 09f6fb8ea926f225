"""Allow and deny rules for tool calls: their syntax, matching, and the rule "always" adds (pure).

A rule is `Tool` (every call of that tool), `Bash(git status:*)` (a command whose words start
with `git status`), `Bash(npm test)` (exactly that command) or `Edit(src/**)` (a call whose every
path matches the glob, relative to the workspace). Commands are read by `lamina.shell`: an allow
rule covers only a command the reader fully understands, each simple command plain and under a
rule; a deny rule refuses a command when any word could be its program. A rule of a file tool
speaks for the tools that do the same to a file (`covers`). See docs/configuration.md.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from lamina.errors import ConfigError
from lamina.shell import SimpleCommand, could_run, read_command
from lamina.workspace import GlobError, PathGlob, compile_glob

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
        """Whether a deny rule covers the call: any word of `command` that could be its program, any path."""
        if not covers(self.tool, tool, deny=True):
            return False
        if self.kind == "tool":
            return True
        if self.kind == "paths":
            return any(_glob_match(self.value[0], path) for path in paths)
        return command is not None and refused_because(self, command) is not None


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
        try:
            _path_glob(spec)
        except GlobError as exc:
            raise ConfigError(f"{text!r}: {exc}") from None
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
        parts = read_command(command or "").commands  # a compound command: one prefix rule per part
        return tuple(r for r in rules if r.kind == "prefix" and any(_starts_with(p, r.value) for p in parts))

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
    """What "always" allows for a call: the tool, or for Bash a prefix rule of a simple command, else the command.

    The prefix is the program and the words after it up to the first that looks like a value
    (a path, a number, a glob, quoted text: anything but a plain word or flag), at most
    `PREFIX_WORDS` words: `git status -s` gives `git status -s`, `pytest tests/a.py` gives
    `pytest`. A command a prefix cannot cover (a substitution, a redirection to a file, leading
    assignments) and a loop or compound command (`a && b`, `a | b`) give one exact rule for the
    whole command: a person saves what they saw, never a keyword's prefix.
    """
    if tool != "Bash" or command is None:
        return (PermissionRule(tool, "tool"),)
    reading = read_command(command)
    parts = reading.commands
    single = len(parts) == 1  # a loop or a compound command (`&&`, `|`, `;`) is saved whole, as written
    if not (reading.understood and single and parts[0].plain and parts[0].words[0].literal):
        return (PermissionRule(tool, "exact", (command.strip(),)),)
    words = [parts[0].words[0].value or ""]
    for word in parts[0].words[1:PREFIX_WORDS]:
        if not (word.literal and word.value is not None and _PLAIN_WORD.fullmatch(word.value)):
            break
        words.append(word.value)
    return (PermissionRule(tool, "prefix", tuple(words)),)


def refused_because(rule: PermissionRule, command: str) -> str | None:
    """What in `command` a Bash deny rule refuses (`rm x`, `$p` …), or None when nothing could be its program.

    A prefix rule's program, then its other words in order (not necessarily next); an exact rule
    refuses its whole command and, read as words, the same as a prefix rule.
    """
    if rule.kind == "exact" and command.strip() == rule.value[0]:
        return _clip(command.strip())
    if rule.kind == "prefix":
        words = rule.value
    elif rule.kind == "exact":
        try:
            words = tuple(shlex.split(rule.value[0]))
        except ValueError:
            words = tuple(rule.value[0].split())
    else:
        return None
    return could_run(read_command(command), words) if words else None


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
    """Exactly an exact rule's command, or a command the reader fully understands, every part plain and covered."""
    if any(rule.kind == "exact" and rule.value[0] == command.strip() for rule in rules):
        return True
    prefixes = [rule.value for rule in rules if rule.kind == "prefix"]
    if not prefixes:
        return False
    reading = read_command(command)
    if not reading.understood or not reading.commands:
        return False
    return all(part.plain and any(_starts_with(part, p) for p in prefixes) for part in reading.commands)


def _starts_with(part: SimpleCommand, prefix: tuple[str, ...]) -> bool:
    """The command's first words are the prefix's, each literal (no expansion, glob or braces decides them)."""
    if len(part.words) < len(prefix):
        return False
    return all(word.literal and word.value == wanted for word, wanted in zip(part.words, prefix, strict=False))


def _clip(text: str) -> str:
    return text if len(text) <= 80 else text[:79] + "…"


def _glob_match(glob: str, path: str) -> bool:
    """The rule's glob over one path: a glob without `/` matches the name in any folder; `dir/` all below it."""
    return _path_glob(glob).matches(path)


@functools.lru_cache(maxsize=256)
def _path_glob(glob: str) -> PathGlob:
    """The rule's glob in Lamina's one dialect (`lamina.workspace.compile_glob`), read as a path rule.

    Raises:
        GlobError: The glob cannot be used.
    """
    if glob.startswith("./"):
        glob = glob[2:]
    if "/" not in glob.rstrip("/"):
        glob = "**/" + glob
    if glob.endswith("/"):
        glob += "**"  # a folder: everything in it
    return compile_glob(glob)
