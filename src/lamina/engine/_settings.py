"""The user's settings as the engine keeps them: permission mode, active sources, skills in use (I/O: the log)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lamina.engine._recorder import Recorder
from lamina.engine._state import PathState, RecordedSettings, SessionState, fold, settings_of
from lamina.session import LogEntry, StateChange


class SessionSettings:
    """The session's settings (`engine.settings`): the fold of the log, and setters that record each change.

    The fold is `_state`: the mode, the sources, the model and the preset hold on every branch; the
    skills in use are the current path's (read through `path`).
    """

    def __init__(
        self,
        *,
        record: Recorder,
        queue_one_shot: Callable[[str, str], object],
        path: Callable[[], PathState],
    ) -> None:
        """No settings recorded yet: the engine folds the log's entries in (`observe`).

        Args:
            record: The engine's write path.
            queue_one_shot: Queues a one-shot part for the model (its kind and text).
            path: The current path's state (the skills in use).
        """
        self._record = record
        self._queue_one_shot = queue_one_shot
        self._path = path
        self.state = SessionState()
        """The fold so far (`_state.SessionState`)."""

    def observe(self, entry: LogEntry) -> None:
        """Fold an entry of the log, in append order."""
        self.state = fold(self.state, entry)

    @property
    def mode(self) -> str:
        """The permission mode, as the session last recorded it."""
        return self.state.mode

    @property
    def previous_mode(self) -> str | None:
        """The permission mode before the latest change (None: none recorded since the start or the last compaction)."""
        return self.state.previous_mode

    @property
    def active_sources(self) -> tuple[str, ...]:
        """The slugs of the sources active in this session."""
        return self.state.sources

    @property
    def recorded(self) -> RecordedSettings:
        """The model, mode and preset the session last recorded (what a resumed session uses)."""
        return settings_of(self.state)

    @property
    def skills_in_use(self) -> tuple[str, ...]:
        """Names of the skills invoked in this session (they survive resumes and compactions)."""
        return self._path().skills

    def set_mode(self, mode: str) -> None:
        """Change the permission mode: a state change, and a one-shot signal for the model."""
        if mode == self.state.mode:
            return
        previous = self.state.mode
        self._record(StateChange(key="mode", value=mode, previous=previous), durable=True)
        self._queue_one_shot("mode_transition", f"The permission mode changed from {previous} to {mode}.")

    def set_model(self, spec: str) -> None:
        """Record the model spec the session runs on (nothing when it is the recorded one).

        The engine does not use it: a front end records it so that a resumed session runs on the same model.
        """
        if spec != self.state.model:
            self._record(StateChange(key="model", value=spec, previous=self.state.model))

    def set_preset(self, preset: str, preset_file: str = "") -> None:
        """Record the system prompt preset (and the custom preset's file) the session runs with.

        Nothing is recorded when they are the recorded ones; like the model, for a resumed session.
        """
        if (preset, preset_file) != (self.state.preset, self.state.preset_file):
            change = StateChange(key="preset", value=preset, previous=self.state.preset, detail=preset_file)
            self._record(change)

    def add_skills(self, names: Sequence[str]) -> None:
        """Record skills as in use (a state change), so a resumed session still knows them."""
        skills = self._path().skills
        new = tuple(dict.fromkeys((*skills, *names)))
        if new != skills:
            self._record(StateChange(key="skills", value=",".join(new), previous=",".join(skills)))

    def set_sources(self, sources: Sequence[str]) -> None:
        """Set the active sources; newly activated ones are introduced once through the outbox."""
        new = tuple(dict.fromkeys(sources))
        if new == self.state.sources:
            return
        added = [s for s in new if s not in self.state.sources]
        self._record(
            StateChange(key="sources", value=",".join(new), previous=",".join(self.state.sources)), durable=True
        )
        if added:
            self._queue_one_shot(
                "source_activated",
                f"Newly active sources: {', '.join(added)}. Read each source's guide before using its tools.",
            )
