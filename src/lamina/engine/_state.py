"""The session-state folds: functions from a state and one log entry to the next state (pure)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from lamina.engine._plan import Plan, advance
from lamina.session import CompactionBoundary, LogEntry, PartRecord, ProviderSession, StateChange, StateSnapshot


@dataclass(frozen=True, slots=True)
class RecordedSettings:
    """The settings a session recorded: what a resumed session uses unless it is given others.

    None: the session recorded none (an older log, or a session made without a front end that records it).
    """

    model: str | None = None
    """The model spec (`anthropic:ID`, `openai-compat:URL#ID`, `scripted:FILE`, ...)."""
    mode: str | None = None
    """The permission mode."""
    preset: str | None = None
    """The system prompt preset: `default`, `mini` or `custom`."""
    preset_file: str = ""
    """The custom preset's file ("": none)."""
    reasoning: str | None = None
    """The reasoning settings, as the front end wrote them (the CLI: `thinking=adaptive effort=high`)."""
    imported: RecordedSettings | None = None
    """What the bundle the session was imported from had recorded, which the session does not use
    (None: not imported, or the bundle recorded nothing): shown on resume, adopted only on request."""


@dataclass(frozen=True, slots=True)
class SessionState:
    """The user's settings, which hold on every branch: the fold of the whole log in append order.

    The permission mode and the active sources stay as the user last set them, whichever path that
    was on (as Claude Code's rewind keeps them). What the conversation holds is `PathState`.
    """

    mode: str = "ask"
    mode_recorded: bool = False
    previous_mode: str | None = None
    """The mode before the latest change of mode (None: none since the start or the latest boundary)."""
    sources: tuple[str, ...] = ()
    model: str | None = None
    """The model spec the session last recorded (`anthropic:ID`, `scripted:FILE`, ...; None: none yet)."""
    preset: str | None = None
    """The system prompt preset the session last recorded (None: none yet)."""
    preset_file: str = ""
    """The custom preset's file recorded with it ("": none)."""
    reasoning: str | None = None
    """The reasoning settings the session last recorded (None: none yet)."""
    imported: RecordedSettings | None = None
    """The settings an imported bundle had recorded, cleared by the import (`RecordedSettings.imported`)."""


def settings_of(state: SessionState) -> RecordedSettings:
    """What `state` says the session recorded."""
    return RecordedSettings(
        model=state.model,
        mode=state.mode if state.mode_recorded else None,
        preset=state.preset,
        preset_file=state.preset_file,
        reasoning=state.reasoning,
        imported=state.imported,
    )


def recorded_settings(entries: Iterable[LogEntry]) -> RecordedSettings:
    """The settings a session's entries record (in append order; from its latest boundary on is enough).

    Args:
        entries: The session's entries as loaded (`SessionLog.entries_loaded()`).

    Returns:
        The latest model, mode, preset and reasoning settings they record.
    """
    state = SessionState()
    for entry in entries:
        state = fold(state, entry)
    return settings_of(state)


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
        case StateChange(key="mode" | "model" | "preset" | "reasoning", value=""):
            return _cleared(state, entry.key)
        case StateChange(key="mode", value=value):
            # the first mode recorded (a new session's, or a resumed import's) has none before it
            before = (state.mode if state.mode != value else state.previous_mode) if state.mode_recorded else None
            return replace(state, mode=value, mode_recorded=True, previous_mode=before)
        case StateChange(key="sources", value=value):
            return replace(state, sources=_names(value))
        case StateChange(key="model", value=value):
            return replace(state, model=value)
        case StateChange(key="preset", value=value, detail=detail):
            return replace(state, preset=value, preset_file=detail)
        case StateChange(key="reasoning", value=value):
            return replace(state, reasoning=value)
        case CompactionBoundary(state=snapshot):
            # a resume may read only from here on: the boundary carries the state from before it
            state = replace(state, sources=snapshot.sources)
            if snapshot.mode is not None:
                state = replace(state, mode=snapshot.mode, mode_recorded=True)
            if snapshot.model is not None:
                state = replace(state, model=snapshot.model)
            if snapshot.preset is not None:
                state = replace(state, preset=snapshot.preset, preset_file=snapshot.preset_file)
            if snapshot.reasoning is not None:
                state = replace(state, reasoning=snapshot.reasoning)
            return state
        case _:
            return state


def _cleared(state: SessionState, key: str) -> SessionState:
    """`state` without its recorded `key` (an import's doing), which moves to `imported`."""
    kept = state.imported or RecordedSettings()
    match key:
        case "mode":
            bundle = replace(kept, mode=state.mode if state.mode_recorded else None)
            return replace(state, mode=SessionState().mode, mode_recorded=False, previous_mode=None, imported=bundle)
        case "model":
            return replace(state, model=None, imported=replace(kept, model=state.model))
        case "reasoning":
            return replace(state, reasoning=None, imported=replace(kept, reasoning=state.reasoning))
        case _:
            bundle = replace(kept, preset=state.preset, preset_file=state.preset_file)
            return replace(state, preset=None, preset_file="", imported=bundle)


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


def boundary_state(
    settings: SessionState,
    path: PathState,
    provider_sessions: tuple[ProviderSession, ...],
    stable: str | None,
    pending: tuple[PartRecord, ...],
) -> StateSnapshot:
    """The state a compaction boundary carries, for a resume that reads only from it on.

    Args:
        settings: The user's settings.
        path: The current path's state.
        provider_sessions: Where each provider resumes the path.
        stable: The stable version (`version:digest`; None: none recorded).
        pending: The one-shots still pending on the path.

    Returns:
        The snapshot.
    """
    return StateSnapshot(
        mode=settings.mode if settings.mode_recorded else None,
        sources=settings.sources,
        skills=path.skills,
        provider_sessions=provider_sessions,
        stable=stable,
        pending_one_shots=pending,
        plan=path.plan,
        model=settings.model,
        preset=settings.preset,
        preset_file=settings.preset_file,
        reasoning=settings.reasoning,
    )
