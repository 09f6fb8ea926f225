"""How `open_agent` sets up an agent: its options, and the keyword arguments they replace (pure).

`AgentOptions` holds every knob of `open_agent` but the store, the model, the workspace and the
session; the knobs it took as keyword arguments before are still taken, for one release, with a
`DeprecationWarning` naming the field.
"""

from __future__ import annotations

import dataclasses
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypedDict, cast

from lamina.agent._events import AgentEvent
from lamina.agent._priced import DEFAULT_COMPACTION_BAND
from lamina.agent._tool_sets import DEFAULT_DEFERRAL, ToolDeferral
from lamina.agent._warming import DEFAULT_PREWARM, PrewarmSetting
from lamina.compaction import (
    DEFAULT_KEEP_TOKENS,
    DEFAULT_PRUNE,
    DEFAULT_USER_LANE_TOKENS,
    PrunePolicy,
    Summariser,
)
from lamina.pricing import CachePrices, ContextEditing
from lamina.prompt import Preset
from lamina.providers import Provider, RetryPolicy
from lamina.sources import SourceConnections
from lamina.tools import AskCallback, PermissionMode, SandboxSettings


@dataclass(frozen=True, slots=True)
class AgentOptions:
    """How `open_agent` sets up an agent: the session's mode and prompt, compaction, the tools' rules, the clock.

    `open_agent(store, model, workspace=..., options=AgentOptions(mode="explore"))`; each field
    keeps its default when not given (`dataclasses.replace` makes a variant of a set of options).
    """

    mode: PermissionMode | str = PermissionMode.ASK
    """The permission mode of a new session; a resumed session keeps its recorded mode."""
    preset: str | Preset = "default"
    """`default`, `mini`, `custom` (with `custom_preset`) or a `Preset`."""
    custom_preset: str | os.PathLike[str] | None = None
    """The custom preset's TOML file."""
    interactive: bool | None = None
    """Picks the prompt's platform section: True when a person reads the replies and can answer, False for
    the headless one (scripts, CI); None decides by whether stdin and stdout are terminals."""
    ask: AskCallback | None = None
    """Asks the user about a tool call a rule or the permission mode leaves to them."""
    on_event: Callable[[AgentEvent], None] | None = None
    """Gets each event of a turn as it happens."""
    retry: RetryPolicy | None = None
    """How provider calls are retried (None: `RetryPolicy()`)."""
    summariser: Summariser | None = None
    """Writes compaction summaries (the provider itself unless given)."""
    keep_tokens: int = DEFAULT_KEEP_TOKENS
    """Recent tokens a compaction keeps verbatim."""
    user_lane_tokens: int = DEFAULT_USER_LANE_TOKENS
    """Tokens of the user's own messages shown after a compaction summary."""
    prune: PrunePolicy | None = DEFAULT_PRUNE
    """When old tool output leaves the provider view before a turn (None: never)."""
    compaction_band: float | None = DEFAULT_COMPACTION_BAND
    """From this fraction of the compaction threshold on, compact before a turn when the cost model expects it
    to pay (`Agent.compaction_band`; None: only at the threshold)."""
    cache_prices: CachePrices | None = None
    """The prices prunes, TTLs and compactions are decided with; None: those of the provider the agent runs on
    (`CachePrices.for_target`), followed when it changes."""
    context_editing: ContextEditing | None = None
    """The provider's context editing on Anthropic models that have it (`lamina.pricing.ContextEditing`): each prune
    priced against the server's clearing (`priced`), the server's whenever it saves (`server`), Lamina's prune only
    (`lamina`), or no `context_management` at all (`off`); set on the provider the agent opens with. None: the
    provider's own setting (`AnthropicProvider(context_editing=...)`, `priced` by default)."""
    cache_diagnostics: bool = True
    """Record why each model call missed the prompt cache: the provider's own diagnostics, asked for where the model
    has them (`Capabilities.cache_diagnostics`), beside the cache simulator's prediction; False: neither."""
    prewarm: PrewarmSetting = DEFAULT_PREWARM
    """When a pre-warm request writes the compacted prefix between turns (`max_tokens: 0` on Anthropic without
    thinking, `prewarm` on OpenAI Responses of GPT-5.6 and later): `priced` (the default: when the cost model
    expects it to save more than it costs), `always` (where the provider takes it: the next turn's first token
    comes from a warm cache), `off`."""
    clock: Callable[[], float] = time.time
    """The time the engine reads, in seconds since the epoch (the cache's state is priced from it)."""
    sources: SourceConnections | None = None
    """Connected sources whose tools the agent offers."""
    tool_deferral: ToolDeferral | None = DEFAULT_DEFERRAL
    """When the sources' tool schemas are deferred (found through tool search or Lamina's catalogue) instead of
    sent whole with every request: above a tenth of the window, when priced cheaper; None: never."""
    strict_prerequisites: bool = True
    """Keep denying calls until a required read (a skill, a guide) is done, however often the model tries; if
    False, let them through once the agent is stuck."""
    nearest_context_rule: bool = True
    """Whether the nearest AGENTS.md must be read before an edit."""
    skills_dir: Path | None = None
    """The user-level skills folder; else `$LAMINA_SKILLS_DIR`, else the default one."""
    sandbox: SandboxSettings | None = None
    """How Bash commands are confined; None: `SandboxSettings()` (on where the machine allows it). When it is
    enabled but cannot confine here, `on_event` gets a `SkillWarning` named `sandbox` saying why, once."""


