"""The public surface, pinned exactly (as httpx pins its exported members): a change to it is deliberate.

A public module is one whose dotted path has no segment starting with `_`; everything else is
internal and may change without notice. Every public module has an `__all__`, listed here in full,
that names every public name the module defines: a module without one, or a name outside it, fails.
And every public name is used: by another package of src/lamina, a docs page, an example or a
benchmark, or named by the signature of a used one (tests/support/public_surface.py reads it all).
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import pkgutil
import subprocess
import sys
from pathlib import Path

import lamina
from tests.support.public_surface import Uses, origin, read_uses, signature_refs, unjustified

PUBLIC_MODULES = [
    "lamina",
    "lamina.agent",
    "lamina.attachments",
    "lamina.cachesim",
    "lamina.cli",
    "lamina.compaction",
    "lamina.context",
    "lamina.defang",
    "lamina.engine",
    "lamina.errors",
    "lamina.integrations",
    "lamina.integrations.langgraph",
    "lamina.integrations.openai_agents",
    "lamina.integrations.pydantic_ai",
    "lamina.placement",
    "lamina.pricing",
    "lamina.prompt",
    "lamina.providers",
    "lamina.reports",
    "lamina.serve",
    "lamina.session",
    "lamina.session.postgres",
    "lamina.shell",
    "lamina.sources",
    "lamina.tokens",
    "lamina.tools",
    "lamina.workspace",
]

SURFACE: dict[str, list[str]] = {
    "lamina": [
        "Agent",
        "AgentEvent",
        "AgentOptions",
        "AnthropicTarget",
        "AttachmentError",
        "AuthenticationError",
        "Authority",
        "CompactionOutcome",
        "ContextEngine",
        "ContextOverflowError",
        "LaminaError",
        "LocalSessionStore",
        "ModelCallFinished",
        "NamedBytes",
        "OpenAIChatTarget",
        "OpenAIResponsesTarget",
        "OverloadedError",
        "Part",
        "PermissionMode",
        "Provider",
        "ProviderError",
        "RateLimitError",
        "ScriptedProvider",
        "SdkManagedTarget",
        "SessionCorruptError",
        "SessionIOError",
        "SessionLockedError",
        "SessionNotFoundError",
        "SessionStore",
        "Stability",
        "Summariser",
        "Tier",
        "ToolFinished",
        "ToolPipeline",
        "ToolSpec",
        "ToolStarted",
        "TurnContext",
        "TurnOutcome",
        "UsageError",
        "WorkspaceContext",
        "find_context_files",
        "nearest_context_files",
        "open_agent",
        "provider_from_spec",
    ],
    "lamina.agent": [
        "Activation",
        "Agent",
        "AgentEvent",
        "AgentOptions",
        "ModelCallFinished",
        "PlanUpdate",
        "RecoveryBlock",
        "SkillCatalogue",
        "SkillToolsRule",
        "SkillWarning",
        "Thinking",
        "ToolFinished",
        "ToolProgress",
        "ToolStarted",
        "TurnOutcome",
        "open_agent",
        "open_engine",
        "recovery_text",
    ],
    "lamina.attachments": [
        "AttachmentError",
        "AttachmentInput",
        "AttachmentRef",
        "AttachmentRenderer",
        "AttachmentStore",
        "INLINE_TEXT_CHARS",
        "ImageRendition",
        "MAX_INPUT_PIXELS",
        "MediaSupport",
        "NamedBytes",
        "dropped_files",
        "media_tokens",
    ],
    "lamina.cachesim": [
        "AnthropicCacheRules",
        "AnthropicCacheSimulator",
        "CacheBreakpointError",
        "CacheMissPredictor",
        "CacheSimulationError",
        "CacheSimulator",
        "CacheSummary",
        "CacheUsage",
        "Divergence",
        "MissFormat",
        "OpenAICacheRules",
        "OpenAICacheSimulator",
        "TimedRequest",
        "cache_held",
        "find_divergence",
        "message_items",
        "openai_item",
        "openai_message",
        "settle_miss",
        "simulate",
        "summarise",
        "system_items",
        "text_block",
        "tool_items",
        "without_marker",
    ],
    "lamina.cli": [
        "app",
        "main",
    ],
    "lamina.compaction": [
        "CutPoint",
        "DEFAULT_KEEP_TOKENS",
        "DEFAULT_PRUNE",
        "DEFAULT_RESERVE",
        "DEFAULT_USER_LANE_TOKENS",
        "DeterministicSummariser",
        "LaneUpdate",
        "MAX_FILES",
        "ProviderSummariser",
        "PrunePolicy",
        "StructuredSummary",
        "Summariser",
        "SummaryResult",
        "apply_prunes",
        "archive_name",
        "archive_text",
        "choose_prune",
        "clip_text",
        "deterministic_summary",
        "dropped_count",
        "entry_tokens",
        "find_cut_point",
        "freed_enough",
        "parse_summary",
        "prunable_tokens",
        "prune_floor",
        "render_lane",
        "reread_chances",
        "should_compact",
        "summary_prompt",
        "turn_prefix_item",
        "update_lane",
        "update_ledger",
    ],
    "lamina.context": [
        "AttachmentBlocks",
        "Authority",
        "Block",
        "DocumentBlock",
        "INTERRUPTED_RESULT",
        "ImageBlock",
        "Message",
        "OneShot",
        "Part",
        "ReasoningBlock",
        "SafeText",
        "Stability",
        "StableChange",
        "StableContext",
        "TextBlock",
        "Tier",
        "ToolResultBlock",
        "ToolSpec",
        "ToolUseBlock",
        "TurnContext",
        "VolatileInputs",
        "attached_blocks",
        "attachment_note",
        "build_volatile_parts",
        "changed_volatile",
        "is_on_demand_read",
        "message_parts",
        "path_of",
        "pin_stable",
        "prelude_messages",
        "render_tail",
        "split_turns",
        "stable_update_text",
        "tail_parts",
        "to_messages",
        "tool_call_of",
        "tool_part",
        "turn_tails",
    ],
    "lamina.defang": [
        "Authority",
        "RESERVED_TAG_NAMES",
        "SafeText",
        "contains_reserved_marker",
        "defang",
        "escape_path",
        "join",
        "neutralise",
        "render_block",
        "show_controls",
        "trusted",
    ],
    "lamina.engine": [
        "CompactionEvent",
        "CompactionOutcome",
        "CompactionStatus",
        "Compactor",
        "ContextEngine",
        "LoggedTurn",
        "OPEN_STATES",
        "Plan",
        "PlanStateName",
        "PlanStep",
        "PlanTransitionError",
        "ProviderSessionBook",
        "RecordedSettings",
        "SessionPlans",
        "SessionSettings",
        "StableSource",
        "advance",
        "assemble_turn",
        "continuation_message",
        "execution_message",
        "logged_turn",
        "next_step",
        "prefix_context",
        "provider_session_in_view",
        "recorded_settings",
        "recorded_tools",
        "rejection_message",
    ],
    "lamina.errors": [
        "AttachmentError",
        "AuthenticationError",
        "BundleError",
        "ConfigError",
        "ContextOverflowError",
        "EntryDecodeError",
        "InvalidRequestError",
        "LaminaError",
        "LaminaRuntimeError",
        "MissingEntryError",
        "MissingExtraError",
        "OverloadedError",
        "ProviderError",
        "ProviderSessionLostError",
        "RateLimitError",
        "SessionCorruptError",
        "SessionError",
        "SessionExistsError",
        "SessionIOError",
        "SessionLeaseLostError",
        "SessionLockedError",
        "SessionNotFoundError",
        "SourceConnectionError",
        "SourceError",
        "StoreConnectionError",
        "StoreError",
        "StoreReadOnlyError",
        "StoreSchemaError",
        "TooManyModelCallsError",
        "ToolDefinitionError",
        "TransientServerError",
        "UnknownPresetError",
        "UsageError",
    ],
    "lamina.integrations": [
        "CompactionPolicy",
        "LaminaThread",
        "ThreadOptions",
        "project_parts",
    ],
    "lamina.integrations.langgraph": [
        "CompactionPolicy",
        "LaminaCheckpointSaver",
        "THREAD_SESSION_PREFIX",
        "ThreadOptions",
    ],
    "lamina.integrations.openai_agents": [
        "CompactionPolicy",
        "ItemTypeError",
        "LaminaSession",
        "SessionClosedError",
        "ThreadOptions",
    ],
    "lamina.integrations.pydantic_ai": [
        "CompactionPolicy",
        "LaminaCapability",
        "LaminaHistory",
        "ThreadOptions",
    ],
    "lamina.placement": [
        "AnthropicTarget",
        "CacheTtl",
        "Effort",
        "OpenAIChatTarget",
        "OpenAIResponsesTarget",
        "ReasoningConfig",
        "ReasoningOwner",
        "RenderCache",
        "RenderTarget",
        "RenderedRequest",
        "SdkManagedPrompt",
        "SdkManagedTarget",
        "WireConverter",
        "foreign_reasoning",
        "reasoning_owner",
        "render",
        "replayed",
    ],
    "lamina.pricing": [
        "CachePrices",
        "CacheState",
        "DEFAULT_PRICES",
        "Outlook",
        "PaceTracker",
        "PruneItem",
        "SessionPace",
        "choose_turn_ttl",
        "cost_of",
        "decision_on",
        "describe_decision",
        "price_compaction",
        "price_prune",
        "price_reasoning_replay",
    ],
    "lamina.prompt": [
        "DEFAULT_PRESET",
        "Platform",
        "Preset",
        "PresetFileError",
        "PromptInputs",
        "compose_sections",
        "escape_path",
        "get_preset",
        "parse_custom_preset",
        "system_prompt",
    ],
    "lamina.providers": [
        "AnthropicProvider",
        "CacheRegime",
        "Capabilities",
        "ClaudeAgentProvider",
        "Completed",
        "OpenAIChatProvider",
        "OpenAIResponsesProvider",
        "Provider",
        "ProviderCompacted",
        "ProviderEvent",
        "ProviderSessionChanged",
        "ReasoningDelta",
        "RetryNotice",
        "RetryPolicy",
        "ScriptError",
        "ScriptExhaustedError",
        "ScriptStep",
        "ScriptedError",
        "ScriptedProvider",
        "ScriptedResponse",
        "ScriptedToolCall",
        "TextDelta",
        "ToolCallRequest",
        "ask_cache_diagnostics",
        "provider_from_spec",
        "stream_with_retry",
    ],
    "lamina.reports": [
        "BodyBlock",
        "Breakpoint",
        "BudgetReport",
        "CacheLayout",
        "CacheMissReport",
        "CacheRegion",
        "Component",
        "KINDS",
        "LayoutBlock",
        "LoggedRequest",
        "NEXT_MESSAGE",
        "RecordedPrefixes",
        "RecordedTools",
        "ReplayedRequest",
        "RequestComposition",
        "SessionComposition",
        "TIER_LABELS",
        "TierTokens",
        "block_tokens",
        "body_blocks",
        "budget_of_turn",
        "cache_layout",
        "compose_entries",
        "compose_turn",
        "explain_miss",
        "logged_requests",
        "replay_request",
        "session_json",
        "session_misses",
        "tool_tokens",
    ],
    "lamina.serve": [
        "create_app",
        "needs_token",
    ],
    "lamina.session": [
        "AssistantMessage",
        "AttachmentRef",
        "BRANCH_SEED_HEADING",
        "BRIDGE_KINDS",
        "Branch",
        "BranchSummary",
        "BundleLimits",
        "CacheCheck",
        "CacheMiss",
        "CompactionBoundary",
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
        "ProviderSession",
        "ProviderView",
        "ReadStamp",
        "Reasoning",
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
        "VIRTUAL_ROOT",
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
        "store_location",
        "view_summary",
    ],
    "lamina.session.postgres": [
        "PostgresSession",
        "PostgresSessionStore",
        "SCHEMA_VERSION",
        "split_url",
    ],
    "lamina.shell": [
        "CommandReading",
        "FileAccess",
        "FileUses",
        "Redirect",
        "SimpleCommand",
        "Word",
        "could_run",
        "file_uses",
        "read_command",
    ],
    "lamina.sources": [
        "ApiConnection",
        "ApiEndpoint",
        "ApiSource",
        "ConnectionProblem",
        "McpConnection",
        "McpHttp",
        "McpSource",
        "McpStdio",
        "Source",
        "SourceConnectionError",
        "SourceConnections",
        "SourceProblem",
        "SourceScan",
        "SourceTool",
        "calls_to_source",
        "describe_source",
        "find_sources",
        "guide_path",
        "slug_problem",
    ],
    "lamina.tokens": [
        "CharTokenEstimator",
        "DEFAULT_ESTIMATOR",
        "TokenEstimator",
    ],
    "lamina.tools": [
        "Allow",
        "Ask",
        "AskCallback",
        "BashTool",
        "BoundCall",
        "Deny",
        "EditTool",
        "GlobTool",
        "GrepTool",
        "NearestContextFileRule",
        "OffloadPolicy",
        "PermissionMode",
        "PermissionRequest",
        "PlanSink",
        "PrerequisiteManager",
        "PrerequisiteNotice",
        "ReadTool",
        "Requirement",
        "Rewrite",
        "Rule",
        "SandboxSettings",
        "StructTool",
        "SubmitPlanTool",
        "Tool",
        "ToolCall",
        "ToolContext",
        "ToolExecution",
        "ToolInputError",
        "ToolOutput",
        "ToolPipeline",
        "Verdict",
        "WriteTool",
        "default_tool_specs",
        "default_tools",
        "walk_files",
    ],
    "lamina.workspace": [
        "CONTEXT_FILE_NAMES",
        "ContextFile",
        "ContextFileFinder",
        "ContextFileScan",
        "FolderListing",
        "Located",
        "MentionResolution",
        "PROJECT_FILE",
        "PathEscapeError",
        "Preferences",
        "PreferencesError",
        "ProjectFileError",
        "ProjectManifest",
        "ProjectMemory",
        "SKIPPED_DIR_NAMES",
        "Skill",
        "SkillProblem",
        "SkillScan",
        "SkillStamps",
        "SkippedPath",
        "TRUNCATION_MARK",
        "TrustedWorkspace",
        "WalkPolicy",
        "WalkedFile",
        "WalkedFolder",
        "WorkspaceContext",
        "WorkspaceSnapshot",
        "WorkspaceTrust",
        "detect_platform",
        "find_context_files",
        "find_skills",
        "load_preset",
        "load_project",
        "locate",
        "nearest_context_files",
        "outside_roots",
        "parse_skill_mentions",
        "resolve_mentions",
        "revoke_trust",
        "skill_catalogue_part",
        "skill_stamps",
        "trust_workspace",
        "trusted_workspaces",
        "walk_folders",
        "workspace_trust",
    ],
}


ENGINE_MEMBERS: dict[str, list[str]] = {
    # the engine keeps the turn and its one write path; the rest is in the parts it owns
    "ContextEngine": [
        "attachment_blocks",
        "attachments",
        "boundary",
        "branch",
        "close",
        "closed",
        "commit",
        "compactor",
        "continuation",
        "end_turn",
        "estimator",
        "in_view",
        "pending_one_shots",
        "plans",
        "prepare_turn",
        "preview_turn",
        "provider_sessions",
        "queue_one_shot",
        "record",
        "reprepare",
        "request",
        "session",
        "settings",
        "time_zone",
        "tools",
        "view",
        "volatile_inputs",
        "window_calls",
    ],
    "SessionSettings": [
        "active_sources",
        "add_skills",
        "mode",
        "note_foreign_reasoning",
        "observe",
        "previous_mode",
        "recorded",
        "set_mode",
        "set_model",
        "set_preset",
        "set_reasoning",
        "set_sources",
        "skills_in_use",
        "state",
    ],
    "SessionPlans": ["latest", "record", "submit"],
    "Compactor": [
        "cache_prices",
        "calibrated_context_tokens",
        "calibration",
        "compact",
        "context_tokens",
        "emit",
        "hooks",
        "listeners",
        "next_prune",
        "observe",
        "observe_usage",
        "outlook",
        "price",
        "prune",
        "prune_policy",
        "resumed",
        "turn_ttl",
    ],
    "ProviderSessionBook": ["all", "clear", "compacted", "follow", "get", "observe", "reset_hooks", "set"],
}


def _public_modules() -> list[str]:
    names = ["lamina"]
    for info in pkgutil.walk_packages(lamina.__path__, prefix="lamina."):
        if not any(segment.startswith("_") for segment in info.name.split(".")[1:]):
            names.append(info.name)
    return sorted(names)


def test_the_public_modules_are_exactly_these() -> None:
    assert _public_modules() == PUBLIC_MODULES


def _defined_public_names(module_name: str) -> set[str]:
    """The names a module's own source binds at its top level (classes, functions, assignments) without a `_`."""
    spec = importlib.util.find_spec(module_name)
    assert spec is not None and spec.origin is not None, module_name
    names: set[str] = set()
    for node in ast.parse(Path(spec.origin).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if not name.startswith("_")}


