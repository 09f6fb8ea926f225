"""Which tool definitions a turn sends when source tools are deferred (pure).

Built-in tools always go whole. Source tools (MCP servers, APIs) are deferred when their schemas
take more than `ToolDeferral.share` of the context window (Claude Code's rule: about a tenth) and
the cost model expects it to pay (`lamina.pricing.price_deferral`): where the model has the
provider's tool search they go with `defer_loading`; elsewhere Lamina's catalogue tool stands in,
and each schema the model loads joins the `tools` array after everything sent before it, in load
order, so the definitions before it stay byte for byte. docs/providers.md, "Deferred tools".
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from lamina.context import ToolSpec
from lamina.defang import trusted
from lamina.errors import UsageError
from lamina.pricing import DeferralPrice, Outlook, price_deferral
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator

CATALOGUE_TOOL: Final = "ToolCatalogue"
"""Lamina's stand-in for a provider's tool search: lists the deferred tools and loads their schemas."""

CATALOGUE_SPEC: Final = ToolSpec(
    CATALOGUE_TOOL,
    trusted(
        "List the source tools left out of this request to save context (name and one line each), or load the "
        "ones you name: their schemas come back and you can call them."
    ),
    {
        "type": "object",
        "properties": {
            "load": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Tool names to load; leave out to list the catalogue.",
            },
            "query": {"type": "string", "description": "Words to filter the catalogue by (name or description)."},
        },
        "additionalProperties": False,
    },
)

DeferralMode: TypeAlias = Literal["all", "search", "catalogue"]
"""How source tools go: every schema whole, deferred behind the provider's tool search, or behind Lamina's catalogue."""


@dataclass(frozen=True, slots=True)
class ToolDeferral:
    """When source tools' schemas are deferred instead of sent with every request."""

    share: float = 0.10
    """Defer when the source tools' schemas take more than this share of the context window."""
    expected_loads: int = 3
    """How many schemas a session is expected to load, for the price (Claude Code's sessions load a few)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.share <= 1.0:
            raise UsageError(f"ToolDeferral.share must be between 0 and 1, got {self.share}")
        if self.expected_loads < 0:
            raise UsageError(f"ToolDeferral.expected_loads must be 0 or more, got {self.expected_loads}")


DEFAULT_DEFERRAL: Final = ToolDeferral()
"""Defer above a tenth of the window, when priced cheaper."""


@dataclass(frozen=True, slots=True)
class ToolSet:
    """The definitions a turn sends, how the source tools went, and the price that decided it."""

    tools: tuple[ToolSpec, ...]
    mode: DeferralMode
    price: DeferralPrice | None = None
    """None: the share was not exceeded (nothing was priced)."""


def definition_tokens(tools: Sequence[ToolSpec], estimator: TokenEstimator = DEFAULT_ESTIMATOR) -> int:
    """The tokens of the definitions as a request carries them (name, description, schema as JSON)."""
    return sum(estimator.count(f"{t.name} {t.description} {json.dumps(dict(t.input_schema))}") for t in tools)


def choose_tool_set(
    builtin: Sequence[ToolSpec],
    source: Sequence[ToolSpec],
    *,
    deferral: ToolDeferral | None,
    context_window: int,
    tool_search: bool,
    outlook: Outlook,
    loaded: Sequence[str] = (),
    current: DeferralMode = "all",
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
) -> ToolSet:
    """The tool set of the next turn: every source schema, or the source tools deferred.

    Args:
        builtin: The built-in tools' definitions (never deferred).
        source: The source tools' definitions.
        deferral: When to defer (None: never).
        context_window: The model's context window, in tokens.
        tool_search: Whether the model has the provider's tool search (`Capabilities.tool_search`).
        outlook: What the cost model prices from now.
        loaded: The source tools the model loaded through the catalogue, in load order.
        current: How the session sends its source tools now (a change rewrites the cached history once).
        estimator: Counts the definitions' tokens.

    Returns:
        The definitions in request order, the mode, and the price when one was taken.
    """
    whole = ToolSet((*builtin, *source), "all")
    schema = definition_tokens(source, estimator)
    if deferral is None or not source or schema <= deferral.share * context_window:
        return whole
    average = schema / len(source)
    loads = min(deferral.expected_loads, len(source))
    if tool_search:
        price = price_deferral(
            outlook,
            schema_tokens=schema,
            stub_tokens=definition_tokens([CATALOGUE_SPEC], estimator),  # the search tool's size, near enough
            loaded_tokens=round(average * loads),
            current="deferred" if current == "search" else "all",
        )
        tools = (*builtin, *(dataclasses.replace(t, deferred=True) for t in source))
        return ToolSet(tools, "search", price) if price.defers else dataclasses.replace(whole, price=price)
    by_name = {t.name: t for t in source}
    kept = tuple(by_name[name] for name in dict.fromkeys(loaded) if name in by_name)
    price = price_deferral(
        outlook,
        schema_tokens=schema,
        stub_tokens=definition_tokens([CATALOGUE_SPEC, *kept], estimator),
        loaded_tokens=round(average * loads),
        rewrite_tokens=loads * outlook.cache.history_tokens,  # a load rewrites what follows the tools
        current="deferred" if current == "catalogue" else "all",
    )
    if not price.defers:
        return dataclasses.replace(whole, price=price)
    return ToolSet((*builtin, CATALOGUE_SPEC, *kept), "catalogue", price)


def catalogue_text(source: Sequence[ToolSpec], *, query: str = "") -> str:
    """The catalogue the tool lists: each deferred tool's name and the first line of its description."""
    words = query.lower().split()
    lines = [
        f"- {t.name}: {str(t.description).splitlines()[0] if str(t.description) else ''}"
        for t in source
        if all(w in f"{t.name} {t.description}".lower() for w in words)
    ]
    if not lines:
        return "No deferred tool matches." if words else "No tools are deferred."
    return "Deferred tools (load one to get its schema):\n" + "\n".join(lines)


def schema_text(tool: ToolSpec) -> str:
    """A loaded tool's definition, as the catalogue returns it."""
    definition: Mapping[str, Any] = {"name": tool.name, "description": str(tool.description)}
    return json.dumps({**definition, "input_schema": dict(tool.input_schema)}, indent=1)
