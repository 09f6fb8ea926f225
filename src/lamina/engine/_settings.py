"""The user's settings as the engine changes them: permission mode, active sources, skills in use (I/O: the log)."""

from __future__ import annotations

from collections.abc import Sequence

from lamina.engine._host import EngineHost
from lamina.engine._state import RecordedSettings, settings_of
from lamina.session import StateChange


class SettingsMixin(EngineHost):
    """The settings methods of `ContextEngine`: each change is a state change in the log (the fold is `_state`)."""

    @property
    def mode(self) -> str:
        """The permission mode, as the session last recorded it."""
        return self._settings.mode

    @property
    def previous_mode(self) -> str | None:
        """The permission mode before the latest change (None: none recorded since the start or the last compaction)."""
        return self._settings.previous_mode

    @property
    def active_sources(self) -> tuple[str, ...]:
        """The slugs of the sources active in this session."""
        return self._settings.sources

    def set_mode(self, mode: str) -> None:
        """Change the permission mode: a state change, and a one-shot signal for the model."""
        if mode == self._settings.mode:
            return
        previous = self._settings.mode
        self.record(StateChange(key="mode", value=mode, previous=previous), durable=True)
        self.queue_one_shot("mode_transition", f"The permission mode changed from {previous} to {mode}.")

    @property
    def settings(self) -> RecordedSettings:
        """The model, mode and preset the session last recorded (what a resumed session uses)."""
        return settings_of(self._settings)

    def set_model(self, spec: str) -> None:
        """Record the model spec the session runs on (nothing when it is the recorded one).

        The engine does not use it: a front end records it so that a resumed session runs on the same model.
        """
        if spec != self._settings.model:
            self.record(StateChange(key="model", value=spec, previous=self._settings.model))

    def set_preset(self, preset: str, preset_file: str = "") -> None:
        """Record the system prompt preset (and the custom preset's file) the session runs with.

        Nothing is recorded when they are the recorded ones; like the model, for a resumed session.
        """
        if (preset, preset_file) != (self._settings.preset, self._settings.preset_file):
            self.record(StateChange(key="preset", value=preset, previous=self._settings.preset, detail=preset_file))

    @property
    def skills_in_use(self) -> tuple[str, ...]:
        """Names of the skills invoked in this session (they survive resumes and compactions)."""
        return self._path.skills

    def add_skills(self, names: Sequence[str]) -> None:
        """Record skills as in use (a state change), so a resumed session still knows them."""
        new = tuple(dict.fromkeys((*self._path.skills, *names)))
        if new != self._path.skills:
            self.record(StateChange(key="skills", value=",".join(new), previous=",".join(self._path.skills)))

    def set_sources(self, sources: Sequence[str]) -> None:
        """Set the active sources; newly activated ones are introduced once through the outbox."""
        new = tuple(dict.fromkeys(sources))
        if new == self._settings.sources:
            return
        added = [s for s in new if s not in self._settings.sources]
        self.record(
            StateChange(key="sources", value=",".join(new), previous=",".join(self._settings.sources)), durable=True
        )
        if added:
            self.queue_one_shot(
                "source_activated",
                f"Newly active sources: {', '.join(added)}. Read each source's guide before using its tools.",
            )
