"""The options every integration takes: compaction, and how its Lamina sessions are set up (pure)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict, Unpack

from lamina.compaction import (
    DEFAULT_KEEP_TOKENS,
    DEFAULT_RESERVE,
    DEFAULT_USER_LANE_TOKENS,
    DeterministicSummariser,
    Summariser,
)
from lamina.engine import StableSource


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """When and how an integration compacts: Lamina's compaction, triggered by the estimated context size."""

    context_window: int = 128_000
    """The model's context window, in tokens."""
    reserve: int = DEFAULT_RESERVE
    """Compact when fewer tokens than this are left free in the window."""
    keep_tokens: int = DEFAULT_KEEP_TOKENS
    """Tokens of recent history kept verbatim."""
    user_lane_tokens: int = DEFAULT_USER_LANE_TOKENS
    """Tokens of the user's own earlier messages shown verbatim after the summary."""
    summariser: Summariser = field(default_factory=DeterministicSummariser)
    """Writes the summary; by default the deterministic one (no model call)."""


@dataclass(frozen=True, slots=True)
class ThreadOptions:
    """How an integration sets up each Lamina session it opens: stable parts, time zone, compaction, clock.

    The same for the three integrations (`LaminaSession.open`, `LaminaHistory.open`,
    `LaminaCheckpointSaver(...)`) and `LaminaThread.open`; each also takes the fields as keyword
    arguments, which override the fields of an `options` given beside them.
    """

    workspace: Path | None = None
    """The project folder: the session's working directory, and where `project_parts` reads from."""
    stable_source: StableSource | None = None
    """The stable parts; by default `project_parts(workspace)` with a workspace, else Lamina's one rule."""
    time_zone: str = "UTC"
    """The zone of the date and time in each turn's tail."""
    compaction: CompactionPolicy | None = None
    """When and how to compact (None: `CompactionPolicy()`)."""
    clock: Callable[[], float] = time.time
    """The current time, in seconds since the epoch."""


class ThreadKeywords(TypedDict, total=False):
    """The fields of `ThreadOptions`, as keyword arguments of the integrations' `open`."""

    workspace: Path | None
    stable_source: StableSource | None
    time_zone: str
    compaction: CompactionPolicy | None
    clock: Callable[[], float]


def thread_options(options: ThreadOptions | None = None, **keywords: Unpack[ThreadKeywords]) -> ThreadOptions:
    """`options` (default: `ThreadOptions()`) with the fields given as keyword arguments replaced.

    Raises:
        TypeError: a keyword names no field of `ThreadOptions`.
    """
    base = options if options is not None else ThreadOptions()
    return dataclasses.replace(base, **keywords) if keywords else base
