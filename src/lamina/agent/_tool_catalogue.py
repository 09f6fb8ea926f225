"""An agent's deferred source tools: each turn's tool set, Lamina's catalogue tool and the first-use rule.

Where the model has no provider tool search, `ToolCatalogue` lists the deferred tools and loads the
ones the model names; a call to a deferred tool not loaded yet is denied once by the pipeline, as a
required read is, with its schema: the tool is loaded then. A loaded tool joins the `tools` array from
the next request on, the same turn's included (appended after every definition sent before it, or a
`tool_addition` block where the model takes tool changes). The choice itself is `choose_tool_set`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from lamina.agent._tool_sets import (
    CATALOGUE_SPEC,
    CATALOGUE_TOOL,
    DeferralMode,
    ToolDeferral,
    ToolSet,
    catalogue_text,
    choose_tool_set,
    schema_text,
)
from lamina.context import ToolSpec
from lamina.engine import ContextEngine
from lamina.pricing import Outlook
from lamina.providers import Capabilities
from lamina.session import LogEntry, ToolCall
from lamina.tools import Allow, BoundCall, Deny, Rule, StructTool, ToolContext, ToolOutput, Verdict


class CatalogueInput(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    load: list[str] = []
    query: str = ""


class DeferredTools:
    """The source tools of one agent's session and which of their schemas the model has loaded."""

    def __init__(self, builtin: Sequence[ToolSpec], source: Sequence[ToolSpec], deferral: ToolDeferral | None) -> None:
        """Hold the definitions; nothing is deferred before the first `choose`.

        Args:
            builtin: The built-in tools' definitions (never deferred).
            source: The source tools' definitions.
            deferral: When to defer (None: never).
        """
        self.builtin = tuple(builtin)
        self.source = tuple(source)
        self.deferral = deferral
        self.loaded: list[str] = []
        """The source tools loaded through the catalogue (or a first use), in load order."""
        self.mode: DeferralMode = "all"
        self._by_name = {t.name: t for t in self.source}
        self._engine: ContextEngine | None = None
        self._sent: tuple[ToolSpec, ...] = ()

    def choose(self, capabilities: Capabilities, outlook: Outlook) -> ToolSet:
        """The next turn's tool set for the model `capabilities` describe, priced from `outlook`."""
        chosen = choose_tool_set(
            self.builtin,
            self.source,
            deferral=self.deferral,
            context_window=capabilities.context_window,
            tool_search=capabilities.tool_search,
            outlook=outlook,
            loaded=self.loaded,
            current=self.mode,
        )
        self.mode = chosen.mode
        return chosen

    def refresh(self, engine: ContextEngine, capabilities: Capabilities) -> None:
        """Give `engine` the next turn's tool set (`choose`), priced from its cost model's outlook.

        From then on each load is sent from the engine's next request, in the same turn.
        """
        self._engine = engine
        self._sent = self.choose(capabilities, engine.compactor.outlook()).tools
        engine.set_tools(self._sent)

    def load(self, names: Iterable[str]) -> list[ToolSpec]:
        """Mark the named source tools loaded (unknown names are skipped); the definitions, in order.

        In `catalogue` mode a newly loaded tool is appended to the tool set the engine sends, from
        its next request on (the turn's tool loop included); the set stays what `choose` gives next.
        """
        found = [self._by_name[n] for n in names if n in self._by_name]
        new = [n for n in dict.fromkeys(t.name for t in found) if n not in self.loaded]
        self.loaded.extend(new)
        sent = {t.name for t in self._sent}
        added = [self._by_name[n] for n in new if n not in sent]
        if self._engine is not None and self.mode == "catalogue" and added:
            self._sent = (*self._sent, *added)
            self._engine.set_tools(self._sent)
        return found

    def observe(self, entries: Iterable[LogEntry]) -> None:
        """Take the loads of a resumed session from its calls: a source tool called, a catalogue load."""
        for entry in entries:
            if isinstance(entry, ToolCall) and entry.name in self._by_name:
                self.load([entry.name])
            elif isinstance(entry, ToolCall) and entry.name == CATALOGUE_TOOL:
                names = entry.input.get("load")
                self.load(n for n in names if isinstance(n, str)) if isinstance(names, list) else None

    def tool(self) -> CatalogueTool:
        """The catalogue tool, for the pipeline (offered to the model only in `catalogue` mode)."""
        return CatalogueTool(self)

    def rule(self) -> Rule:
        """The pipeline rule that loads a deferred tool on its first call."""
        return _FirstUse(self)

    def deferred(self, name: str) -> bool:
        """Whether `name` is a source tool the model has to load before it is in the request."""
        return self.mode == "catalogue" and name in self._by_name and name not in self.loaded


class CatalogueTool(StructTool[CatalogueInput]):
    """Lists the deferred source tools, or loads the named ones (their schemas come back)."""

    name = CATALOGUE_TOOL
    description = str(CATALOGUE_SPEC.description)
    read_only = True
    input_type = CatalogueInput

    def __init__(self, tools: DeferredTools) -> None:
        self._tools = tools

    async def run(self, input: CatalogueInput, ctx: ToolContext) -> ToolOutput:
        if not input.load:
            pending = [t for t in self._tools.source if t.name not in self._tools.loaded]
            return ToolOutput(catalogue_text(pending, query=input.query))
        found = self._tools.load(input.load)
        unknown = sorted(set(input.load) - {t.name for t in found})
        parts = [schema_text(t) for t in found]
        if unknown:
            parts.append(f"Unknown tools: {', '.join(unknown)} (call {CATALOGUE_TOOL} without `load` for the list).")
        if found:
            parts.insert(0, "Loaded; they are among your tools now, call them with these inputs:")
        return ToolOutput("\n".join(parts), is_error=not found)


class _FirstUse(Rule):
    """Denies the first call of a deferred tool not loaded yet, loading it and giving its schema."""

    def __init__(self, tools: DeferredTools) -> None:
        self._tools = tools

    @property
    def name(self) -> str:
        return "deferred_tools"

    async def check(self, call: BoundCall) -> Verdict:
        if not self._tools.deferred(call.name):
            return Allow()
        (tool,) = self._tools.load([call.name])
        return Deny(
            f"{call.name} was deferred to save context; its schema is loaded now. Call it again with an input "
            f"that fits it:\n{schema_text(tool)}"
        )