def test_every_public_module_has_an_all_and_its_names_are_pinned() -> None:
    assert sorted(SURFACE) == PUBLIC_MODULES
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        assert isinstance(getattr(module, "__all__", None), list), f"{module_name} has no __all__"


def test_every_public_name_a_public_module_defines_is_in_its_all() -> None:
    for module_name in PUBLIC_MODULES:
        exported = set(importlib.import_module(module_name).__all__)
        missing = _defined_public_names(module_name) - exported
        assert not missing, (
            f"{module_name} defines {sorted(missing)}: add them to __all__ (pinned here) or make them private"
        )


def test_each_public_package_exports_exactly_its_pinned_names_and_each_resolves() -> None:
    for module_name, names in SURFACE.items():
        module = importlib.import_module(module_name)
        assert sorted(module.__all__) == names, module_name
        for name in names:
            assert getattr(module, name) is not None, f"{module_name}.{name}"


def test_top_level_all_is_sorted() -> None:
    names = list(lamina.__all__)
    assert names == sorted(names, key=lambda n: (n[0].islower(), n))


def test_importing_lamina_does_not_import_the_provider_sdks() -> None:
    code = "import sys, lamina; print(any(m in sys.modules for m in ('anthropic', 'openai', 'claude_agent_sdk')))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_the_engine_and_its_parts_offer_exactly_their_pinned_members() -> None:
    from lamina.engine import ContextEngine
    from lamina.session import InMemorySessionStore

    with InMemorySessionStore() as store, ContextEngine(store.create(cwd="."), stable_source=lambda: ()) as engine:
        parts = {"ContextEngine": engine, "SessionSettings": engine.settings, "SessionPlans": engine.plans}
        parts |= {"Compactor": engine.compactor, "ProviderSessionBook": engine.provider_sessions}
        members = {name: sorted(n for n in dir(part) if not n.startswith("_")) for name, part in parts.items()}
        engine.session.close()
    assert members == ENGINE_MEMBERS


