"""The one-shot outbox: parts queued on the current path, carried by every turn until delivered."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from lamina.turn import OneShot


def turn_one_shots(carried: Sequence[OneShot], pending: Iterable[OneShot]) -> tuple[OneShot, ...]:
    """A turn's one-shots after a compaction in its middle: what it carried, then what was queued since."""
    ids = {o.part_id for o in carried}
    return (*carried, *(o for o in pending if o.part_id not in ids))
