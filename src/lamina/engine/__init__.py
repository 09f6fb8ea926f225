"""The context engine: one session's turn preparation, one-shot outbox, commit and compaction.

`ContextEngine` (in `_facade`) is the I/O shell over parts that each own one piece of state; this
package exports exactly the names below.
"""

from __future__ import annotations

from lamina.engine._facade import (
    CompactionEvent,
    CompactionOutcome,
    CompactionStatus,
    ContextEngine,
    HistorySlice,
    StableSource,
    _prefix_context,
    provider_session_in_view,
)

__all__ = [
    "CompactionEvent",
    "CompactionOutcome",
    "CompactionStatus",
    "ContextEngine",
    "HistorySlice",
    "StableSource",
    "provider_session_in_view",
]
