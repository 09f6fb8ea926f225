"""A store's claim on a session's compaction: so two hosts on one session make one compaction (the protocol)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class CompactionClaims(Protocol):
    """A session that several hosts may write in turn (PostgreSQL): one of them compacts it at a time.

    A background compaction takes the claim before it summarises and gives it back after; a host
    that finds it taken does not summarise (the one that holds it logs its compaction as prepared).
    A claim not given back (its host died) lapses after the seconds it was taken for.
    """

    def claim_compaction(self, seconds: float) -> bool:
        """Take the compaction claim for `seconds` (again, when this host holds it); False: another host holds it."""
        ...

    def release_compaction(self) -> None:
        """Give the claim back (a no-op when this host does not hold it)."""
        ...
