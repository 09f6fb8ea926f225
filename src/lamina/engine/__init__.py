"""The context engine: one session's turn preparation, one-shot outbox, commit and compaction.

`ContextEngine` (`_facade`) is the I/O shell over parts that each own one piece of state: the
session-state fold (`_state`), the outbox (`_outbox`), the live provider view and its prune tally
(`_view`), the stable prefix (`_prefix`), provider sessions (`_sessions`) and compaction
(`_compaction`).
"""

from __future__ import annotations

from lamina.engine._compaction import CompactionEvent, CompactionOutcome, CompactionStatus
from lamina.engine._facade import ContextEngine, StableSource
from lamina.engine._sessions import provider_session_in_view
from lamina.engine._view import HistorySlice

__all__ = [
    "CompactionEvent",
    "CompactionOutcome",
    "CompactionStatus",
    "ContextEngine",
    "HistorySlice",
    "StableSource",
    "provider_session_in_view",
]
