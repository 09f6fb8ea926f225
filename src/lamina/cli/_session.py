"""What `lamina chat` and `lamina run` share: settings, provider, which session, opening the agent (I/O)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final, Protocol, runtime_checkable

from lamina.agent import Agent, AgentEvent, AgentOptions, SkillWarning, open_agent, open_engine, prefix_problem
from lamina.cli._approval import DenyRules, unknown_tool_rules
from lamina.cli._config import Settings, load_settings, missing_api_key
from lamina.cli._console import err, safe
from lamina.cli._demo_chat import DEMO_MODEL, demo_provider, steps_used
from lamina.cli._reasoning_settings import DEFAULT_REASONING, REASONING_KEYS, parse_reasoning, reasoning_text
from lamina.compaction import DEFAULT_PRUNE, DEFAULT_RESERVE, ProviderSummariser, ServerSummariser, Summariser
from lamina.context import ReasoningBlock, to_messages
from lamina.engine import CompactionEvent, ContextEngine, RecordedSettings, recorded_settings
from lamina.errors import LaminaError, UsageError
from lamina.placement import (
    ReasoningConfig,
    RenderedRequest,
    RenderTarget,
    foreign_reasoning,
    reasoning_owner,
)
from lamina.pricing import CachePrices
from lamina.prompt import Preset
from lamina.providers import (
    Capabilities,
    ModelCache,
    Provider,
    ProviderEvent,
    ScriptedProvider,
    discover_capabilities,
    provider_from_spec,
)
from lamina.session import SessionLog, SessionStore, SessionSummary, UserMessage
from lamina.sources import SourceConnections, SourceScan, find_sources
from lamina.tools import AskCallback, PermissionMode
from lamina.workspace import load_preset, workspace_trust

DISCOVERY_TIMEOUT: Final = 3.0
"""Seconds the models endpoint gets before the first turn; then the shipped table stands."""
_SAID: set[str] = set()
"""The settings problems said in this process: each once."""
STALE_EMPTY_SECONDS: Final = 3600.0
"""An empty session (no user message) older than this, not open elsewhere, is removed at start."""


def when(ts: float) -> str:
    """A timestamp as local `YYYY-MM-DD HH:MM` (`-` for none)."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "-"


def model_name(spec: str) -> str:
    """The model id in a provider spec (`anthropic:claude-x` → `claude-x`, `openai-compat:URL#m` → `m`)."""
    rest = spec.partition(":")[2]
    return rest.rpartition("#")[2] if spec.startswith("openai-compat:") else rest


class _Windowed:
    """A provider with the context window the settings name (over whatever its model's table or endpoint says)."""

    def __init__(self, inner: Provider, context_window: int) -> None:
        self._inner = inner
        self._window = context_window

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def target(self) -> RenderTarget:
        return self._inner.target

    @property
    def capabilities(self) -> Capabilities:
        found = self._inner.capabilities
        source = f"{found.source}; window from the settings" if found.source else "window from the settings"
        return dataclasses.replace(found, context_window=self._window, source=source)

    async def discover(self, *, cache: ModelCache | None = None, timeout: float = DISCOVERY_TIMEOUT) -> Capabilities:
        await discover_capabilities(self._inner, cache=cache, timeout=timeout)
        return self.capabilities

    @property
    def reasoning(self) -> ReasoningConfig:
        return _reasoning_of(self._inner)

    @reasoning.setter
    def reasoning(self, value: ReasoningConfig) -> None:
        if not set_reasoning(self._inner, value):
            raise AttributeError("reasoning")

    def stream(self, request: RenderedRequest) -> AsyncIterator[ProviderEvent]:
        return self._inner.stream(request)

    async def aclose(self) -> None:
        await close_provider(self._inner)


async def close_provider(provider: Provider) -> None:
    """Close the provider's HTTP client, if it has one (the protocol does not require `aclose`)."""
    aclose = getattr(provider, "aclose", None)
    if aclose is not None:
        await aclose()


@runtime_checkable
class _Reasoned(Protocol):
    """A provider that takes reasoning settings for its next requests (the Anthropic and OpenAI ones)."""

    reasoning: ReasoningConfig


