"""Seven MCP servers' tool schemas, sent whole or deferred: tokens per request (`cache --deferred-tools`).

The servers and their tools are synthetic but shaped like the popular ones (a code host, an issue
tracker, chat, a database, a browser, error tracking, a file store): about 67k tokens of schemas in
all, the figure users of every peer report. A session of short tool-calling turns runs through a
context engine three ways on each target: every schema in every request (`all`), deferred behind
the provider's tool search (Anthropic, `search`), and deferred behind Lamina's catalogue (Chat
Completions, `catalogue`). Requests are billed by the cache simulator; a tool search's loaded
definitions, which the API expands from each reference, are added to the requests that carry them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

from benchmarks import Figure
from lamina.agent import ToolDeferral, choose_tool_set
from lamina.cachesim import AnthropicCacheSimulator, CacheSimulator, OpenAICacheSimulator, TimedRequest
from lamina.context import Authority, Part, Stability, Tier, ToolSpec
from lamina.defang import trusted
from lamina.engine import ContextEngine
from lamina.placement import AnthropicTarget, OpenAIChatTarget, RenderTarget
from lamina.pricing import CachePrices, CacheState, Outlook, SessionPace
from lamina.session import AssistantMessage, InMemorySessionStore, ToolCall, ToolResult
from lamina.tokens import DEFAULT_ESTIMATOR

SERVERS: Final = {
    "github": ("repository", "issue", "pull request", "branch", "commit", "release", "workflow run", "review"),
    "jira": ("issue", "project", "sprint", "board", "comment", "worklog", "version", "filter"),
    "slack": ("channel", "message", "thread", "user", "reaction", "file", "reminder", "bookmark"),
    "postgres": ("table", "query", "index", "schema", "view", "role", "extension", "migration"),
    "browser": ("page", "tab", "element", "screenshot", "cookie", "form", "download", "console log"),
    "sentry": ("issue", "event", "release", "project", "alert rule", "team", "replay", "trace"),
    "drive": ("file", "folder", "permission", "revision", "comment", "shared drive", "label", "export"),
}
VERBS: Final = ("list", "get", "create", "update")
_THINGS: Final = 4
"""Things per server: 7 servers x 4 things x 4 verbs = 112 tools."""
_FIELDS: Final = 9
BUILTIN: Final = tuple(
    ToolSpec(
        name, trusted(f"{name} files in the workspace."), {"type": "object", "properties": {"path": {"type": "string"}}}
    )
    for name in ("Read", "Edit", "Write", "Bash", "Glob", "Grep")
)


def mcp_tools() -> tuple[ToolSpec, ...]:
    """The seven servers' tools (`<server>__<verb>_<thing>`), each schema documented like a real server's."""
    tools: list[ToolSpec] = []
    for server, things in SERVERS.items():
        for thing in things[:_THINGS]:
            for verb in VERBS:
                props: dict[str, Any] = {
                    f"{thing.replace(' ', '_')}_{field}": {
                        "type": "string",
                        "description": (
                            f"The {field} of the {thing} to {verb}, as the {server} API names it; see the "
                            f"{server} documentation for the accepted formats and the limits that apply."
                        ),
                    }
                    for field in ("id", "owner", "name", "state", "labels", "since", "until", "cursor", "fields")[
                        :_FIELDS
                    ]
                }
                props["page_size"] = {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 100,
                    "description": "Results per page.",
                }
                name = f"{server}__{verb}_{thing.replace(' ', '_')}"
                text = f"{verb.title()} a {thing} on {server}. Read sources/{server}/guide.md before first use."
                tools.append(ToolSpec(name, trusted(text), {"type": "object", "properties": props}))
    return tuple(tools)


def _stable() -> tuple[Part, ...]:
    rules = "You are a careful coding agent. Use the tools; keep answers short.\n" * 40
    return (Part("system.base", trusted(rules), "lamina", Authority.SYSTEM_RULE, Stability.STABLE, Tier.RULES),)


def _session(mode: str, target: RenderTarget, turns: int) -> tuple[list[int], float]:
    """Input tokens of each request, and the billed total in base-price tokens, for one way of sending tools."""
    source = mcp_tools()
    now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC).timestamp()
    clock = [now]
    store = InMemorySessionStore(clock=lambda: clock[0])
    engine = ContextEngine(store.create(cwd="/ws"), stable_source=_stable, tools=(), clock=lambda: clock[0])
    anthropic = isinstance(target, AnthropicTarget)
    simulator: CacheSimulator = AnthropicCacheSimulator() if anthropic else OpenAICacheSimulator()
    prices = CachePrices.anthropic() if anthropic else CachePrices.openai()
    loaded: list[str] = []
    sizes: list[int] = []
    billed = 0.0
    cached_expansion = 0
    for turn_index in range(turns):
        tool = source[(turn_index * 37) % len(source)]
        outlook = Outlook(prices, SessionPace(), CacheState(None, 0, 0, 0))
        deferral = ToolDeferral() if mode != "all" else None
        chosen = choose_tool_set(
            BUILTIN,
            source,
            deferral=deferral,
            context_window=200_000,
            tool_search=mode == "search",
            outlook=outlook,
            loaded=loaded,
        )
        engine.tools = chosen.tools
        turn = engine.prepare_turn(f"Task {turn_index}: look at the {tool.name.split('__')[1]} and report.")
        expanded = 0
        for step in range(2):
            body = dict(engine.request(turn, target))
            usage = simulator.submit(TimedRequest(clock[0], body, clock[0] + 1.0))
            if mode == "search":  # the API expands each loaded reference's definition in place, in the tail
                expanded = sum(_tokens(t) for t in source if t.name in loaded)
            sizes.append(usage.total + expanded)
            billed += usage.read * prices.read + usage.write * prices.write_5m + usage.uncached
            billed += cached_expansion * prices.read + (expanded - cached_expansion) * prices.write_5m
            cached_expansion = expanded
            clock[0] += 20.0
            if step == 0:
                engine.record(AssistantMessage(text="", turn_id=turn.id))
                engine.record(ToolCall(call_id=f"c{turn_index}", name=tool.name, input={}))
                engine.record(ToolResult(call_id=f"c{turn_index}", name=tool.name, content=f"{tool.name}: 3 results."))
                if tool.name not in loaded:
                    loaded.append(tool.name)
            else:
                engine.record(AssistantMessage(text="Done.", turn_id=turn.id))
        clock[0] += 90.0
    return sizes, billed


def _tokens(tool: ToolSpec) -> int:
    return DEFAULT_ESTIMATOR.count(f"{tool.name} {tool.description} {json.dumps(dict(tool.input_schema))}")


def deferred_tool_figures(*, quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    """Tokens per request (mean, as billed input) with the seven servers' schemas whole and deferred."""
    turns = 4 if quick else 12
    schema = sum(_tokens(t) for t in mcp_tools())
    figures = [
        Figure("mcp_servers", len(SERVERS), "servers"),
        Figure("mcp_tools", len(mcp_tools()), "tools"),
        Figure("mcp_schema_tokens", schema, "tokens"),
    ]
    ways = (
        ("anthropic", AnthropicTarget(model="claude-sonnet-5"), "search"),
        ("chat", OpenAIChatTarget(model="gpt-5"), "catalogue"),
    )
    for name, target, deferred in ways:
        progress(f"seven MCP servers on {name}: schemas whole, then {deferred}")
        whole, whole_bill = _session("all", target, turns)
        lean, lean_bill = _session(deferred, target, turns)
        figures += [
            Figure(f"tokens_per_request_mcp_all_{name}", round(sum(whole) / len(whole)), "tokens"),
            Figure(f"tokens_per_request_mcp_deferred_{name}", round(sum(lean) / len(lean)), "tokens", note=deferred),
            Figure(f"billed_input_tokens_mcp_all_{name}", round(whole_bill), "tokens"),
            Figure(f"billed_input_tokens_mcp_deferred_{name}", round(lean_bill), "tokens", note=deferred),
            Figure(f"deferred_tools_saving_{name}", round(1 - lean_bill / whole_bill, 4), "ratio"),
        ]
    return figures
