"""The user's settings as the engine keeps them: mode, model, preset, reasoning, sources, skills (I/O: the log)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

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

    def set_reasoning(self, settings: str) -> None:
        """Record the reasoning settings the requests go with (nothing when they are the recorded ones).

        Like the model, for a resumed session (and restated by a compaction's snapshot); the text is
        the front end's (the CLI writes `thinking=adaptive effort=high`, or `default`).
        """
        if settings != self.state.reasoning:
            self._record(StateChange(key="reasoning", value=settings, previous=self.state.reasoning))

    def note_foreign_reasoning(self, left_out: Mapping[str, int], *, provider: str) -> list[str]:
        """Record that the view's reasoning blocks of other providers are not sent to `provider`, and say so.

        Reasoning goes only to the provider that made it (`lamina.placement.replayed`): when the
        session moves to `provider`, the others' blocks in its view stay in the log and are left out
        of its requests. One state change per provider left out (`foreign_reasoning`: `value` names
        it, `detail` says how many blocks).

        Args:
            left_out: How many blocks of each provider the view holds (`provider`'s own and zeros are skipped).
            provider: The provider the session now runs on.

        Returns:
            One line per provider left out (none: nothing is left out, nothing recorded).
        """
        notes = []
        for name, count in left_out.items():
            if count <= 0 or name == provider:
                continue
            blocks = "block" if count == 1 else "blocks"
            note = (
                f"{count} reasoning {blocks} of {name} left out of the requests to {provider} from here on"
                " (reasoning goes only to the provider that made it; the log keeps them)"
            )
            self._record(StateChange(key="foreign_reasoning", value=name, detail=note))
            notes.append(note)
        return notes

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
