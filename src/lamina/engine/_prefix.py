"""The stable prefix: the stable parts a session's cached prefix renders, and their record in the log (pure)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lamina.context import Authority, Part, Stability, StableContext, Tier, pin_stable, stable_update_text
from lamina.defang import trusted
from lamina.session import CompactionBoundary, LogEntry, PinnedPart, StateChange


def pinned_parts(stable: StableContext) -> tuple[PinnedPart, ...]:
    """The stable version's parts as the log records them (`PinnedPart`)."""
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


@dataclass(frozen=True, slots=True)
class StableRefresh:
    """What a turn's look at the stable inputs found: the version now, and what to record about it.

    Attributes:
        pinned: The latest version of the stable inputs (to `settle` once `change` is recorded).
        change: The `stable` state change to record (None: nothing changed).
        update_text: The text of a `stable_update` one-shot to queue (None: the prefix was re-pinned).
    """

    pinned: StableContext
    change: StateChange | None = None
    update_text: str | None = None


class StablePrefix:
    """The stable inputs: their latest version and the (possibly older) version the cached prefix renders."""

    def __init__(self) -> None:
        """No stable version yet: the first turn pins one."""
        self.latest: StableContext | None = None
        """The latest version of the stable inputs."""
        self.prefix: StableContext | None = None
        """The stable version the cached prefix renders: older than `latest` while a change is
        delivered in the tail and waits for the next compaction to rebuild the prefix."""
        self._recorded: tuple[int, str] | None = None
        """The version and digest the log recorded last."""

    def _note(self, value: str) -> None:
        version, _, digest = value.partition(":")
        self._recorded = (int(version), digest)

    def observe(self, entry: LogEntry) -> None:
        """Fold an entry of the log, in append order (the stable inputs hold on every branch)."""
        match entry:
            case StateChange(key="stable", value=value) as change:
                self._note(value)
                self.prefix = prefix_context(change)
            case CompactionBoundary(state=state):
                if state.stable is not None:
                    self._note(state.stable)
                self.prefix = self.latest  # a compaction rebuilds the prefix with the latest stable version
            case _:
                pass

    def refresh(self, parts: tuple[Part, ...], *, turn_since_boundary: bool) -> StableRefresh:
        """Compare the stable parts read now with the latest version; says what to record, records nothing.

        A change before anything was sent under the current prefix (a new session, or right after a
        compaction) re-pins the prefix. A change in the middle of a conversation keeps the cached
        prefix as it is and asks for a one-shot `stable_update` part stating what changed, so the
        history's cache survives; the next compaction rebuilds the prefix with the latest version.

        Args:
            parts: The stable parts the workspace gives now.
            turn_since_boundary: Whether a turn was sent under the current prefix.

        Returns:
            The latest version, and the change and one-shot text to record before `settle`.
        """
        current = self.latest
        if current is None and self._recorded is not None:
            version, digest = self._recorded
            if StableContext.digest_of(parts) == digest:
                return StableRefresh(StableContext(parts, version, digest))
            current = StableContext((), version, digest)  # changed while the session was closed
        pinned, found = pin_stable(current, parts)
        if found is None:
            return StableRefresh(pinned)
        detail = f"version {pinned.version}: {found.describe()}"
        keep = self.prefix
        # after a turn under the current prefix, the prefix keeps its bytes and the change rides the tail once
        deliver = bool(keep is not None and keep.parts and turn_since_boundary)
        kept = keep if deliver and keep is not None else pinned
        if deliver:
            detail += f"; delivered once in the tail, the cached prefix keeps version {kept.version}"
        change = StateChange(
            key="stable",
            value=f"{pinned.version}:{pinned.digest}",
            previous=f"{current.version}:{current.digest}" if current else None,
            detail=detail,
            prefix=pinned_parts(kept),
            prefix_version=kept.version,
        )
        known = current if current is not None and current.parts else kept
        return StableRefresh(pinned, change, stable_update_text(known, pinned) if deliver else None)

    def settle(self, pinned: StableContext) -> StableContext:
        """Take `pinned` as the latest version; returns the stable context this turn renders (the prefix)."""
        self.latest = pinned
        if self.prefix is None:
            self.prefix = pinned
        return self.prefix

    def next(self, source: Callable[[], Sequence[Part]]) -> StableContext:
        """The stable context the next request sends: the latest seen, else the prefix, else the source's."""
        if self.latest is not None:
            return self.latest
        if self.prefix is not None:
            return self.prefix
        return pin_stable(None, source())[0]

    def shown(self, source: Callable[[], Sequence[Part]]) -> StableContext:
        """The stable context a preview of the next turn shows: the prefix, else the source's parts pinned."""
        return self.prefix if self.prefix is not None else pin_stable(self.latest, source())[0]

    def state(self) -> str | None:
        """The stable version a compaction boundary carries: the latest seen, else the one the log recorded."""
        if self.latest is not None:
            return f"{self.latest.version}:{self.latest.digest}"
        if self._recorded is not None:
            version, digest = self._recorded
            return f"{version}:{digest}"
        return None
