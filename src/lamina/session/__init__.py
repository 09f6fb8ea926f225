"""Sessions: the durable log of everything an agent session saw and did, and the stores that keep it.

`open_store(location)` picks a store from a path (the JSONL store, the embedded default) or a
`postgresql://` URL (`lamina.session.postgres`); both implement `SessionStore`, whose sessions
implement `SessionLog`, and so does `InMemorySessionStore` (the log in memory: for tests and
embedding). The entry types are the log's vocabulary (`describe_entry` puts one into words);
`export_session` and `import_session` move a session between machines or stores as one checked
bundle. Everything else in this package is private (the JSONL store in `_jsonl`, bundles in `_bundle`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lamina._lazy import load_lazily

if TYPE_CHECKING:
    from lamina.session._attachment_ref import AttachmentRef, ImageRendition
    from lamina.session._branch import Branch, entry_kind, open_tool_calls
    from lamina.session._bridges import BRANCH_SEED_HEADING, view_summary
    from lamina.session._bundle import (
        BundleLimits,
        ExportResult,
        ImportResult,
        export_session,
        import_session,
    )
    from lamina.session._cache_check import CacheCheck, CacheMiss
    from lamina.session._claims import CompactionClaims
    from lamina.session._describe import EntryDescription, describe_entry
    from lamina.session._entries import (
        BRIDGE_KINDS,
        TURN_FAILED,
        AssistantMessage,
        BranchSummary,
        CompactionBoundary,
        CompactionDiscarded,
        CostDecision,
        Custom,
        Entry,
        Label,
        Ledger,
        LogEntry,
        OutboxRecord,
        PartRecord,
        PinnedPart,
        PinnedTool,
        PlanSnapshot,
        PlanState,
        PlanStateName,
        PreparedCompaction,
        ProviderSession,
        ReadStamp,
        Reasoning,
        StateChange,
        StateSnapshot,
        ToolCall,
        ToolOutputPruned,
        ToolResult,
        TurnRecord,
        UnknownEntry,
        Usage,
        UserLane,
        UserMessage,
        UserWords,
        decode_entry,
        encode_entry,
        is_hidden,
    )
    from lamina.session._jsonl import (
        FileLayer,
        JsonlSession,
        LocalSessionStore,
        OsFiles,
        SessionHealth,
        check_session,
        check_store,
        repair_session,
    )
    from lamina.session._location import check_location, is_postgres_url, open_store, store_location
    from lamina.session._memory_store import InMemorySession, InMemorySessionStore
    from lamina.session._protocol import (
        VIRTUAL_ROOT,
        FileInfo,
        ForkOrigin,
        SessionFiles,
        SessionLog,
        SessionStore,
        SessionSummary,
    )
    from lamina.session._server_block import ServerCompaction, server_block
    from lamina.session._server_edits import AppliedEdit, ServerClearing
    from lamina.session._stamp import check_session_id
    from lamina.session._tree import ProviderView, provider_view

# Loaded on first use (PEP 562): the entry types are imported by nearly every module, the stores
# by few.
_LAZY: Final = {
    "Branch": "lamina.session._branch",
    **dict.fromkeys(
        ("BundleLimits", "ExportResult", "ImportResult", "export_session", "import_session"),
        "lamina.session._bundle",
    ),
    **dict.fromkeys(
        (
            "FileLayer",
            "JsonlSession",
            "LocalSessionStore",
            "OsFiles",
            "SessionHealth",
            "check_session",
            "check_store",
            "repair_session",
        ),
        "lamina.session._jsonl",
    ),
    **dict.fromkeys(
        (
            "AssistantMessage",
            "BranchSummary",
            "CompactionBoundary",
            "CompactionDiscarded",
            "CostDecision",
            "Custom",
            "Entry",
            "Label",
            "LogEntry",
            "OutboxRecord",
            "PlanState",
            "PreparedCompaction",
            "Reasoning",
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
    **dict.fromkeys(("InMemorySession", "InMemorySessionStore"), "lamina.session._memory_store"),
    **dict.fromkeys(
        ("VIRTUAL_ROOT", "FileInfo", "SessionFiles", "SessionLog", "SessionStore", "SessionSummary"),
        "lamina.session._protocol",
    ),
    "ProviderView": "lamina.session._tree",
    **dict.fromkeys(("AppliedEdit", "ServerClearing"), "lamina.session._server_edits"),
    "entry_kind": "lamina.session._branch",
    "open_tool_calls": "lamina.session._branch",
    "BRANCH_SEED_HEADING": "lamina.session._bridges",
    **dict.fromkeys(("CacheCheck", "CacheMiss"), "lamina.session._cache_check"),
    "CompactionClaims": "lamina.session._claims",
    **dict.fromkeys(("EntryDescription", "describe_entry"), "lamina.session._describe"),
    "view_summary": "lamina.session._bridges",
    "BRIDGE_KINDS": "lamina.session._entries",
    "TURN_FAILED": "lamina.session._entries",
    **dict.fromkeys(("AttachmentRef", "ImageRendition"), "lamina.session._attachment_ref"),
    "Ledger": "lamina.session._entries",
    "PartRecord": "lamina.session._entries",
    "PinnedPart": "lamina.session._entries",
    "PinnedTool": "lamina.session._entries",
    "PlanSnapshot": "lamina.session._entries",
    "PlanStateName": "lamina.session._entries",
    "ProviderSession": "lamina.session._entries",
    "ReadStamp": "lamina.session._entries",
    "ServerCompaction": "lamina.session._server_block",
    "server_block": "lamina.session._server_block",
    "StateSnapshot": "lamina.session._entries",
    "UserLane": "lamina.session._entries",
    "UserWords": "lamina.session._entries",
    "is_hidden": "lamina.session._entries",
    "check_location": "lamina.session._location",
    "is_postgres_url": "lamina.session._location",
    "store_location": "lamina.session._location",
    "ForkOrigin": "lamina.session._protocol",
    "check_session_id": "lamina.session._stamp",
    "provider_view": "lamina.session._tree",
    **dict.fromkeys(("decode_entry", "encode_entry"), "lamina.session._entries"),
}


def __getattr__(name: str) -> object:
    return load_lazily(globals(), __name__, _LAZY, name)


__all__ = [
    "BRANCH_SEED_HEADING",
    "BRIDGE_KINDS",
    "TURN_FAILED",
    "VIRTUAL_ROOT",
    "AppliedEdit",
    "AssistantMessage",
    "AttachmentRef",
    "Branch",
    "BranchSummary",
    "BundleLimits",
    "CacheCheck",
    "CacheMiss",
    "CompactionBoundary",
    "CompactionClaims",
    "CompactionDiscarded",
    "CostDecision",
    "Custom",
    "Entry",
    "EntryDescription",
    "ExportResult",
    "FileInfo",
    "FileLayer",
    "ForkOrigin",
    "ImageRendition",
    "ImportResult",
    "InMemorySession",
    "InMemorySessionStore",
    "JsonlSession",
    "Label",
    "Ledger",
    "LocalSessionStore",
    "LogEntry",
    "OsFiles",
    "OutboxRecord",
    "PartRecord",
    "PinnedPart",
    "PinnedTool",
    "PlanSnapshot",
    "PlanState",
    "PlanStateName",
    "PreparedCompaction",
    "ProviderSession",
    "ProviderView",
    "ReadStamp",
    "Reasoning",
    "ServerClearing",
    "ServerCompaction",
    "SessionFiles",
    "SessionHealth",
    "SessionLog",
    "SessionStore",
    "SessionSummary",
    "StateChange",
    "StateSnapshot",
    "ToolCall",
    "ToolOutputPruned",
    "ToolResult",
    "TurnRecord",
    "UnknownEntry",
    "Usage",
    "UserLane",
    "UserMessage",
    "UserWords",
    "check_location",
    "check_session",
    "check_session_id",
    "check_store",
    "decode_entry",
    "describe_entry",
    "encode_entry",
    "entry_kind",
    "export_session",
    "import_session",
    "is_hidden",
    "is_postgres_url",
    "open_store",
    "open_tool_calls",
    "provider_view",
    "repair_session",
    "server_block",
    "store_location",
    "view_summary",
]
