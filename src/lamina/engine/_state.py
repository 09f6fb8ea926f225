"""The session-state folds: functions from a state and one log entry to the next state (pure)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from lamina.engine._plan import Plan, advance
from lamina.session import CompactionBoundary, LogEntry, StateChange


@dataclass(frozen=True, slots=True)
class SessionState:
    """The user's settings, which hold on every branch: the fold of the whole log in append order.

    The permission mode and the active sources stay as the user last set them, whichever path that
    was on (as Claude Code's rewind keeps them). What the conversation holds is `PathState`.
    """

    mode: str = "ask"
    mode_recorded: bool = False
    sources: tuple[str, ...] = ()


def _names(value: str) -> tuple[str, ...]:
    return tuple(s for s in value.split(",") if s)


def fold(state: SessionState, entry: LogEntry) -> SessionState:
    """The settings after `entry` (entries in append order).

    Args:
        state: The settings before `entry`.
        entry: The next entry of the log.

    Returns:
        The settings after it (`state` itself when `entry` does not change them).
    """
    match entry:
        case StateChange(key="mode", value=value):
            return replace(state, mode=value, mode_recorded=True)
        case StateChange(key="sources", value=value):
            return replace(state, sources=_names(value))
        case CompactionBoundary(state=snapshot):
            # a resume may read only from here on: the boundary carries the state from before it
            if snapshot.mode is not None:
                return SessionState(snapshot.mode, True, snapshot.sources)
            return replace(state, sources=snapshot.sources)
        case _:
            return state


@dataclass(frozen=True, slots=True)
class PathState:
    """The conversation's state on the current path: the skills in use and the latest plan."""

    skills: tuple[str, ...] = ()
    plan: Plan | None = None


def fold_path(state: PathState, entry: LogEntry) -> PathState:
    """The path's state after `entry` (entries in path order; a compaction's snapshot restates it).

    Args:
        state: The state before `entry`.
        entry: The next entry of the path.

    Returns:
        The state after it.
    """
    plan = advance(state.plan, entry)
    match entry:
        case StateChange(key="skills", value=value):
            return PathState(_names(value), plan)
        case CompactionBoundary(state=snapshot):
            return PathState(snapshot.skills, plan)
        case _:
            return state if plan is state.plan else PathState(state.skills, plan)