def _reasoning_of(provider: Provider) -> ReasoningConfig:
    if not isinstance(provider, _Reasoned):
        raise AttributeError("reasoning")
    return provider.reasoning


def set_reasoning(provider: Provider, config: ReasoningConfig) -> bool:
    """Give `provider` reasoning settings for its next requests; False when it takes none (a script).

    Raises:
        UsageError: The provider refuses them (a thinking budget not below its `max_tokens`).
    """
    if not isinstance(provider, _Reasoned):
        return False
    provider.reasoning = config
    return True


def make_provider(spec: str, settings: Settings, *, require_key: bool = True) -> Provider:
    """The provider for `spec` with the configured window, output cap and reasoning; no API key is a `UsageError`.

    Raises:
        UsageError: No API key (unless `require_key` is False), a bad spec, or reasoning settings the provider refuses.
    """
    if spec == DEMO_MODEL:
        return demo_provider()
    variable = missing_api_key(spec) if require_key else None
    if variable is not None:
        raise UsageError(
            f"no API key for {spec.partition(':')[0]}: set {variable} in the environment"
            f" (or try the chat offline: lamina chat --model {DEMO_MODEL})"
        )
    provider = provider_from_spec(spec, reasoning=settings.reasoning, max_output_tokens=settings.max_output_tokens)
    if settings.context_editing is not None:  # `[compaction] context_editing`, for every provider /model opens too
        from lamina.providers import AnthropicProvider

        if isinstance(provider, AnthropicProvider):
            provider.context_editing = settings.context_editing
    if settings.context_window is not None:
        return _Windowed(provider, settings.context_window)
    return provider


def reserve_problem(reserve: int, capabilities: Capabilities) -> str | None:
    """What is wrong with a compaction reserve not smaller than the model's window (every turn would compact).

    The default reserve scales down with a small window (`lamina.agent`'s compaction timing): only a set one is checked.
    """
    window = capabilities.context_window
    if reserve < window or reserve == DEFAULT_RESERVE:
        return None
    return (
        f"the compaction reserve ({reserve:,} tokens) is not smaller than the context window ({window:,} tokens, "
        f"{capabilities.source or 'defaults'}): every turn would compact; set compaction_reserve below the window"
    )


async def discover_window(agent: Agent) -> None:
    """Before a turn: read the model's capabilities from its models endpoint (once per process), never failing.

    Not when the session opens: a chat reaches its prompt without importing an SDK. The reserve is
    checked again when the window the endpoint reports differs from the one the session opened with, and
    the fixed prefix (system prompt and tools) against the window; each problem is said once, in one line.
    """
    before = agent.provider.capabilities.context_window
    found = await discover_capabilities(agent.provider, timeout=DISCOVERY_TIMEOUT)
    too_large = reserve_problem(agent.compaction_reserve, found) if found.context_window != before else None
    try:
        too_small = prefix_problem(agent.budget(), found)
    except LaminaError:  # the workspace's stable parts could not be read: the turn will say so
        too_small = None
    for problem in (too_large, too_small):
        if problem is not None and problem not in _SAID:
            _SAID.add(problem)
            err.print(f"[yellow]warning:[/yellow] {safe(problem)}")


def is_listed(row: SessionSummary) -> bool:
    """Whether `sessions list` shows the row: empty sessions (no user message, so no title) are hidden."""
    return bool(row.title) or row.problem is not None


def latest_session(store: SessionStore, workspace: Path) -> str | None:
    """The most recently updated non-empty session started in `workspace`."""
    for row in store.list():
        if row.cwd == str(workspace) and row.title and row.problem is None:
            return row.id
    return None


def delete_session(store: SessionStore, session_id: str) -> None:
    """Remove a session; refuses (`SessionLockedError`) while a writer has it open."""
    store.delete(session_id)


def remove_if_empty(store: SessionStore, session_id: str) -> bool:
    """Delete the session if it has no user message (a chat started and left). True if it was removed."""
    try:
        with store.open(session_id, writable=False) as session:
            if session.info.title or any(isinstance(e, UserMessage) for e in session.entries()):
                return False
        delete_session(store, session_id)
    except Exception:
        return False
    return True


