"""The session's clock as the cost model reads it: the gaps between turns and where the cache stands (pure).

Folded from the entries the engine records, each with the time it was recorded (the engine's
clock) or, for a session opened again, the time its log stamped on it.
"""

from __future__ import annotations

from lamina.placement import CacheTtl
from lamina.pricing._cost import CacheState, SessionPace
from lamina.session import AssistantMessage, LogEntry, TurnRecord, UserMessage


class PaceTracker:
    """The gaps before each turn, the turns and model calls, and where the last request and turn ended."""

    def __init__(self) -> None:
        """Nothing seen yet: the cache is cold."""
        self.gaps: list[float] = []
        self.turns = 0
        self.calls = 0
        self.last_activity: float | None = None
        self.last_request: float | None = None
        self.request_tokens = 0
        """The history's tokens the last request carried."""
        self.turn_mark_tokens = 0
        """The history's tokens up to the last turn's user message (its breakpoint)."""
        self.turn_ttl: CacheTtl = "1h"
        self.turn_started: float | None = None
        self.turn_start_tokens = 0
        self.turn_growth: list[int] = []
        """What each turn added to the history, newest last (a few kept)."""

    def observe(self, entry: LogEntry, at: float, tokens_before: int, tokens_after: int) -> None:
        """Fold one recorded entry: `at` is when, `tokens_before`/`tokens_after` the history's tokens around it."""
        if isinstance(entry, UserMessage):
            if self.last_activity is not None and self.turns:
                self.gaps.append(max(0.0, at - self.last_activity))
            if self.turn_started is not None:
                self.turn_growth = [*self.turn_growth[-7:], max(0, tokens_before - self.turn_start_tokens)]
            self.turns += 1
            self.turn_started = at
            self.turn_start_tokens = tokens_before
            self.turn_mark_tokens = tokens_after
        elif isinstance(entry, AssistantMessage):
            self.calls += 1
            self.last_request = at
            self.request_tokens = tokens_before  # the request that got this answer carried everything before it
        elif isinstance(entry, TurnRecord) and isinstance(entry.turn_ttl, str):
            self.turn_ttl = entry.turn_ttl
        self.last_activity = at

    def reset(self) -> None:
        """A compaction or a prune rewrote the history: nothing of it is cached until the next request."""
        self.request_tokens = 0
        self.turn_mark_tokens = 0

    def pace(self) -> SessionPace:
        """The pace so far."""
        return SessionPace(gaps=tuple(self.gaps), turns=self.turns, calls=self.calls)

    def cache(self, now: float, history_tokens: int) -> CacheState:
        """The cache's state at `now` for a history of `history_tokens`."""
        idle = None if self.last_request is None else max(0.0, now - self.last_request)
        return CacheState(
            idle_seconds=idle,
            history_tokens=history_tokens,
            since_request=max(0, history_tokens - self.request_tokens),
            since_turn_mark=max(0, history_tokens - self.turn_mark_tokens),
            turn_mark_ttl=self.turn_ttl,
        )

    def turn_tokens(self) -> float:
        """What a turn adds to the history, on average of the last few (2,000 before any)."""
        return sum(self.turn_growth) / len(self.turn_growth) if self.turn_growth else 2_000.0
