"""Wiring: an agent, or an engine for reports, over a workspace the usual way (I/O: opens workspace and session).

`open_agent` builds the agent; `open_engine` the engine alone, for reports.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Unpack

from lamina.agent._activation import Activation, SkillCatalogue, SkillWarning, nearest_context_paths, window_reads
from lamina.agent._agent_options import DEFAULT_OPTIONS, AgentOptions, DeprecatedKeywords, chosen_options
from lamina.agent._events import AgentEvent
from lamina.agent._loop import Agent
from lamina.agent._tool_catalogue import DeferredTools
from lamina.agent._tool_sets import ToolDeferral
from lamina.attachments import MediaSupport
from lamina.context import Part
from lamina.engine import ContextEngine
from lamina.placement import CLEAR_TOOL_USES, AnthropicTarget
from lamina.pricing import DEFAULT_PRICES, CachePrices, ContextEditing
from lamina.prompt import Preset
from lamina.providers import AnthropicProvider, Capabilities, Provider, RetryPolicy, provider_from_spec
from lamina.session import SessionLog, SessionStore
from lamina.sources import SourceConnections, guide_path
from lamina.tools import (
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
    model: Provider | str | None = None,
    *,
    workspace: Path,
    session_id: str | None = None,
    options: AgentOptions = DEFAULT_OPTIONS,
    **deprecated: Unpack[DeprecatedKeywords],
) -> Agent:
    """An agent on a new session in `workspace`, or on session `session_id` resumed.

    Wires the pieces the usual way: the workspace's stable context (preset, context files, memory,
    preferences, skill catalogue), the built-in tools and any connected `options.sources` behind the
    pre-tool-use pipeline (confined to `workspace`, results offloaded to the session's `data/`
    folder, skills and guides enforced as prerequisites, the nearest AGENTS.md required before an
    edit), and the provider. A `.lamina/project.toml` that cannot be used is skipped, and
    `options.on_event` gets a `SkillWarning` naming the file and the field.

    The agent owns the session it opens: `agent.close()`, or `with open_agent(...) as agent:`,
    closes it; `store`, `model` and the sources stay open for the caller.

    Args:
        store: Where the session is created or found.
        model: A `Provider` or a model spec such as `anthropic:claude-sonnet-5`, `openai:gpt-5`
            or `scripted:FILE`, read by `lamina.providers.provider_from_spec` as `lamina chat
            --model` reads it; a provider built from a spec is the agent's, closed with it.
        workspace: The project folder the agent works in.
        session_id: The session to resume; None for a new one.
        options: Everything else (`AgentOptions`: mode, preset, compaction, the tools' rules, ...).
        **deprecated: The fields of `AgentOptions` as keyword arguments, and `provider` for `model`, as
            `open_agent` took them before: deprecated, each with a `DeprecationWarning`.

    Returns:
        The agent, its session open.

    Raises:
        UnknownPresetError, PresetFileError, UsageError: The preset or the model spec cannot be
            used (checked before any session is created).
        TypeError: No model was given, or a keyword argument names no field of `AgentOptions`.
    """
    model, chosen = chosen_options(model, options, deprecated)
    provider = provider_from_spec(model) if isinstance(model, str) else model
    preset = load_preset(chosen.preset, custom_path=chosen.custom_preset)
    session = store.open(session_id) if session_id else store.create(cwd=str(workspace))
    if chosen.context_editing is not None and isinstance(provider, AnthropicProvider):
        provider.context_editing = chosen.context_editing  # the session's setting: what requests may carry
    reads = _ProviderReads(provider, chosen.cache_prices)
    try:
        engine, pipeline, activation = _agent_parts(session, reads, workspace, preset, chosen, resumed=bool(session_id))
    except BaseException:
        session.close()
        raise
    reads.agent = Agent(
        engine,
        provider,
        pipeline,
        retry=chosen.retry or RetryPolicy(),
        on_event=chosen.on_event,
        summariser=chosen.summariser,
        keep_tokens=chosen.keep_tokens,
        user_lane_tokens=chosen.user_lane_tokens,
        compaction_band=chosen.compaction_band,
        cache_prices=chosen.cache_prices,
        cache_diagnostics=chosen.cache_diagnostics,
        prewarm=chosen.prewarm,
        activation=activation,
        owns_engine=True,
        owns_provider=isinstance(model, str),
    )
    return reads.agent


def _agent_parts(
    session: SessionLog,
    reads: _ProviderReads,
    workspace: Path,
    preset: Preset,
    options: AgentOptions,
    *,
    resumed: bool,
) -> tuple[ContextEngine, ToolPipeline, Activation]:
    """The engine, the tool pipeline and the skills' activation of an agent on `session`, built from `options`.

    The engine reads the prices and the model's media through `reads` (the agent's, once it is built).
    """
    provider = reads.provider
    on_event = options.on_event
    wired = _wire_workspace(
        workspace, preset, interactive=options.interactive, skills_dir=options.skills_dir, sandbox=options.sandbox
    )
    problem = wired.context.snapshot().project_problem
    if problem is not None and on_event is not None:  # skipped like a bad SKILL.md; the user is told at start
        on_event(SkillWarning(str(PROJECT_FILE), f"{problem} (the file is skipped)"))
    for bash in (t for t in wired.tools if isinstance(t, BashTool)):
        bash.on_notice = _sandbox_notice(on_event)
    sources = options.sources
    tools = [*wired.tools, *(sources.tools if sources else ())]
    deferred = _deferred_tools(wired.tools, sources, options.tool_deferral)
    engine = ContextEngine(
        session,
        stable_source=wired.stable_source,
        tools=tuple(t.spec for t in tools),
        time_zone=wired.context.time_zone,
        mode=PermissionMode(options.mode).value,
        prune=options.prune,
        owns_session=True,
        clock=options.clock,
        prices=reads.prices,
        media=reads.media,
    )
    engine.compactor.context_editing = reads.context_editing
    manager = PrerequisiteManager(strict=options.strict_prerequisites, on_stuck=_stuck_warning(on_event))
    rules: list[Rule] = [manager.rule()]
    if options.nearest_context_rule:
        rules.append(NearestContextFileRule(manager, nearest_context_paths(wired.finder, workspace)))
    if deferred is not None:
        rules.append(deferred.rule())
        tools.append(deferred.tool())
        deferred.observe(call for call, _ in engine.window_calls())  # a reopened session: the schemas it loaded
    pipeline = ToolPipeline(tools, _tool_context(engine, provider, workspace), rules=rules, ask=options.ask)
    activation = Activation(engine, manager, wired.catalogue, cwd=workspace)
    pipeline.add_rule(activation.rule())  # the active skill's allowed tools
    for source in sources.sources if sources is not None else ():
        activation.add_source(source.slug, guide_path(source))
    if sources is not None and not resumed:
        engine.settings.set_sources([s.slug for s in sources.sources])
    if resumed:  # a reopened session: the skills in use and the reads met are its path's, as on a branch
        activation.after_branch(window_reads(engine, pipeline))
    if deferred is not None:  # each turn's tool set, for the model the agent runs on then
        activation.turn_hooks.append(lambda: deferred.refresh(engine, reads.capabilities()))
    return engine, pipeline, activation


def _deferred_tools(
    builtin: Sequence[Tool[Any]], sources: SourceConnections | None, deferral: ToolDeferral | None
) -> DeferredTools | None:
    """The sources' tools, to defer when `deferral` says so (None: no source tools, or never deferred)."""
    if sources is None or not sources.tools or deferral is None:
        return None
    return DeferredTools([t.spec for t in builtin], [t.spec for t in sources.tools], deferral)


