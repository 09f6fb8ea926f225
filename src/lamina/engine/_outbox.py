"""The one-shot outbox: parts queued on the current path, carried by every turn until delivered (pure)."""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence

from lamina.context import OneShot
from lamina.session import CompactionBoundary, LogEntry, OutboxRecord, PartRecord


def turn_one_shots(carried: Sequence[OneShot], pending: Iterable[OneShot]) -> tuple[OneShot, ...]:
    """A turn's one-shots after a compaction in its middle: what it carried, then what was queued since."""
    ids = {o.part_id for o in carried}
    return (*carried, *(o for o in pending if o.part_id not in ids))


class Outbox:
    """The one-shots queued on the current path and not delivered on it (a one-shot of another branch is not)."""

    def __init__(self) -> None:
        """An empty outbox."""
        self._pending: dict[str, OneShot] = {}

    def clear(self) -> None:
        """Forget every pending one-shot (before the path is folded again)."""
        self._pending = {}

    def observe(self, entry: LogEntry) -> None:
        """Fold an entry of the current path (a compaction's snapshot restates what was pending)."""
        match entry:
            case OutboxRecord(status="queued", part_id=pid, kind=kind, text=text, hidden=hidden):
                self._pending[pid] = OneShot(pid, kind, text, hidden)
            case OutboxRecord(status="delivered", part_id=pid):
                self._pending.pop(pid, None)
            case CompactionBoundary(state=state):
                self._pending = {
                    r.part_id: OneShot(r.part_id, r.key, r.text, r.hidden)
                    for r in state.pending_one_shots
                    if r.part_id is not None
                }
            case _:
                pass

    def carried(self) -> tuple[OneShot, ...]:
        """The one-shots the next turn carries, in the order they were queued."""
        return tuple(self._pending.values())

    def records(self) -> tuple[PartRecord, ...]:
        """The pending one-shots as a compaction's snapshot keeps them."""
        return tuple(PartRecord(key=o.kind, text=o.text, part_id=o.part_id, hidden=o.hidden) for o in self.carried())

    def queued(self, kind: str, text: str, *, hidden: bool) -> str | OutboxRecord:
        """The id of the same part already pending, else the record that queues it (to record)."""
        for pending in self._pending.values():
            if pending.kind == kind and pending.text == text and pending.hidden == hidden:
                return pending.part_id
        return OutboxRecord(part_id="os_" + secrets.token_hex(6), status="queued", kind=kind, text=text, hidden=hidden)

    def delivery(self, one_shot: OneShot, turn_id: str) -> OutboxRecord | None:
        """The record that marks `one_shot` delivered by turn `turn_id`.

        Returns:
            The record; None when it is not pending, so there is nothing to record.
        """
        if one_shot.part_id not in self._pending:
            return None
        return OutboxRecord(
            part_id=one_shot.part_id, status="delivered", turn_id=turn_id, kind=one_shot.kind, hidden=one_shot.hidden
        )
