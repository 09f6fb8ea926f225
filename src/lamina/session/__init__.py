"""Sessions: the durable log of everything an agent session saw and did, and the stores that keep it.

`open_store(location)` picks a store from a path (the JSONL store, the embedded default) or a
`postgresql://` URL (`lamina.session.postgres`); both implement `SessionStore`, whose sessions
implement `SessionLog`, and so does `InMemorySessionStore` (the log in memory: for tests and
embedding). The entry types are the log's vocabulary; `export_session` and `import_session` move
a session between machines or stores as one checked bundle. Everything else in this package is
private.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lamina._lazy import load_lazily

if TYPE_CHECKING:
    from lamina.session._branch import Branch
    from lamina.session._bundle import (
        BundleLimits,
        ExportResult,
        ImportResult,
        check_bundle,
        export_session,
        import_session,
    )
    from lamina.session._check import SessionHealth, check_session, check_store, repair_session
    from lamina.session._entries import (
        AssistantMessage,
        AttachmentRef,
        BranchSummary,
        CompactionBoundary,
        Custom,
        Entry,
        Label,
        LogEntry,
        OutboxRecord,
        PlanState,
        StateChange,
        ToolCall,
        ToolOutputPruned,
        ToolResult,
        TurnRecord,
        UnknownEntry,
        Usage,
        UserMessage,
    )
    from lamina.session._jsonl_write import JsonlSession
    from lamina.session._location import open_store
    from lamina.session._memory import InMemorySession, InMemorySessionStore
    from lamina.session._protocol import SessionLog, SessionStore, SessionSummary
    from lamina.session._store import LocalSessionStore
    from lamina.session._tree import ProviderView

# Loaded on first use (PEP 562): the entry types are imported by nearly every module, the stores
# by few.
_LAZY: Final = {
    "Branch": "lamina.session._branch",
    **dict.fromkeys(
        ("BundleLimits", "ExportResult", "ImportResult", "check_bundle", "export_session", "import_session"),
        "lamina.session._bundle",
    ),
    **dict.fromkeys(("SessionHealth", "check_session", "check_store", "repair_session"), "lamina.session._check"),
    **dict.fromkeys(
        (
            "AssistantMessage",
            "AttachmentRef",
            "BranchSummary",
            "CompactionBoundary",
            "Custom",
            "Entry",
            "Label",
            "LogEntry",
            "OutboxRecord",
            "PlanState",
            "StateChange",
            "ToolCall",
            "ToolOutputPruned",
            "ToolResult",
            "TurnRecord",
            "UnknownEntry",
            "Usage",
            "UserMessage",
        ),
        "lamina.session._entries",
    ),
    "open_store": "lamina.session._location",
    **dict.fromkeys(("InMemorySession", "InMemorySessionStore"), "lamina.session._memory"),
    **dict.fromkeys(("SessionLog", "SessionStore", "SessionSummary"), "lamina.session._protocol"),
    "JsonlSession": "lamina.session._jsonl_write",
    "LocalSessionStore": "lamina.session._store",
    "ProviderView": "lamina.session._tree",
}


def __getattr__(name: str) -> object:
    return load_lazily(globals(), __name__, _LAZY, name)


__all__ = [
    "AssistantMessage",
    "AttachmentRef",
    "Branch",
    "BranchSummary",
    "BundleLimits",
    "CompactionBoundary",
    "Custom",
    "Entry",
    "ExportResult",
    "ImportResult",
    "InMemorySession",
    "InMemorySessionStore",
    "JsonlSession",
    "Label",
    "LocalSessionStore",
    "LogEntry",
    "OutboxRecord",
    "PlanState",
    "ProviderView",
    "SessionHealth",
    "SessionLog",
    "SessionStore",
    "SessionSummary",
    "StateChange",
    "ToolCall",
    "ToolOutputPruned",
    "ToolResult",
    "TurnRecord",
    "UnknownEntry",
    "Usage",
    "UserMessage",
    "check_bundle",
    "check_session",
    "check_store",
    "export_session",
    "import_session",
    "open_store",
    "repair_session",
]
