"""What a turn reports while it runs, and what it did (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from lamina.agent._activation import SkillWarning
from lamina.context import TurnContext
from lamina.engine import Plan
from lamina.providers import RetryNotice, TextDelta
from lamina.session import Usage


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
class ModelCallFinished:
    """One model request of the turn completed."""

    index: int
    usage: Usage
    stop_reason: str


@dataclass(frozen=True, slots=True)
class PlanUpdate:
    """The session's plan moved to another state (submitted, accepted, compacted, dispatched, done, ...)."""

    plan: Plan


AgentEvent: TypeAlias = (
    TextDelta | ToolStarted | ToolProgress | ToolFinished | ModelCallFinished | SkillWarning | RetryNotice | PlanUpdate
)
"""What the loop reports while a turn runs (`RetryNotice`: a failed request is sent again after a wait)."""


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
        )