def clean_up_empty_sessions(store: SessionStore, *, now: Callable[[], float] = time.time) -> int:
    """Remove empty sessions left behind (older than `STALE_EMPTY_SECONDS`, not open); how many were removed."""
    removed = 0
    for row in store.list():
        if not row.title and row.problem is None and now() - row.updated_at > STALE_EMPTY_SECONDS:
            removed += remove_if_empty(store, row.id)
    return removed


def _preset_file(settings: Settings) -> Path | None:
    # a config file's preset_file applies to the custom preset only; one on the command line always counts
    use_file = settings.preset == "custom" or settings.origin("preset_file") == "command line"
    return settings.preset_file if use_file else None


def _preset_of(settings: Settings) -> Preset:
    return load_preset(settings.preset, custom_path=_preset_file(settings))


SESSION_ORIGIN: Final = "the session"
"""Where a setting came from when a resumed session's recorded one was used (`Settings.origin`)."""


def session_settings(store: SessionStore, session_id: str) -> RecordedSettings:
    """The model, mode and preset a stored session recorded (read from its latest boundary on).

    Raises:
        SessionError: The session cannot be opened.
    """
    with store.open(session_id, writable=False) as session:
        return recorded_settings(session.entries_loaded())


BUNDLE_ORIGIN: Final = "the bundle"
"""Where a setting came from when an imported session's bundle's one was adopted (`--adopt-bundle-settings`)."""


def resumed_settings(settings: Settings, recorded: RecordedSettings, *, origin: str = SESSION_ORIGIN) -> Settings:
    """`settings` with the session's recorded model, mode, preset and reasoning where the command line gave none.

    A setting from a config file or the defaults gives way to the session's (its origin becomes
    `origin`); one given on the command line wins, and the session records it when it opens.
    """
    changes: dict[str, object] = {}
    origins = dict(settings.origins)
    for key, value in (("model", recorded.model), ("mode", recorded.mode)):
        if value is not None and settings.origin(key) != "command line":
            changes[key], origins[key] = value, origin
    given = "command line" in (settings.origin("preset"), settings.origin("preset_file"))
    if recorded.preset is not None and not given:
        changes["preset"] = recorded.preset
        changes["preset_file"] = Path(recorded.preset_file) if recorded.preset_file else None
        origins["preset"] = origins["preset_file"] = origin
    if recorded.reasoning is not None:
        changes["reasoning"] = _resumed_reasoning(settings, parse_reasoning(recorded.reasoning), origins, origin)
    return dataclasses.replace(settings, **changes, origins=origins)  # type: ignore[arg-type]  # Settings' own keys


def _resumed_reasoning(
    settings: Settings, recorded: ReasoningConfig, origins: dict[str, str], origin: str
) -> ReasoningConfig:
    """The session's reasoning settings, but for the keys the command line gave (`origins` learns where each came from).

    `thinking` and `budget_tokens` come from one place (the flag `--thinking` gives both).
    """
    given = {key for key in REASONING_KEYS if settings.origin(f"reasoning.{key}") == "command line"}
    if "thinking" in given:
        given.add("budget_tokens")
    values = {key: getattr(settings.reasoning if key in given else recorded, key) for key in REASONING_KEYS}
    for key in REASONING_KEYS:
        if key not in given:
            origins[f"reasoning.{key}"] = origin
    return ReasoningConfig(**values)


def settings_for(
    store: SessionStore, session_id: str | None, settings: Settings, *, adopt_bundle: bool = False
) -> Settings:
    """The settings a chat or run on `session_id` uses: `resumed_settings` for a session, else `settings`.

    An imported session recorded none of its bundle's settings (a bundle is data): it runs on
    `settings`, and until it records its own a line says what the bundle had; `adopt_bundle`
    (`--adopt-bundle-settings`) takes the bundle's instead.

    Raises:
        UsageError: `adopt_bundle` without a session imported from a bundle that recorded settings.
        SessionError: The session cannot be opened.
    """
    if session_id is None:
        if adopt_bundle:
            raise UsageError("--adopt-bundle-settings needs an imported session to resume (--resume ID)")
        return settings
    recorded = session_settings(store, session_id)
    if adopt_bundle:
        if recorded.imported is None:
            raise UsageError(
                f"session {session_id} has no bundle settings to adopt (not imported, or its bundle recorded none)"
            )
        return resumed_settings(settings, recorded.imported, origin=BUNDLE_ORIGIN)
    own = (recorded.model, recorded.mode, recorded.preset, recorded.reasoning)
    if recorded.imported is not None and own == (None, None, None, None):
        err.print(f"[yellow]{safe(bundle_note(recorded.imported))}[/yellow]")
    return resumed_settings(settings, recorded)