def _tool_context(engine: ContextEngine, provider: Provider, workspace: Path) -> ToolContext:
    """What the tools of an agent on `engine` run with: the workspace, the session's folders, the mode, plans."""

    def submit_plan(title: str, path: str, text: str) -> str:
        return engine.plans.submit(title=title, plan_path=path, text=text).plan_id

    return ToolContext(
        cwd=workspace,
        data_dir=engine.session.data_dir,
        mode=PermissionMode(engine.settings.mode),
        plans_dir=engine.session.plans_dir,
        submit_plan=submit_plan,
        offload=OffloadPolicy.for_context_window(provider.capabilities.context_window),
        attachments=engine.attachments,
        files=engine.session,
    )


def _stuck_warning(on_event: Callable[[AgentEvent], None] | None) -> Callable[[Requirement, int], None]:
    """What the prerequisites call when the agent is stuck: a warning event (strict mode keeps blocking)."""

    def stuck(requirement: Requirement, denials: int) -> None:
        if on_event is not None:  # the user learns the agent is stuck
            message = f"the agent is stuck: {denials} calls denied until it reads {requirement.path}"
            on_event(SkillWarning(requirement.key, f"{message} ({requirement.reason})"))

    return stuck


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
        prices=lambda: cache_prices,
    )


def _sandbox_notice(on_event: Callable[[AgentEvent], None] | None) -> Callable[[str], None] | None:
    """What Bash calls when it runs unconfined although its sandbox is enabled: a `sandbox` warning event."""
    if on_event is None:
        return None

    def notice(message: str) -> None:
        on_event(SkillWarning("sandbox", message))

    return notice


@dataclass(slots=True)
class _ProviderReads:
    """What the engine reads of the agent at each use: its prices and media (`/model` may switch its provider)."""

    provider: Provider
    cache_prices: CachePrices | None
    agent: Agent | None = None
    """The agent, once built: its provider and `cache_prices` are read from then on."""

    def prices(self) -> CachePrices:
        """The agent's `cache_prices`, else those of the provider it runs on now."""
        given = self.agent.cache_prices if self.agent is not None else self.cache_prices
        return given if given is not None else CachePrices.for_target(self._provider().target)

    def context_editing(self) -> ContextEditing:
        """Whether prunes price the server's clearing: the provider's setting where its model has `clear_tool_uses`."""
        provider = self._provider()
        target = provider.target
        if isinstance(provider, AnthropicProvider) and isinstance(target, AnthropicTarget):
            return provider.context_editing if CLEAR_TOOL_USES in target.context_edits else "lamina"
        return "lamina"

    def capabilities(self) -> Capabilities:
        """What the model the agent runs on now can do."""
        return self._provider().capabilities

    def media(self) -> MediaSupport:
        """What the model the agent runs on now takes besides text."""
        capabilities = self._provider().capabilities
        return MediaSupport(vision=capabilities.vision, pdf=capabilities.pdf_input)

    def _provider(self) -> Provider:
        return self.agent.provider if self.agent is not None else self.provider


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
