"""Anthropic context editing on the wire server: `context_management.edits`, checked, applied, reported.

Shapes from the SDK's beta types (`beta_context_management_config_param.py`, `beta_clear_*_edit_param.py`,
`beta_context_management_response.py`). The server is stateless, like the API: each request's edits
are applied to that request alone, before the "model" reads it and before the cache simulator sees
it, so a clearing changes the prompt from the first cleared block on (the cached prefix past it is
lost) while the client keeps sending its whole history.

- `clear_thinking_20251015` (listed first): with `keep` `{"type": "thinking_turns", "value": N}` the
  thinking blocks of all but the newest N assistant turns (a turn: the assistant messages between two
  user messages that are not only tool results) are removed; `"all"` keeps every one.
- `clear_tool_uses_20250919`: when the trigger is met (`input_tokens`: the prompt's tokens, default
  100,000; `tool_uses`: the tool uses in it), every tool use but the newest `keep` (default 3) among
  those whose tool is not in `exclude_tools` has its result replaced by `CLEARED_TOOL_RESULT` (and its
  input by `{}` where `clear_tool_inputs` says so), unless that frees fewer than `clear_at_least` tokens.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from lamina.tokens import TokenEstimator

BETA: Final = "context-management-2025-06-27"
CLEAR_TOOL_USES: Final = "clear_tool_uses_20250919"
CLEAR_THINKING: Final = "clear_thinking_20251015"
COMPACT: Final = "compact_20260112"
CLEARED_TOOL_RESULT: Final = "[cleared to save context]"
"""The text a cleared tool result shows the model."""
_DEFAULT_TRIGGER: Final = 100_000
_DEFAULT_KEEP: Final = 3
_KNOWN: Final = (CLEAR_TOOL_USES, CLEAR_THINKING, COMPACT)


@dataclass
class Edited:
    """A request as the model reads it after the edits, and what the response reports of them."""

    body: Mapping[str, Any]
    applied: list[dict[str, Any]] = field(default_factory=list)
    """`context_management.applied_edits` (only edits that changed something)."""
    requested: bool = False
    """Whether the request asked for context management at all (the response says so only then)."""

    def response_field(self) -> dict[str, Any] | None:
        """The response's `context_management` (None when the request sent none)."""
        return {"applied_edits": self.applied} if self.requested else None


