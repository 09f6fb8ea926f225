"""Required reads: files the model must read before other tools run, enforced as pipeline rules (I/O: path resolution).

A skill mention registers its `SKILL.md`, a source its `guide.md`, as a `Requirement` with the
`PrerequisiteManager`, whose `rule()` denies calls while a requirement is unmet and marks files
read after a successful read. `NearestContextFileRule` refuses Edit and Write until the governing
context files were read. See docs/tools.md, "Required reads".
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from lamina.errors import UsageError
from lamina.shell import file_uses, read_command
from lamina.tools._base import ToolOutput
from lamina.tools._bash import BashInput
from lamina.tools._read import ReadInput
from lamina.tools._rules import Allow, BoundCall, Deny, Rule, Verdict

_EXIT_CODE: Final = re.compile(r"\[exit code (-?\d+)[^\]\n]*\]\s*\Z")
"""How the Bash tool ends its output; a read by Bash counts only with exit code 0."""
_HOME: Final = re.compile(r"~/[^*?\[{]*")
"""A path from the home folder, with no glob or braces: the one pattern a required read may name."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """A file the model must read: before anything else (blocking), or before the calls it gates."""

    path: Path
    """The file, absolute and resolved (`~`, `..` and symlinks followed)."""
    reason: str
    """Why it is required, as the model is told: `skill 'deploy'`, `the github source`."""
    key: str
    """Identifies the requirement (`skill:deploy`, `guide:github`); registering a key again replaces it."""
    applies_to: Callable[[BoundCall], bool] | None = None
    """None for a blocking requirement; else the calls denied while the file is unread in the current window."""

    @property
    def blocking(self) -> bool:
        return self.applies_to is None


@dataclass(frozen=True, slots=True)
class PrerequisiteNotice:
    """A call that lenient mode let through although a requirement was unmet; the owner must show it."""

    requirement: Requirement
    call_id: str
    tool: str
    denials: int
    """How many calls this requirement had denied before lenient mode gave way."""
    kind: Literal["bypassed"] = "bypassed"

    @property
    def message(self) -> str:
        return (
            f"{self.tool} ran without {self.requirement.path} having been read ({self.requirement.reason} "
            f"requires it), after {self.denials} denied calls."
        )


class PrerequisiteManager:
    """Tracks required reads for one session and what was read in the current context window."""

    def __init__(
        self,
        *,
        strict: bool = True,
        stuck_after: int = 3,
        on_stuck: Callable[[Requirement, int], None] | None = None,
    ) -> None:
        """Set the enforcement.

        Args:
            strict: Keep denying however often the model tries; if False, let calls through
                (each leaving a notice) once a requirement has denied `stuck_after` calls.
            stuck_after: Denials of one requirement after which the agent counts as stuck.
            on_stuck: Called once per requirement when it gets stuck, with the denial count.

        Raises:
            UsageError: `stuck_after` is below 1.
        """
        if stuck_after < 1:
            raise UsageError(f"stuck_after must be 1 or more, got {stuck_after}")
        self.strict = strict
        self.stuck_after = stuck_after
        self._on_stuck = on_stuck
        self._requirements: dict[str, Requirement] = {}
        self._discharged: set[str] = set()
        """Keys of blocking requirements met since they were registered."""
        self._read: set[Path] = set()
        self._denials: dict[str, int] = {}
        self._stuck: set[str] = set()
        self._notices: list[PrerequisiteNotice] = []

    def require(
        self,
        path: str | os.PathLike[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        reason: str,
        key: str,
        applies_to: Callable[[BoundCall], bool] | None = None,
    ) -> Requirement:
        """Register a required read and return it; a blocking one for a file already read is met at once.

        Args:
            path: The file; a relative path is taken from `cwd`, the session's working directory
                (never the process's).
            cwd: The session's working directory; needed only when `path` is relative.
            reason: Why the file is required, as the model is told.
            key: Identifies the requirement; registering the same key again replaces it.
            applies_to: None for a blocking requirement; else which calls it gates.

        Raises:
            UsageError: `path` is relative and no `cwd` was given, or it cannot be resolved.
        """
        requirement = Requirement(_resolve(path, cwd), reason, key, applies_to)
        self._requirements[key] = requirement
        self._discharged.discard(key)
        if requirement.blocking and requirement.path in self._read:
            self._met(key)
        return requirement

    def pending(self) -> tuple[Requirement, ...]:
        """The unmet requirements, in registration order."""
        return tuple(r for r in self._requirements.values() if not self._is_met(r))

    def has_read(self, path: str | os.PathLike[str]) -> bool:
        """Whether the file at the absolute `path` was read in the current context window."""
        try:
            return _resolve(path, None) in self._read
        except UsageError:
            return False

    def reset(self) -> None:
        """A compaction happened: forget every read, so gated requirements are unmet again.

        Blocking requirements already met stay discharged; the owner registers again those whose
        files the model must read anew (the skills still in use).
        """
        self._read.clear()

    def hear(self, call: BoundCall, output: ToolOutput) -> None:
        """Count what a call the pipeline allowed read, if it succeeded (the rule's `after`; also a replay).

        A session that moves to another branch replays the reads of the branch's own context
        window here, after `reset`, so the reads met are those of the branch, not of the path left.
        """
        if output.is_error:
            return
        if isinstance(call.input, BashInput):
            exit_code = _EXIT_CODE.search(output.content)
            if exit_code is None or exit_code.group(1) != "0":
                return
        for path in _reads(call, exempt_only=False):
            # A Bash pipeline can exit 0 although `cat` failed; a read of a file that is not there reads nothing.
            if path.is_file():
                self._heard_read(path)

    def forget(self, key: str) -> None:
        """Drop the requirement `key` (a skill invoked only on a branch the session left); unknown: nothing."""
        self._requirements.pop(key, None)
        self._discharged.discard(key)
        self._denials.pop(key, None)
        self._stuck.discard(key)

    def denials(self, key: str) -> int:
        """How many calls the requirement `key` denied since it was last met."""
        return self._denials.get(key, 0)

    def notices(self) -> tuple[PrerequisiteNotice, ...]:
        """Calls lenient mode let through despite an unmet requirement, oldest first."""
        return tuple(self._notices)

    def rule(self) -> Rule:
        """The pipeline rule that enforces the requirements and hears the reads."""
        return _PrerequisiteRule(self)

    def _is_met(self, requirement: Requirement) -> bool:
        if requirement.blocking:
            return requirement.key in self._discharged
        return requirement.path in self._read

    def _met(self, key: str) -> None:
        self._discharged.add(key)
        self._denials.pop(key, None)
        self._stuck.discard(key)

    def _heard_read(self, path: Path) -> None:
        self._read.add(path)
        for requirement in self._requirements.values():
            if requirement.path == path:
                if requirement.blocking:
                    self._met(requirement.key)
                else:
                    self._denials.pop(requirement.key, None)
                    self._stuck.discard(requirement.key)

    def _check(self, call: BoundCall) -> Verdict:
        unmet = [
            r
            for r in self._requirements.values()
            if not self._is_met(r) and (r.applies_to is None or r.applies_to(call))
        ]
        if not unmet:
            return Allow()
        targets = _reads(call, exempt_only=True)
        if targets and any(r.path in targets for r in self.pending()):
            return Allow()
        enforced: list[Requirement] = []
        for requirement in unmet:
            count = self._denials.get(requirement.key, 0)
            if not self.strict and count >= self.stuck_after:
                self._notices.append(PrerequisiteNotice(requirement, call.call_id, call.name, count))
                continue
            enforced.append(requirement)
            self._denials[requirement.key] = count + 1
            if count + 1 >= self.stuck_after and requirement.key not in self._stuck:
                self._stuck.add(requirement.key)
                if self._on_stuck is not None:
                    self._on_stuck(requirement, count + 1)
        if not enforced:
            return Allow()
        return Deny(_denial(enforced, call))


class _PrerequisiteRule(Rule):
    """Denies calls while required reads are missing; hears successful reads in `after`."""

    def __init__(self, manager: PrerequisiteManager) -> None:
        self._manager = manager

    @property
    def name(self) -> str:
        return "prerequisites"

    async def check(self, call: BoundCall) -> Verdict:
        return self._manager._check(call)

    async def after(self, call: BoundCall, output: ToolOutput) -> None:
        self._manager.hear(call, output)


class NearestContextFileRule(Rule):
    """Refuses Edit and Write until every context file governing the target path was read in this window.

    `nearest(path)` returns the governing files (`AGENTS.md`, `CLAUDE.md`), shallowest first; with a
    `ContextFileFinder` that is `lambda path: [f.path for f in finder.nearest(cwd, path)]`. Reads are
    heard by the manager's own rule, which must be in the same pipeline.
    """

    def __init__(
        self,
        manager: PrerequisiteManager,
        nearest: Callable[[Path], Sequence[Path]],
        *,
        tools: Collection[str] = ("Edit", "Write"),
    ) -> None:
        self._manager = manager
        self._nearest = nearest
        self._tools = frozenset(tools)

    @property
    def name(self) -> str:
        return "nearest_context_file"

    async def check(self, call: BoundCall) -> Verdict:
        if call.name not in self._tools:
            return Allow()
        unread: list[Path] = []
        for target in call.paths:
            for governing in self._nearest(target):
                if not self._manager.has_read(governing) and governing not in unread:
                    unread.append(governing)
        if not unread:
            return Allow()
        files = ", ".join(str(path) for path in unread)
        shown = ", ".join(call.context.display(path) for path in call.paths)
        return Deny(
            f"Read {files} first: {'it holds' if len(unread) == 1 else 'they hold'} the project's instructions "
            f"for {shown}. {call.name} is blocked there until then."
        )


def _resolve(path: str | os.PathLike[str], cwd: str | os.PathLike[str] | None) -> Path:
    given = Path(os.path.expanduser(path))
    if not given.is_absolute():
        if cwd is None:
            raise UsageError(f"the required file {str(path)!r} is relative; give the session's cwd to resolve it")
        given = Path(os.path.expanduser(cwd)) / given
    try:
        return given.resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise UsageError(f"cannot resolve the required file {str(path)!r}: {exc}") from None


def _denial(unmet: Sequence[Requirement], call: BoundCall) -> str:
    blocking = any(r.blocking for r in unmet)
    after = "Other tools are blocked until then." if blocking else f"{call.name} is blocked until then."
    if len(unmet) == 1:
        (only,) = unmet
        return f"Read {only.path} first: {only.reason} requires it. {after}"
    lines = "\n".join(f"- {r.path} ({r.reason} requires it)" for r in unmet)
    return f"Read these files first:\n{lines}\n{after}"


def _reads(call: BoundCall, *, exempt_only: bool) -> frozenset[Path]:
    """The files `call` reads in full or in part: the Read tool's path, or what a Bash command's readers open.

    With `exempt_only`, a Bash command counts only if every simple command in it is a reader that
    cannot change anything (no `awk`, no output redirection, no substitution), so letting it past a
    blocking requirement lets nothing else through.
    """
    if isinstance(call.input, ReadInput):
        return (
            frozenset(call.paths[:1]) if call.paths else frozenset({_resolve_from(call.context.cwd, call.input.path)})
        )
    if isinstance(call.input, BashInput):
        return _bash_reads(call.input.command, call.context.cwd, exempt_only=exempt_only)
    return frozenset()


def _bash_reads(command: str, cwd: Path, *, exempt_only: bool) -> frozenset[Path]:
    """The files whose text a Bash command shows (`cat`, `head`, `sed -n 1,40p`, `grep`), as the shell reader sees them.

    With `exempt_only`, nothing unless the command only reads (`FileUses.only_reads`).
    """
    uses = file_uses(read_command(command))
    if exempt_only and not uses.only_reads:
        return frozenset()
    return frozenset(
        _resolve_from(cwd, read.path)
        for read in uses.reads
        if read.shows_text and read.folder_known and (not read.pattern or _HOME.fullmatch(read.path))
    )


def _resolve_from(folder: Path, raw: str) -> Path:
    """`raw` resolved from `folder`; an unresolvable path becomes one that matches no file."""
    given = Path(os.path.expanduser(raw))
    try:
        return (folder / given).resolve()
    except (OSError, RuntimeError, ValueError):
        return folder / given
