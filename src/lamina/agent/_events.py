"""What a turn reports while it runs, and what it did (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from lamina.agent._activation import SkillWarning
from lamina.context import TurnContext
from lamina.engine import Plan
from lamina.providers import ReasoningDelta, RetryNotice, TextDelta
from lamina.session import Reasoning, Usage


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """A tool call the pipeline is about to run."""

    call_id: str
    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolProgress:
    """A running tool call's report: `""` when it starts (after any approval), then its output as it comes.

    Only a tool that streams its output reports more (Bash: stdout and stderr, decoded, in the chunks
    the process wrote them).
    """

    call_id: str
    name: str
    output: str


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """A tool call that ran: its result as the model sees it, and where its full output was saved, if anywhere."""

    call_id: str
    name: str
    is_error: bool
    content: str
    full_output_path: str | None


@dataclass(frozen=True, slots=True)
class Thinking:
    """The model's reasoning in one model call, whole, when the call completed.

    Its readable pieces came first, as `ReasoningDelta`s; this names every block, those with
    nothing to read too (redacted thinking, an encrypted item without a summary, thinking the
    provider did not show), so a front end can say that the model reasoned.
    """

    index: int
    """The model call's number in the turn, as `ModelCallFinished.index`."""
    blocks: tuple[Reasoning, ...]
    """The blocks as the provider returned them, in order (as the log keeps them)."""
    tokens: int = 0
    """The reasoning tokens the provider reported (`Usage.reasoning`; 0 when it reports none)."""

    @property
    def text(self) -> str:
        """What a person can read: each block's text or summaries, blocks apart by a blank line."""
        return "\n\n".join(t for b in self.blocks if (t := b.readable))

    @property
    def hidden(self) -> int:
        """How many blocks have nothing to read (redacted, encrypted only, or not shown)."""
        return sum(1 for b in self.blocks if not (b.text or b.summary))


@dataclass(frozen=True, slots=True)
class ModelCallFinished:
    """One model request of the turn completed."""

    index: int
    usage: Usage
    stop_reason: str


@dataclass(frozen=True, slots=True)
class PlanUpdate:
    """The session's plan moved to another state (submitted, accepted, compacted, dispatched, done, ...)."""

    plan: Plan


@dataclass(frozen=True, slots=True)
class BackgroundCompaction:
    """A compaction off the user's time, as it goes (see docs/compaction.md, "Background compaction").

    `started` at a turn's end (or when the cache went cold), `ready` once logged as prepared,
    `applied` at a later turn's start, `discarded` when what it covers changed (or it failed).
    """

    kind: Literal["started", "ready", "applied", "discarded"]
    trigger: Literal["threshold", "idle"]
    message: str


AgentEvent: TypeAlias = (
    TextDelta
    | ReasoningDelta
    | Thinking
    | ToolStarted
    | ToolProgress
    | ToolFinished
    | ModelCallFinished
    | SkillWarning
    | RetryNotice
    | PlanUpdate
    | BackgroundCompaction
)
"""What the loop reports while a turn runs (`ReasoningDelta`: the model's readable reasoning as it streams,
`Thinking`: a call's reasoning whole; `RetryNotice`: a failed request is sent again after a wait)."""


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """What a turn did: its final text, every model call's usage, the tools it ran."""

    turn: TurnContext
    text: str
    usages: tuple[Usage, ...]
    tools_run: tuple[str, ...]
    stop_reason: str

    @property
    def usage(self) -> Usage:
        """The usage of every model call of the turn, summed."""
        return Usage(
            input=sum(u.input for u in self.usages),
            output=sum(u.output for u in self.usages),
            cache_read=sum(u.cache_read for u in self.usages),
            cache_write=sum(u.cache_write for u in self.usages),
            reasoning=sum(u.reasoning for u in self.usages),
        )
