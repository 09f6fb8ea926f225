"""Wiring: an agent, or an engine for reports, over a workspace the usual way (I/O: opens workspace and session).

`open_agent` builds the agent; `open_engine` the engine alone, for reports.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lamina.agent._activation import Activation, SkillCatalogue, SkillWarning, nearest_context_paths, window_reads
from lamina.agent._events import AgentEvent
from lamina.agent._loop import Agent
from lamina.agent._priced import DEFAULT_COMPACTION_BAND
from lamina.compaction import (
    DEFAULT_KEEP_TOKENS,
    DEFAULT_PRICES,
    DEFAULT_PRUNE,
    DEFAULT_USER_LANE_TOKENS,
    CachePrices,
    PrunePolicy,
    Summariser,
)
from lamina.context import Part
from lamina.engine import ContextEngine
from lamina.prompt import Preset
from lamina.providers import Provider, RetryPolicy, provider_from_spec
from lamina.session import SessionLog, SessionStore
from lamina.sources import SourceConnections, guide_path
from lamina.tools import (
    AskCallback,
    BashTool,
    NearestContextFileRule,
    OffloadPolicy,
    PermissionMode,
    PrerequisiteManager,
    Requirement,
    Rule,
    SandboxSettings,
    Tool,
    ToolContext,
    ToolPipeline,
    default_tools,
)
from lamina.workspace import PROJECT_FILE, ContextFileFinder, WorkspaceContext, detect_platform, load_preset


def open_agent(
    store: SessionStore,
    provider: Provider | str,
    *,
    workspace: Path,
    session_id: str | None = None,
    mode: PermissionMode | str = PermissionMode.ASK,
    preset: str | Preset = "default",
    custom_preset: str | os.PathLike[str] | None = None,
    interactive: bool | None = None,
    ask: AskCallback | None = None,
    on_event: Callable[[AgentEvent], None] | None = None,
    retry: RetryPolicy | None = None,
    summariser: Summariser | None = None,
    keep_tokens: int = DEFAULT_KEEP_TOKENS,
    user_lane_tokens: int = DEFAULT_USER_LANE_TOKENS,
    prune: PrunePolicy | None = DEFAULT_PRUNE,
    compaction_band: float | None = DEFAULT_COMPACTION_BAND,
    cache_prices: CachePrices | None = None,
    clock: Callable[[], float] = time.time,
    sources: SourceConnections | None = None,
    strict_prerequisites: bool = True,
    nearest_context_rule: bool = True,
    skills_dir: Path | None = None,
    sandbox: SandboxSettings | None = None,
) -> Agent:
    """An agent on a new session in `workspace`, or on session `session_id` resumed.

    Wires the pieces the usual way: the workspace's stable context (preset, context files, memory,
    preferences, skill catalogue), the built-in tools and any connected `sources` behind the
    pre-tool-use pipeline (confined to `workspace`, results offloaded to the session's `data/`
    folder, skills and guides enforced as prerequisites, the nearest AGENTS.md required before an
    edit), and the provider. A `.lamina/project.toml` that cannot be used is skipped, and
    `on_event` gets a `SkillWarning` naming the file and the field.

    The agent owns the session it opens: `agent.close()`, or `with open_agent(...) as agent:`,
    closes it; `store`, `provider` and `sources` stay open for the caller.

    Args:
        store: Where the session is created or found.
        provider: A `Provider` or a model spec such as `anthropic:claude-sonnet-5`, `openai:gpt-5`
            or `scripted:FILE`, read by `lamina.providers.provider_from_spec` as `lamina chat
            --model` reads it; a provider built from a spec is the agent's, closed with it.
        workspace: The project folder the agent works in.
        session_id: The session to resume; None for a new one.
        mode: The permission mode of a new session; a resumed session keeps its recorded mode.
        preset: `default`, `mini`, `custom` (with `custom_preset`) or a `Preset`.
        custom_preset: The custom preset's TOML file.
        interactive: Picks the prompt's platform section: True when a person reads the replies and
            can answer, False for the headless one (scripts, CI); None (the default) decides by
            whether stdin and stdout are terminals.
        ask: Asks the user about a tool call a rule or the permission mode leaves to them.
        on_event: Gets each event of a turn as it happens.
        retry: How provider calls are retried.
        summariser: Writes compaction summaries (the provider itself unless given).
        keep_tokens: Recent tokens a compaction keeps verbatim.
        user_lane_tokens: Tokens of the user's own messages shown after a compaction summary.
        prune: When old tool output leaves the provider view before a turn
            (`lamina.compaction.PrunePolicy`; None: never).
        compaction_band: From this fraction of the compaction threshold on, compact before a turn
            when the cost model expects it to pay (`Agent.compaction_band`; None: only at the threshold).
        cache_prices: The prices prunes, TTLs and compactions are decided with; None (the default):
            those of the provider the agent runs on (`CachePrices.for_target`), followed when it changes.
        clock: The time the engine reads, in seconds since the epoch (the cache's state is priced from it).
        sources: Connected sources whose tools the agent offers.
        strict_prerequisites: Keep denying calls until a required read (a skill, a guide) is done,
            however often the model tries; if False, let them through once the agent is stuck.
        nearest_context_rule: Whether the nearest AGENTS.md must be read before an edit.
        skills_dir: The user-level skills folder; else `$LAMINA_SKILLS_DIR`, else the default one.
        sandbox: How Bash commands are confined; None: `SandboxSettings()` (on where the machine allows
            it). When it is enabled but cannot confine here, `on_event` gets a `SkillWarning` named
            `sandbox` saying why, once, as the first command runs unconfined.

    Returns:
        The agent, its session open.

    Raises:
        UnknownPresetError, PresetFileError, UsageError: The preset or the model spec cannot be
            used (checked before any session is created).
    """
    owns_provider = isinstance(provider, str)
    if isinstance(provider, str):
        provider = provider_from_spec(provider)
    chosen = load_preset(preset, custom_path=custom_preset)
    session = store.open(session_id) if session_id else store.create(cwd=str(workspace))
    try:
        wired = _wire_workspace(workspace, chosen, interactive=interactive, skills_dir=skills_dir, sandbox=sandbox)
        context, catalogue = wired.context, wired.catalogue
        problem = context.snapshot().project_problem
        if problem is not None and on_event is not None:  # skipped like a bad SKILL.md; the user is told at start
            on_event(SkillWarning(str(PROJECT_FILE), f"{problem} (the file is skipped)"))
        for bash in (t for t in wired.tools if isinstance(t, BashTool)):
            bash.on_notice = _sandbox_notice(on_event)
        tools = [*wired.tools, *(sources.tools if sources else ())]
        engine = ContextEngine(
            session,
            stable_source=wired.stable_source,
            tools=tuple(t.spec for t in tools),
            time_zone=context.time_zone,
            mode=PermissionMode(mode).value,
            prune=prune,
            owns_session=True,
            clock=clock,
            cache_prices=cache_prices if cache_prices is not None else CachePrices.for_target(provider.target),
        )

        def submit_plan(title: str, path: str, text: str) -> str:
            return engine.plans.submit(title=title, plan_path=path, text=text).plan_id

        tool_context = ToolContext(
            cwd=workspace,
            data_dir=session.data_dir,
            mode=PermissionMode(engine.settings.mode),
            plans_dir=engine.session.plans_dir,
            submit_plan=submit_plan,
            offload=OffloadPolicy.for_context_window(provider.capabilities.context_window),
            attachments=engine.attachments,
            files=session,
        )

        def stuck(requirement: Requirement, denials: int) -> None:
            if on_event is not None:  # the user learns the agent is stuck; strict mode keeps blocking
                message = f"the agent is stuck: {denials} calls denied until it reads {requirement.path}"
                on_event(SkillWarning(requirement.key, f"{message} ({requirement.reason})"))

        manager = PrerequisiteManager(strict=strict_prerequisites, on_stuck=stuck)
        rules: list[Rule] = [manager.rule()]
        if nearest_context_rule:
            rules.append(NearestContextFileRule(manager, nearest_context_paths(wired.finder, workspace)))
        pipeline = ToolPipeline(tools, tool_context, rules=rules, ask=ask)
        activation = Activation(engine, manager, catalogue, cwd=workspace)
        pipeline.add_rule(activation.rule())  # the active skill's allowed tools
        if sources is not None:
            for source in sources.sources:
                activation.add_source(source.slug, guide_path(source))
            if not session_id:
                engine.settings.set_sources([s.slug for s in sources.sources])
        if session_id:  # a reopened session: the skills in use and the reads met are its path's, as on a branch
            activation.after_branch(window_reads(engine, pipeline))
    except BaseException:
        session.close()
        raise
    return Agent(
        engine,
        provider,
        pipeline,
        retry=retry or RetryPolicy(),
        on_event=on_event,
        summariser=summariser,
        keep_tokens=keep_tokens,
        user_lane_tokens=user_lane_tokens,
        compaction_band=compaction_band,
        cache_prices=cache_prices,
        activation=activation,
        owns_engine=True,
        owns_provider=owns_provider,
    )


def open_engine(
    session: SessionLog,
    *,
    workspace: Path,
    preset: str | Preset = "default",
    custom_preset: str | os.PathLike[str] | None = None,
    interactive: bool | None = False,
    skills_dir: Path | None = None,
    cache_prices: CachePrices = DEFAULT_PRICES,
) -> ContextEngine:
    """A context engine over `session` with the stable parts and built-in tools `open_agent` would give it.

    No provider and no tool runs: for reports on a stored session (`lamina sessions budget`) and
    compaction without an agent (`lamina sessions compact`), whose token counts then include the
    stable parts and tool definitions. A source's tools are left out (they need a connection).
    The engine records nothing when it is created; `session` may be read-only for a report.
    `cache_prices` are those its cost model decides with (Anthropic's unless given: no provider is
    known here; `CachePrices.for_target` gives a target's).
    """
    chosen = load_preset(preset, custom_path=custom_preset)
    wired = _wire_workspace(workspace, chosen, interactive=interactive, skills_dir=skills_dir)
    return ContextEngine(
        session,
        stable_source=wired.stable_source,
        tools=tuple(t.spec for t in wired.tools),
        time_zone=wired.context.time_zone,
        cache_prices=cache_prices,
    )


def _sandbox_notice(on_event: Callable[[AgentEvent], None] | None) -> Callable[[str], None] | None:
    """What Bash calls when it runs unconfined although its sandbox is enabled: a `sandbox` warning event."""
    if on_event is None:
        return None

    def notice(message: str) -> None:
        on_event(SkillWarning("sandbox", message))

    return notice


session_engine = open_engine
"""The name `open_engine` had before `lamina.agent` became a package; kept for its callers."""


@dataclass(frozen=True, slots=True)
class _Wiring:
    tools: tuple[Tool[Any], ...]
    """The built-in tools the preset keeps."""
    context: WorkspaceContext
    catalogue: SkillCatalogue
    finder: ContextFileFinder

    def stable_source(self) -> tuple[Part, ...]:
        return (*self.context(), *self.catalogue.parts())


def _wire_workspace(
    workspace: Path,
    preset: Preset,
    *,
    interactive: bool | None,
    skills_dir: Path | None,
    sandbox: SandboxSettings | None = None,
) -> _Wiring:
    """The workspace's stable context, skill catalogue and built-in tools, the one way agents and reports build them."""
    if interactive is None:
        interactive = sys.stdin.isatty() and sys.stdout.isatty()
    tools = default_tools(
        sandbox=sandbox
    )  # the preset keeps its own (mini: the six and SubmitPlan, as the default has it)
    finder = ContextFileFinder()
    context = WorkspaceContext(
        workspace,
        preset=preset,
        tools=tuple(t.spec for t in tools),
        finder=finder,
        platform=detect_platform(interactive=interactive),
    )
    allowed = {s.name for s in context.tools}
    kept = tuple(t for t in tools if t.spec.name in allowed)
    return _Wiring(kept, context, SkillCatalogue(workspace, user_dir=skills_dir), finder)
