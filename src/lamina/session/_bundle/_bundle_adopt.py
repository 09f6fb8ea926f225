"""What an import adopts of a bundle: nothing but its conversation and files (pure).

A bundle's recorded mode, model, preset and reasoning settings, and a plan its author accepted, are the author's, not
the importing user's: the import appends entries that clear them (docs/security.md, "Bundles are data").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

from lamina.session._entries import CompactionBoundary, LogEntry, PlanState, StateChange

_SETTINGS: Final[tuple[Literal["mode", "model", "preset", "reasoning"], ...]] = ("mode", "model", "preset", "reasoning")
NOT_ADOPTED: Final = "imported: the bundle's setting is not adopted"
"""The `detail` of the state changes an import appends to clear the bundle's recorded settings."""
NOT_ACCEPTED: Final = "imported: accepted in the bundle, not by you; not carried out here"
"""The `detail` of the cancellation an import appends for a plan its author accepted."""
_UNFINISHED: Final = frozenset({"accepted", "awaiting_compaction", "compacted", "dispatched"})


def not_adopted(entries: Sequence[LogEntry]) -> list[StateChange | PlanState]:
    """The entries (unstamped) an import appends to a bundle's log so the session adopts none of its settings.

    One `StateChange` with an empty value per setting the log records (mode, model, preset, reasoning): the
    session runs on the importing user's own (`lamina.engine.RecordedSettings.imported` keeps the
    bundle's). A `cancelled` transition for each plan the author accepted that is not over: that
    acceptance, and the mode it chose, is not the user's, so it is never carried on here.
    """
    recorded: set[str] = set()
    latest: dict[str, str] = {}
    for entry in entries:
        if isinstance(entry, StateChange) and entry.key in _SETTINGS and entry.value:
            recorded.add(entry.key)
        elif isinstance(entry, PlanState):
            latest[entry.plan_id] = entry.state
        elif isinstance(entry, CompactionBoundary):
            snapshot = entry.state
            recorded.update(key for key in _SETTINGS if getattr(snapshot, key) is not None)
            if snapshot.plan is not None:
                latest[snapshot.plan.plan_id] = snapshot.plan.state
    cleared: list[StateChange | PlanState] = [
        StateChange(key=key, value="", detail=NOT_ADOPTED) for key in _SETTINGS if key in recorded
    ]
    cleared += [
        PlanState(plan_id=plan_id, state="cancelled", detail=NOT_ACCEPTED)
        for plan_id, state in latest.items()
        if state in _UNFINISHED
    ]
    return cleared