def problem(body: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
    """Why the API would refuse `body`'s `context_management` with 400, or None."""
    if "context_management" not in body:
        return None
    betas = {b.strip() for b in headers.get("anthropic-beta", "").split(",")}
    if BETA not in betas:
        return "context_management: Extra inputs are not permitted"
    config = body["context_management"]
    edits = config.get("edits") if isinstance(config, Mapping) else None
    if not isinstance(edits, list):
        return "context_management.edits: Input should be a valid list"
    kinds = [e.get("type") if isinstance(e, Mapping) else None for e in edits]
    for i, (edit, kind) in enumerate(zip(edits, kinds, strict=True)):
        where = f"context_management.edits.{i}"
        if kind not in _KNOWN:
            expected = ", ".join(f"'{k}'" for k in _KNOWN)
            return f"{where}: Input tag '{kind}' found using 'type' does not match any of the expected tags: {expected}"
        if kinds.count(kind) > 1:
            return f"context_management.edits: duplicate strategy type '{kind}'"
        found = _tool_uses_problem(edit, where) if kind == CLEAR_TOOL_USES else None
        if kind == CLEAR_THINKING:
            found = _thinking_problem(body, edit, where, first=i == 0)
        if found is not None:
            return found
    return None


def _tool_uses_problem(edit: Mapping[str, Any], where: str) -> str | None:
    trigger = edit.get("trigger")
    if trigger is not None:
        kind = trigger.get("type") if isinstance(trigger, Mapping) else None
        if kind not in ("input_tokens", "tool_uses"):
            return (
                f"{where}.trigger: Input tag '{kind}' found using 'type' does not match any of the expected tags: "
                "'input_tokens', 'tool_uses'"
            )
        found = _count_problem(trigger, f"{where}.trigger", minimum=1)
        if found is not None:
            return found
    for name, expected, minimum in (("keep", "tool_uses", 0), ("clear_at_least", "input_tokens", 0)):
        value = edit.get(name)
        if value is None:
            continue
        if not isinstance(value, Mapping) or value.get("type") != expected:
            return f"{where}.{name}.type: Input should be '{expected}'"
        found = _count_problem(value, f"{where}.{name}", minimum=minimum)
        if found is not None:
            return found
    excluded = edit.get("exclude_tools")
    if excluded is not None and not (isinstance(excluded, list) and all(isinstance(t, str) for t in excluded)):
        return f"{where}.exclude_tools: Input should be a valid list"
    inputs = edit.get("clear_tool_inputs")
    if inputs is not None and not isinstance(inputs, bool | list):
        return f"{where}.clear_tool_inputs: Input should be a valid boolean"
    return None


def _count_problem(value: Mapping[str, Any], where: str, *, minimum: int) -> str | None:
    count = value.get("value")
    if not isinstance(count, int) or isinstance(count, bool):
        return f"{where}.value: Input should be a valid integer"
    if count < minimum:
        return f"{where}.value: Input should be greater than or equal to {minimum}"
    return None


def _thinking_problem(body: Mapping[str, Any], edit: Mapping[str, Any], where: str, *, first: bool) -> str | None:
    thinking = body.get("thinking")
    if not (isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive")):
        return f"{where}: `{CLEAR_THINKING}` strategy requires thinking to be enabled or adaptive"
    if not first:
        return f"{where}: `{CLEAR_THINKING}` must be the first strategy in context_management.edits"
    keep = edit.get("keep")
    if keep is None or keep == "all" or (isinstance(keep, Mapping) and keep.get("type") == "all"):
        return None
    if not isinstance(keep, Mapping) or keep.get("type") != "thinking_turns":
        return f"{where}.keep: Input should be 'all' or a `thinking_turns` object"
    return _count_problem(keep, f"{where}.keep", minimum=1)


def apply(body: Mapping[str, Any], estimator: TokenEstimator) -> Edited:
    """`body` as the model reads it (a copy; `body` is unchanged) and the edits applied (call `problem` first)."""
    config = body.get("context_management")
    if not isinstance(config, Mapping):
        return Edited(body)
    copy: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(body))  # a deep copy
    edited = Edited(copy, requested=True)
    messages: list[dict[str, Any]] = copy["messages"]
    for edit in config.get("edits", ()):
        if edit.get("type") == CLEAR_THINKING:
            applied = _clear_thinking(messages, edit.get("keep"), estimator)
        elif edit.get("type") == CLEAR_TOOL_USES:
            applied = _clear_tool_uses(copy, edit, estimator)
        else:
            continue  # another strategy (server compaction) is not this module's
        if applied is not None:
            edited.applied.append(applied)
    return edited


def _clear_thinking(messages: list[dict[str, Any]], keep: object, estimator: TokenEstimator) -> dict[str, Any] | None:
    if keep is None:
        turns_kept = 1
    elif isinstance(keep, Mapping) and keep.get("type") == "thinking_turns":
        turns_kept = int(keep["value"])
    else:
        return None  # "all"
    turns = _assistant_turns(messages)
    cleared_turns = 0
    cleared_tokens = 0
    for turn in turns[: max(0, len(turns) - turns_kept)]:
        found = False
        for message in turn:
            kept = []
            for block in message["content"]:
                if block.get("type") in ("thinking", "redacted_thinking"):
                    found = True
                    cleared_tokens += estimator.count(block.get("thinking") or block.get("data") or "")
                else:
                    kept.append(block)
            message["content"] = kept
        cleared_turns += found
    if not cleared_turns:
        return None
    return {"type": CLEAR_THINKING, "cleared_thinking_turns": cleared_turns, "cleared_input_tokens": cleared_tokens}


def _assistant_turns(messages: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The assistant messages grouped by turn (a user message that is not only tool results starts one)."""
    turns: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        if message.get("role") == "assistant":
            if isinstance(content, str):
                message["content"] = [{"type": "text", "text": content}]
            current.append(message)
        elif not blocks or any(b.get("type") != "tool_result" for b in blocks):
            if current:
                turns.append(current)
            current = []
    if current:
        turns.append(current)
    return turns


def _clear_tool_uses(body: dict[str, Any], edit: Mapping[str, Any], estimator: TokenEstimator) -> dict[str, Any] | None:
    messages: list[dict[str, Any]] = body["messages"]
    uses = [
        (block, message)
        for message in messages
        if message.get("role") == "assistant" and isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_use"
    ]
    trigger = edit.get("trigger") or {"type": "input_tokens", "value": _DEFAULT_TRIGGER}
    if trigger["type"] == "tool_uses":
        met = len(uses) >= trigger["value"]
    else:
        met = prompt_tokens(body, estimator) >= trigger["value"]
    if not met:
        return None
    excluded = set(edit.get("exclude_tools") or ())
    clearable = [block for block, _ in uses if block.get("name") not in excluded]
    keep = (edit.get("keep") or {"value": _DEFAULT_KEEP})["value"]
    chosen = clearable[: max(0, len(clearable) - keep)]
    results = _results_by_id(messages)
    inputs = edit.get("clear_tool_inputs") or False
    freed = 0
    plans: list[tuple[dict[str, Any], dict[str, Any] | None, bool]] = []
    placeholder = estimator.count(CLEARED_TOOL_RESULT)
    for block in chosen:
        result = results.get(block.get("id"))
        clear_input = inputs is True or (isinstance(inputs, list) and block.get("name") in inputs)
        if result is not None:
            freed += max(0, estimator.count(_text(result.get("content"))) - placeholder)
        if clear_input:
            freed += estimator.count(msgspec.json.encode(block.get("input", {})).decode()) - 1
        plans.append((block, result, clear_input))
    at_least = (edit.get("clear_at_least") or {"value": 0})["value"]
    if not plans or freed <= 0 or freed < at_least:
        return None
    for block, result, clear_input in plans:
        if result is not None:
            result["content"] = CLEARED_TOOL_RESULT
        if clear_input:
            block["input"] = {}
    return {"type": CLEAR_TOOL_USES, "cleared_tool_uses": len(plans), "cleared_input_tokens": freed}


def _results_by_id(messages: Sequence[Mapping[str, Any]]) -> dict[object, dict[str, Any]]:
    return {
        block.get("tool_use_id"): block
        for message in messages
        if message.get("role") == "user" and isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    }


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) if isinstance(b, Mapping) else "" for b in content)
    return ""


def prompt_tokens(body: Mapping[str, Any], estimator: TokenEstimator) -> int:
    """The prompt's tokens as the trigger counts them: tools, system and messages as JSON."""
    parts = {k: body[k] for k in ("tools", "system", "messages") if k in body}
    return estimator.count(msgspec.json.encode(parts).decode())
