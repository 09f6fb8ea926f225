"""Tool search on the wire server: deferred tools found by BM25 or a regex, loaded only by a reference.

A request whose `tools` mark some `defer_loading` (with Anthropic's `tool_search_tool_bm25_20251119` /
`_regex_` or Responses' `{"type": "tool_search"}`) lets a scripted `Reply.tool_search` query run over
the deferred tools' names and descriptions (Anthropic's also over those a `tool_addition` adds inline
with `defer_loading`): the response carries the search's blocks (Anthropic:
`server_tool_use` then `tool_search_tool_result` with `tool_reference`s; Responses: `tool_search_call`
then `tool_search_output` with the loaded definitions) before its text. A deferred tool is callable
only after a reference loaded it (earlier in the conversation or in the same response); Anthropic's
`tool_addition` / `tool_removal` blocks change the tool set from their position on, and one naming
no tool in `tools` is refused with 400 `tool_reference_unresolved`, as the API does.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Final

from tests.wire.script import Reply, WireResponse, json_response

CHANGES_BETA: Final = "mid-conversation-tool-changes-2026-07-01"
INLINE_BETA: Final = "inline-tools-2026-09-15"
MAX_RESULTS: Final = 5
"""How many references one search returns at most (the API's default)."""
_WORD: Final = re.compile(r"[a-z0-9]+")
ANTHROPIC_SEARCH_TYPES: Final = {
    "tool_search_tool_bm25_20251119": "bm25",
    "tool_search_tool_bm25": "bm25",
    "tool_search_tool_regex_20251119": "regex",
    "tool_search_tool_regex": "regex",
}


def _tools(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    tools = body.get("tools")
    return [t for t in tools if isinstance(t, Mapping)] if isinstance(tools, list) else []


def deferred_tools(body: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The request's deferred tool definitions by name."""
    return {str(t.get("name")): t for t in _tools(body) if t.get("defer_loading") is True}


def searchable_tools(body: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The deferred tools a search can find: `tools`' and those a `tool_addition` adds inline with
    `defer_loading`, less those a later `tool_removal` takes away (an inline definition replaces its name's)."""
    found = deferred_tools(body)
    for message in body.get("messages") or ():
        for block in (message.get("content") if isinstance(message, Mapping) else None) or ():
            kind = block.get("type") if isinstance(block, Mapping) else None
            name = _changed(block) if kind in ("tool_addition", "tool_removal") else None
            if name is None:
                continue
            found.pop(name, None)
            if kind == "tool_addition" and _inline_deferred(block):
                found[name] = block["tool"]["definition"]
    return found


def anthropic_search_kind(body: Mapping[str, Any]) -> str | None:
    """`bm25` or `regex`: the tool-search tool the request carries (None: none)."""
    return next(
        (ANTHROPIC_SEARCH_TYPES[str(t["type"])] for t in _tools(body) if t.get("type") in ANTHROPIC_SEARCH_TYPES), None
    )


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("__", " ").replace("_", " "))


def search(tools: Mapping[str, Mapping[str, Any]], query: str, kind: str) -> list[str]:
    """The names of the deferred tools `query` finds, best first (BM25 over names and descriptions, or a regex)."""
    texts = {name: f"{name} {t.get('description', '')}" for name, t in tools.items()}
    if kind == "regex":
        pattern = re.compile(query, re.IGNORECASE)
        return [name for name, text in texts.items() if pattern.search(text)][:MAX_RESULTS]
    docs = {name: Counter(_words(text)) for name, text in texts.items()}
    if not docs:
        return []
    average = sum(sum(d.values()) for d in docs.values()) / len(docs)
    terms = set(_words(query))
    frequency = {term: sum(1 for d in docs.values() if term in d) for term in terms}
    scores: dict[str, float] = {}
    for name, doc in docs.items():
        length = sum(doc.values())
        score = 0.0
        for term in terms:
            tf = doc.get(term, 0)
            if tf:
                idf = math.log(1 + (len(docs) - frequency[term] + 0.5) / (frequency[term] + 0.5))
                score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / average))
        if score > 0:
            scores[name] = score
    return sorted(scores, key=lambda name: (-scores[name], name))[:MAX_RESULTS]


def anthropic_blocks(body: Mapping[str, Any], step: Reply, n: int) -> list[dict[str, Any]]:
    """A scripted search's `server_tool_use` and `tool_search_tool_result` blocks (none without a search)."""
    kind = anthropic_search_kind(body)
    if not step.tool_search or kind is None:
        return []
    found = search(searchable_tools(body), step.tool_search, kind)
    use_id = f"srvtoolu_wire_{n:04d}"
    name = f"tool_search_tool_{kind}"
    return [
        {"type": "server_tool_use", "id": use_id, "name": name, "input": {"query": step.tool_search}},
        {
            "type": "tool_search_tool_result",
            "tool_use_id": use_id,
            "content": {
                "type": "tool_search_tool_search_result",
                "tool_references": [{"type": "tool_reference", "tool_name": t} for t in found],
            },
        },
    ]


def _references(block: Mapping[str, Any]) -> list[str]:
    content = block.get("content")
    refs = content.get("tool_references") if isinstance(content, Mapping) else None
    return [str(r.get("tool_name")) for r in refs if isinstance(r, Mapping)] if isinstance(refs, list) else []


def _changed(block: Mapping[str, Any]) -> str | None:
    tool = block.get("tool")
    if not isinstance(tool, Mapping):
        return None
    if tool.get("type") == "tool_definition":
        definition = tool.get("definition")
        return str(definition.get("name")) if isinstance(definition, Mapping) else None
    return str(tool.get("name"))


def unresolved(message: str) -> WireResponse:
    """400 `tool_reference_unresolved`, in the API's error shape (`error.details.error_code`)."""
    error = {
        "type": "invalid_request_error",
        "message": message,
        "details": {"error_code": "tool_reference_unresolved"},
    }
    return json_response(400, {"type": "error", "error": error, "request_id": "req_wire_tools"})


def anthropic_problem(body: Mapping[str, Any]) -> WireResponse | str | None:
    """Why the API refuses `body`'s deferred tools: a reference that does not resolve (400
    `tool_reference_unresolved`, the response), a call to a deferred tool no reference loaded (a 400
    message), or None."""
    declared = {str(t.get("name")) for t in _tools(body)}
    deferred = set(deferred_tools(body))
    loaded: set[str] = set()
    removed: set[str] = set()
    messages = body.get("messages")
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        content = message.get("content") if isinstance(message, Mapping) else None
        for j, block in enumerate(content if isinstance(content, list) else []):
            kind = block.get("type") if isinstance(block, Mapping) else None
            where = f"messages.{i}.content.{j}"
            if kind == "tool_search_tool_result":
                loaded.update(_references(block))
            elif kind in ("tool_addition", "tool_removal"):
                name = _changed(block)
                if name is None or (not _inline(block) and name not in declared | loaded):
                    return unresolved(f"{where}: tool reference '{name}' does not resolve to a tool")
                declared.add(name)  # an inline definition: a later reference resolves to it
                _change(kind, name, loaded, deferred, lazy=_inline_deferred(block))
                removed.discard(name) if kind == "tool_addition" else removed.add(name)
            elif kind == "tool_use" and block.get("name") in removed:
                return f"{where}: tool '{block.get('name')}' was removed by a tool_removal and is not available"
            elif kind == "tool_use" and block.get("name") in deferred - loaded:
                return f"{where}: tool '{block.get('name')}' is deferred and was not loaded by a tool_reference"
    return None


def _inline_deferred(block: Mapping[str, Any]) -> bool:
    tool = block.get("tool")
    definition = tool.get("definition") if isinstance(tool, Mapping) else None
    return isinstance(definition, Mapping) and definition.get("defer_loading") is True


def beta_problem(body: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
    """A tool change sent without its beta header (inline definitions need a second one), as the API refuses it."""
    betas = {b.strip() for b in headers.get("anthropic-beta", "").split(",")}
    for message in body.get("messages") or ():
        for block in (message.get("content") if isinstance(message, Mapping) else None) or ():
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind in ("tool_addition", "tool_removal") and CHANGES_BETA not in betas:
                return f"{kind}: this block requires the `anthropic-beta: {CHANGES_BETA}` header"
            if kind == "tool_addition" and _inline(block) and INLINE_BETA not in betas:
                return f"tool_addition.tool.tool_definition: requires the `anthropic-beta: {INLINE_BETA}` header"
    return None


def _inline(block: Mapping[str, Any]) -> bool:
    tool = block.get("tool")
    return isinstance(tool, Mapping) and tool.get("type") == "tool_definition"


def _change(kind: str, name: str, loaded: set[str], deferred: set[str], *, lazy: bool = False) -> None:
    """A `tool_addition` makes `name` callable from here on (a deferred one once found); a removal withdraws it."""
    if kind == "tool_addition" and lazy:
        deferred.add(name)
        loaded.discard(name)
    elif kind == "tool_addition":
        loaded.add(name)
    else:
        loaded.discard(name)
        deferred.add(name)


def script_problem(body: Mapping[str, Any], step: Reply, found: Sequence[str]) -> str | None:
    """A scripted call to a deferred tool that neither the conversation nor this response's search loaded."""
    loaded = set(found)
    for message in body.get("messages") or body.get("input") or ():
        for block in (message.get("content") if isinstance(message, Mapping) else None) or ():
            if isinstance(block, Mapping) and block.get("type") == "tool_search_tool_result":
                loaded.update(_references(block))
        if isinstance(message, Mapping) and message.get("type") == "tool_search_output":
            loaded.update(str(t.get("name")) for t in message.get("tools") or () if isinstance(t, Mapping))
    for call in step.tool_calls:
        if call.name in searchable_tools(body) and call.name not in loaded:
            return f"wire server: the script calls deferred tool {call.name}, which no tool_reference loaded"
    return None


def responses_items(body: Mapping[str, Any], step: Reply, n: int) -> list[dict[str, Any]]:
    """A scripted hosted search's `tool_search_call` and `tool_search_output` items (none without a search)."""
    if not step.tool_search or not any(t.get("type") == "tool_search" for t in _tools(body)):
        return []
    tools = deferred_tools(body)
    found = search(tools, step.tool_search, "bm25")
    call_id = f"tsc_wire{n:04d}"
    common = {"call_id": call_id, "execution": "server", "status": "completed"}
    loaded = [{k: v for k, v in tools[name].items() if k != "defer_loading"} for name in found]
    return [
        {"id": f"ts_wire{n:04d}", "type": "tool_search_call", "arguments": {"query": step.tool_search}, **common},
        {"id": f"tso_wire{n:04d}", "type": "tool_search_output", "tools": loaded, **common},
    ]


def responses_problem(body: Mapping[str, Any]) -> str | None:
    """A function call in the input to a deferred tool that no earlier `tool_search_output` loaded."""
    deferred = set(deferred_tools(body))
    loaded: set[str] = set()
    items = body.get("input")
    for i, item in enumerate(items if isinstance(items, list) else []):
        if not isinstance(item, Mapping):
            continue
        if item.get("type") == "tool_search_output":
            loaded.update(str(t.get("name")) for t in item.get("tools") or () if isinstance(t, Mapping))
        elif item.get("type") == "function_call" and item.get("name") in deferred - loaded:
            return f"input[{i}]: function '{item.get('name')}' is deferred and was not loaded by tool search"
    return None


def found_by(body: Mapping[str, Any], step: Reply, *, anthropic: bool) -> list[str]:
    """The names a scripted search in `step` loads (none without a search tool in `body`)."""
    kind = anthropic_search_kind(body) if anthropic else ("bm25" if responses_items(body, step, 0) else None)
    searchable = searchable_tools(body) if anthropic else deferred_tools(body)
    return search(searchable, step.tool_search, kind) if step.tool_search and kind else []


def problem(api: str, body: Mapping[str, Any]) -> WireResponse | str | None:
    """Why the API refuses `body`'s deferred tools: a 400 response, a 400 message, or None."""
    if api == "anthropic":
        return anthropic_problem(body)
    return responses_problem(body) if api == "responses" else None


def with_call(body: Mapping[str, Any], name: str, call_id: str = "toolu_1") -> dict[str, Any]:
    """A copy of an Anthropic `body` whose conversation goes on with a call to `name` and its result."""
    use = {"type": "tool_use", "id": call_id, "name": name, "input": {"title": "x"}}
    result = {"type": "tool_result", "tool_use_id": call_id, "content": "ok"}
    called = [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]
    return {**body, "messages": [*body["messages"], *called]}