DEFAULT_OPTIONS: Final = AgentOptions()
"""`open_agent`'s options when none are given."""


class _OptionFields(TypedDict, total=False):
    """The fields of `AgentOptions`, as keyword arguments."""

    mode: PermissionMode | str
    preset: str | Preset
    custom_preset: str | os.PathLike[str] | None
    interactive: bool | None
    ask: AskCallback | None
    on_event: Callable[[AgentEvent], None] | None
    retry: RetryPolicy | None
    summariser: Summariser | None
    keep_tokens: int
    user_lane_tokens: int
    prune: PrunePolicy | None
    compaction_band: float | None
    cache_prices: CachePrices | None
    context_editing: ContextEditing | None
    cache_diagnostics: bool
    prewarm: PrewarmSetting
    clock: Callable[[], float]
    sources: SourceConnections | None
    tool_deferral: ToolDeferral | None
    strict_prerequisites: bool
    nearest_context_rule: bool
    skills_dir: Path | None
    sandbox: SandboxSettings | None


class DeprecatedKeywords(_OptionFields, total=False):
    """`open_agent`'s keyword arguments before `AgentOptions`: the fields, and `provider` for the model (deprecated)."""

    provider: Provider | str


def chosen_options(
    model: Provider | str | None, options: AgentOptions, keywords: DeprecatedKeywords
) -> tuple[Provider | str, AgentOptions]:
    """The model and the options `open_agent` was given, its deprecated keyword arguments in place of the fields.

    Each keyword given warns (`DeprecationWarning`, naming the `AgentOptions` field, or `model` for `provider`).

    Raises:
        TypeError: No model was given, or both `model` and `provider`; a keyword names no field of `AgentOptions`.
    """
    given = keywords.get("provider")
    fields = cast(_OptionFields, {name: value for name, value in keywords.items() if name != "provider"})
    for name in keywords:
        instead = (
            "pass it as the model, open_agent(store, model, ...)"
            if name == "provider"
            else f"pass options=AgentOptions({name}=...)"
        )
        warnings.warn(f"open_agent({name}=...) is deprecated: {instead}", DeprecationWarning, stacklevel=3)
    if model is not None and given is not None:
        raise TypeError("open_agent() got both a model and provider=...: pass the model only")
    chosen = model if model is not None else given
    if chosen is None:
        raise TypeError("open_agent() needs a model: a Provider or a model spec such as 'anthropic:claude-sonnet-5'")
    return chosen, dataclasses.replace(options, **fields) if fields else options
