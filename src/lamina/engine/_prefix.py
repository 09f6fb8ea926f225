"""The stable prefix: the stable parts a session's cached prefix renders, and their record in the log."""

from __future__ import annotations

from lamina.defang import trusted
from lamina.parts import Authority, Part, Stability, Tier
from lamina.session import StateChange
from lamina.session._entries import PinnedPart
from lamina.turn import StableContext


def pinned_parts(stable: StableContext) -> tuple[PinnedPart, ...]:
    return tuple(
        PinnedPart(key=p.key, text=p.text, provenance=p.provenance, authority=p.authority.value, tier=int(p.tier))
        for p in stable.parts
    )


def prefix_context(change: StateChange) -> StableContext | None:
    """The stable context a `stable` state change says the prefix renders (None for older logs, or unreadable)."""
    if not change.prefix or change.prefix_version is None:
        return None
    try:
        parts = tuple(
            # texts Lamina built (and neutralised) itself, recorded so the prefix renders again byte for byte
            Part(p.key, trusted(p.text), p.provenance, Authority(p.authority), Stability.STABLE, Tier(p.tier))
            for p in change.prefix
        )
    except ValueError:  # a hand-edited log: rebuild the prefix from the workspace instead
        return None
    return StableContext(parts, change.prefix_version, StableContext.digest_of(parts))