@functools.cache
def _surface_uses() -> Uses:
    return read_uses(SURFACE)


def test_every_public_name_is_used_outside_its_package_or_named_by_a_public_signature() -> None:
    unused = sorted(".".join(door) for door in unjustified(_surface_uses()))
    assert unused == [], (
        "used by no other package, docs page (docs/reference/ aside), example or benchmark, and in no public "
        "signature: make them private (and list them in CHANGELOG.md), or name them where they belong"
    )


def test_the_use_reader_counts_other_packages_pages_and_signatures(tmp_path: Path) -> None:
    uses = Uses({"lamina.session": ["Label", "LogEntry", "Usage", "UserMessage"], "lamina.tools": ["ToolCall"]})
    code = "import lamina.session as s\ndef f() -> None:\n    from lamina.session import Usage\n    s.Label\n"
    uses.read_python(ast.parse(code), "lamina.session:", "lamina.session._location")  # its own package
    assert uses.direct == {}
    uses.read_python(ast.parse(code), "lamina.engine:", "lamina.engine._state")
    assert set(uses.direct) == {("lamina.session", "Usage"), ("lamina.session", "Label")}
    page = tmp_path / "page.md"
    page.write_text(
        "`LogEntry` and [a message][lamina.session.UserMessage]; ToolCall, a word in prose, is not a use.\n"
        "```python\nfrom lamina.tools import ToolCall as Call\n```\n",
        encoding="utf-8",
    )
    uses.direct.clear()
    uses.read_markdown(page)
    assert set(uses.direct) == {
        ("lamina.session", "LogEntry"),
        ("lamina.session", "UserMessage"),
        ("lamina.tools", "ToolCall"),
    }
    refs = signature_refs(origin("lamina.session", "import_session"))
    assert {origin("lamina.session", "BundleLimits"), origin("lamina.session", "ImportResult")} <= refs
