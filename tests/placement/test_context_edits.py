"""The context edits a body carries, rebuilt from the log: the server's clearing stays where the prune put it."""

from __future__ import annotations

from lamina.placement import CLEAR_THINKING, CLEAR_TOOL_USES, AnthropicTarget, ReasoningConfig
from lamina.placement._context_edits import tool_clearing_edit, with_context_edits
from lamina.session import LogEntry, ServerClearing, ToolCall, ToolOutputPruned, ToolResult


def _calls(names: list[str], start: int = 0) -> list[LogEntry]:
    entries: list[LogEntry] = []
    for n, name in enumerate(names, start=start):
        entries.append(ToolCall(id=f"t{n}", call_id=f"c{n}", name=name, input={}))
        entries.append(ToolResult(id=f"r{n}", call_id=f"c{n}", name=name, content="x"))
    return entries


def test_keep_counts_the_tool_uses_after_the_newest_cleared_one_as_the_history_grows() -> None:
    entries = _calls(["Read", "Bash", "Read", "Read"])
    entries.append(ToolOutputPruned(id="p", call_ids=("c0", "c1"), server=ServerClearing(clear_at_least=500)))
    edit = tool_clearing_edit(entries)
    assert edit is not None and edit["keep"] == {"type": "tool_uses", "value": 2}
    assert edit["clear_at_least"] == {"type": "input_tokens", "value": 500}
    grown = tool_clearing_edit([*entries, *_calls(["Read"], start=4)[:1]])
    assert grown is not None and grown["keep"]["value"] == 3  # the new call is kept: nothing more is cleared
    excluded = [
        *entries[:-1],
        ToolOutputPruned(id="p", call_ids=("c0",), server=ServerClearing(exclude_tools=("Bash",))),
    ]
    edit = tool_clearing_edit(excluded)
    assert edit is not None and edit["keep"]["value"] == 2 and edit["exclude_tools"] == ["Bash"]
    assert tool_clearing_edit(_calls(["Read"])) is None  # no server prune, no edit
    lamina_prune = [*_calls(["Read"]), ToolOutputPruned(id="p", call_ids=("c0",))]
    assert tool_clearing_edit(lamina_prune) is None


def test_the_body_asks_only_for_the_edits_the_target_allows() -> None:
    entries = [*_calls(["Read", "Read"]), ToolOutputPruned(id="p", call_ids=("c0",), server=ServerClearing())]
    body = {"model": "m", "messages": []}
    thinking = ReasoningConfig(thinking="adaptive", history="keep")
    both = AnthropicTarget(model="m", reasoning=thinking, context_edits=frozenset({CLEAR_TOOL_USES, CLEAR_THINKING}))
    edits = with_context_edits(body, entries, both)["context_management"]["edits"]
    assert [e["type"] for e in edits] == [CLEAR_THINKING, CLEAR_TOOL_USES] and edits[0]["keep"] == "all"
    assert with_context_edits(body, entries, AnthropicTarget(model="m")) is body
    dropped = AnthropicTarget(model="m", reasoning=ReasoningConfig(thinking="adaptive", history="drop"))
    only_thinking = AnthropicTarget(model="m", reasoning=dropped.reasoning, context_edits=frozenset({CLEAR_THINKING}))
    assert with_context_edits(body, entries, only_thinking) is body  # Lamina drops it itself