def bundle_note(bundle: RecordedSettings) -> str:
    """The line that says what an imported session's bundle recorded, and that it is not adopted."""
    shown = [f"model {bundle.model}"] if bundle.model else []
    shown += [f"mode {bundle.mode}"] if bundle.mode else []
    if bundle.preset:
        shown.append(f"preset {bundle.preset}" + (f" ({bundle.preset_file})" if bundle.preset_file else ""))
    shown += [f"reasoning {bundle.reasoning}"] if bundle.reasoning else []
    return (
        f"imported session: its bundle ran with {', '.join(shown) or 'no recorded settings'}; not adopted, "
        "your own settings apply (--adopt-bundle-settings uses the bundle's)"
    )


def record_settings(agent: Agent, settings: Settings) -> list[str]:
    """Record the settings the agent runs with in its session (only what changed), and switch to their mode.

    A resumed session given another mode on the command line switches to it (the model is told).
    Reasoning settings that ask nothing are not recorded until a session has recorded some.

    Returns:
        What a change of model leaves out of the requests (`note_provider_switch`).
    """
    recorded = agent.engine.settings.recorded
    if agent.engine.settings.mode != settings.mode:
        agent.set_mode(settings.mode)
    agent.engine.settings.set_model(settings.model)
    preset_file = _preset_file(settings)
    agent.engine.settings.set_preset(settings.preset, str(preset_file) if preset_file is not None else "")
    record_reasoning(agent, settings.reasoning)
    return note_provider_switch(agent) if recorded.model not in (None, settings.model) else []


def record_reasoning(agent: Agent, config: ReasoningConfig) -> None:
    """Record the reasoning settings the requests go with (none asked and none recorded yet: nothing)."""
    text = reasoning_text(config)
    if text != DEFAULT_REASONING or agent.engine.settings.recorded.reasoning is not None:
        agent.engine.settings.set_reasoning(text)


def note_provider_switch(agent: Agent) -> list[str]:
    """After a change of model: record what reasoning in the view the new provider is never sent, and say it.

    Returns:
        One line per provider whose blocks are left out (none when the view holds no other provider's).
    """
    owner = reasoning_owner(agent.provider.target)
    if owner is None:
        return []
    messages = to_messages(agent.engine.view)
    if not foreign_reasoning(messages, owner):
        return []
    left_out: dict[str, int] = {}
    for message in messages:
        for block in message.blocks:
            if isinstance(block, ReasoningBlock):
                left_out[block.reasoning.provider] = left_out.get(block.reasoning.provider, 0) + 1
    return agent.engine.settings.note_foreign_reasoning(left_out, provider=owner)


def stored_session_engine(session: SessionLog) -> ContextEngine:
    """An engine over a stored session with the stable parts and tools a chat resumed in its folder would have.

    The workspace is the session's working directory, the preset is the one the session recorded
    (else that folder's settings: `.lamina/config.toml`, the user's file), and the platform section
    is the interactive one, as `lamina context` shows it. Nothing is recorded.

    Raises:
        UsageError: The session's working directory is gone.
        ConfigError, PresetFileError: Its settings or preset cannot be used.
    """
    recorded = session.info.cwd
    cwd = Path(recorded) if recorded else None
    if cwd is not None and not cwd.is_absolute() and not cwd.is_dir():
        # sessions made before 0.3.0 recorded the path as given; where they were made is not recorded
        raise UsageError(
            f"session {session.id} recorded its workspace as the relative path {recorded!r} (sessions made before "
            "0.3.0 did), which is not a folder here: run the command from the folder the session was created in"
        )
    if cwd is None or not cwd.is_dir():
        raise UsageError(
            f"session {session.id}: its working directory {recorded or '(none recorded)'} is gone, "
            "so its stable parts cannot be read"
        )
    settings = resumed_settings(
        load_settings(cwd, trust=workspace_trust(cwd)), recorded_settings(session.entries_loaded())
    )
    prices = _prices_of(settings.model)
    engine = open_engine(session, workspace=cwd, preset=_preset_of(settings), interactive=True, cache_prices=prices)
    if not settings.prune:
        engine.compactor.prune_policy = None
    return engine


