"""What pre-tool-use rules answer, and the `Rule` interface they implement (pure).

A rule sees a call with its validated input and answers `Allow()`, `Deny(message)`,
`Ask(question)` or `Rewrite(input)`; after an allowed call ran, its `after(call, output)` hears how
it went. See docs/tools.md, "Rules".
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    from lamina.tools._base import Tool, ToolContext, ToolOutput


@dataclass(frozen=True, slots=True)
class Allow:
    """No objection: the call goes on to the next check."""

    kind: Literal["allow"] = "allow"


@dataclass(frozen=True, slots=True)
class Deny:
    """The call must not run; `message` is what the model is told, as an error result."""

    message: str
    by: str = "rule"
    """Which check decided: `lookup`, `validation`, `path_bounds`, `permission_mode`, `user` or
    `rule:<name>` (the pipeline fills this in; a rule need not)."""
    kind: Literal["deny"] = "deny"


@dataclass(frozen=True, slots=True)
class Ask:
    """The call may run only if the user approves; `question` is put to them."""

    question: str
    kind: Literal["ask"] = "ask"


@dataclass(frozen=True, slots=True)
class Rewrite:
    """Go on with a different input: a validated input of the tool's type, or a raw mapping to validate."""

    input: object
    kind: Literal["rewrite"] = "rewrite"


Verdict: TypeAlias = Allow | Deny | Ask | Rewrite
"""What a rule answers about one call."""


@dataclass(frozen=True, slots=True)
class BoundCall:
    """One tool call as rules see it: validated input and the paths it touches."""

    call_id: str
    name: str
    input: Any
    """The validated input (after any earlier `Rewrite`)."""
    tool: Tool[Any]
    paths: tuple[Path, ...]
    """The paths the call touches, absolute and resolved (symlinks followed), all inside the allowed roots."""
    context: ToolContext
    """The session context the call runs in (cwd, roots, mode)."""
    named: tuple[Path, ...] = ()
    """The same paths as the call names them: absolute, links not resolved (a deny rule looks at both)."""


@dataclass(frozen=True, slots=True)
class PermissionRequest:
    """A question put to the user through the pipeline's `ask` callback."""

    call: BoundCall
    """The call with its final input: every rule has run, so this is exactly what would execute."""
    question: str
    asked_by: str
    """`permission_mode` (ask mode, a tool that is not read-only), `protected_path` or `rule:<name>`."""
    protected: tuple[Path, ...] = ()
    """The protected paths the call writes (`.git/config`, `.lamina/…`): the user must approve this call
    itself, naming them; no allow rule or earlier "always" answers for it."""


AskCallback: TypeAlias = Callable[[PermissionRequest], Awaitable[Allow | Deny]]
"""Puts a question to the user; answers `Allow()` or `Deny(message)` (the message reaches the model)."""


class Rule(ABC):
    """A pluggable pre-tool-use check; subclasses implement `check` and may implement `after`."""

    @property
    def name(self) -> str:
        """Shown in decisions (`rule:<name>`); the class name unless overridden."""
        return type(self).__name__

    @abstractmethod
    async def check(self, call: BoundCall) -> Verdict:
        """The rule's verdict on `call` (input already validated, paths inside the allowed roots)."""

    def hides(self, call: BoundCall, path: Path) -> bool:
        """Whether `path`, a file `call` meets on its way (a Grep match, a Glob result), is left out of its output.

        `check` saw only the paths the call names (a folder, for Grep); this is asked for each file
        inside it, absolute (and resolved too, for a file Grep opened), from the tool's thread: keep
        it quick and free of shared state. Hides nothing by default.
        """
        return False

    async def after(self, call: BoundCall, output: ToolOutput) -> None:  # noqa: B027 - an optional hook
        """Called after an allowed call ran; `output.is_error` tells whether it succeeded. Does nothing by default."""
