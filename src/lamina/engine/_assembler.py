"""Turns assembled over the engine's state as it stands: the volatile inputs read now, then `assemble_turn`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from lamina.context import (
    OneShot,
    StableContext,
    ToolSpec,
    TurnContext,
    VolatileInputs,
    build_volatile_parts,
    changed_volatile,
)
from lamina.engine._assemble import assemble_turn
from lamina.engine._settings import SessionSettings
from lamina.engine._view import LiveView
from lamina.session import CostDecision, LogEntry, SessionLog, UserMessage


@dataclass(frozen=True, slots=True)
class TurnAssembler:
    """Builds the engine's turns (`prepare_turn`, `preview_turn`, `reprepare`) from its state read now."""

    session: SessionLog
    """The open session log (its id, its folders as shown to the model)."""
    settings: SessionSettings
    """The user's settings (the mode and the sources the tail states)."""
    view: Callable[[], LiveView]
    """The live provider view of the current path."""
    tools: Callable[[], Sequence[ToolSpec]]
    """The tools the model may call."""
    clock: Callable[[], float]
    """The time, in seconds since the epoch."""
    time_zone: str
    """The user's time zone."""

    def volatile_inputs(self) -> VolatileInputs:
        """The inputs of this turn's volatile parts, read now."""
        return VolatileInputs(
            now=datetime.fromtimestamp(self.clock(), UTC),
            time_zone=self.time_zone,
            permission_mode=self.settings.mode,
            plans_dir=self.session.shown_path("plans"),
            data_dir=self.session.shown_path("data"),
            active_sources=self.settings.active_sources,
        )

    def assemble(
        self,
        turn_id: str,
        user: UserMessage,
        history: Sequence[LogEntry],
        stable: StableContext,
        *,
        stable_seen: bool = False,
        seen: dict[str, str] | None = None,
        one_shots: Sequence[OneShot] | None = None,
        tools: Sequence[ToolSpec] | None = None,
        ttl: tuple[Literal["5m", "1h"] | None, CostDecision | None] = (None, None),
    ) -> TurnContext:
        """The turn `assemble_turn` builds over the engine's state now, save what is given.

        Args:
            turn_id: The turn's id.
            user: Its user message.
            history: The provider view it carries.
            stable: The stable context it renders.
            stable_seen: Whether the provider saw that stable version already.
            seen: The volatile parts the window's tails showed (the view's unless given).
            one_shots: The one-shots it carries (the outbox's unless given).
            tools: The tools it offers (the engine's unless given).
            ttl: Its breakpoint's TTL and the decision that chose it.

        Returns:
            The turn.
        """
        view = self.view()
        volatile = build_volatile_parts(self.volatile_inputs())
        return assemble_turn(
            turn_id=turn_id,
            session_id=self.session.id,
            user=user,
            history=history,
            stable=stable,
            volatile=changed_volatile(volatile, view.last_seen if seen is None else seen),
            one_shots=view.outbox.carried() if one_shots is None else one_shots,
            boundary=view.boundary,
            data_dir=self.session.shown_path("data"),
            tools=self.tools() if tools is None else tools,
            stable_seen=stable_seen,
            turn_ttl=ttl[0],
            cost=ttl[1],
        )