_OPENAI_KINDS: Final = ("openai", "openai-responses", "openai-compat")


def _prices_of(spec: str) -> CachePrices:
    """The cache prices of the provider a model spec names, without building it: OpenAI's for its kinds."""
    return CachePrices.openai() if spec.partition(":")[0] in _OPENAI_KINDS else CachePrices.anthropic()


def compaction_summariser(provider: Provider, settings: Settings, session_id: str) -> Summariser | None:
    """Who writes the session's compaction summaries, as `[compaction] backend` says (None: the agent's default).

    `lamina` (the default) is Lamina's summariser on the session's provider; `server` and `auto` a
    `ServerSummariser` over the same provider, Lamina's summariser its fallback.
    """
    if settings.compaction_backend == "lamina":
        return None
    fallback = ProviderSummariser(provider, session_id=session_id)
    return ServerSummariser(provider, backend=settings.compaction_backend, fallback=fallback)


@asynccontextmanager
async def session_agent(
    store: SessionStore,
    provider: Provider,
    settings: Settings,
    *,
    workspace: Path,
    session_id: str | None,
    ask: AskCallback | None,
    interactive: bool,
    on_event: Callable[[AgentEvent], None],
    on_compaction: Callable[[CompactionEvent], None],
) -> AsyncIterator[Agent]:
    """Connect the workspace's sources and open the agent; on exit close the session, sources and provider.

    An untrusted workspace's sources are not even read (what it would configure was said before).
    `interactive` False gives the model the headless platform section (no one answers questions).
    """
    agent: Agent | None = None
    try:
        scan = find_sources(workspace, trust=settings.trust) if settings.trust.trusted else SourceScan((), ())
        for problem in scan.problems:
            err.print(f"[yellow]source skipped:[/yellow] {safe(problem)}")
        preset = _preset_of(settings)
        async with SourceConnections(scan.sources) as sources:
            for failure in sources.problems:
                err.print(f"[yellow]source not connected:[/yellow] {safe(failure.slug)}: {safe(failure.reason)}")
            agent = open_agent(
                store,
                provider,
                workspace=workspace,
                session_id=session_id,
                options=AgentOptions(
                    mode=PermissionMode(settings.mode),
                    preset=preset,
                    interactive=interactive,
                    ask=ask,
                    on_event=on_event,
                    sources=sources if scan.sources else None,
                    prune=DEFAULT_PRUNE if settings.prune else None,
                    sandbox=settings.sandbox,
                    prewarm=settings.prewarm,
                ),
            )
            for ignored in settings.sandbox_ignored:  # the workspace's file asked to loosen the sandbox
                on_event(SkillWarning("sandbox", ignored))
            agent.engine.compactor.listeners.append(on_compaction)
            agent.tools.add_rule(DenyRules(settings.permissions))  # the config files' deny rules, in every mode
            for line in unknown_tool_rules(settings.permissions, {spec.name for spec in agent.tools.specs()}):
                err.print(f"[yellow]warning:[/yellow] {safe(line)}")
            same_model = agent.engine.settings.recorded.model == settings.model
            for note in record_settings(agent, settings):
                err.print(f"[dim]{safe(note)}[/dim]")
            scripted = provider._inner if isinstance(provider, _Windowed) else provider
            if same_model and isinstance(scripted, ScriptedProvider):  # the session's script goes on where it stopped
                scripted.continue_from(steps_used(agent.engine.session.entries()))
            if settings.compaction_reserve is not None:
                agent.compaction_reserve = settings.compaction_reserve
            agent.summariser = compaction_summariser(provider, settings, agent.engine.session.id)
            too_large = reserve_problem(agent.compaction_reserve, provider.capabilities)
            if too_large is not None:
                err.print(f"[yellow]warning:[/yellow] {safe(too_large)}")
            try:
                yield agent
            finally:
                agent.engine.session.close()
    finally:
        await close_provider(agent.provider if agent is not None else provider)  # /model may have replaced it
