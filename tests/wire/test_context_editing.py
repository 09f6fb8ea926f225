"""Anthropic context editing through the SDK's beta path against the wire server: edits applied, reported, refused."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from lamina.errors import InvalidRequestError
from lamina.placement import (
    CLEAR_THINKING,
    CLEAR_TOOL_USES,
    CONTEXT_MANAGEMENT_BETA,
    clear_thinking_edit,
    clear_tool_uses_edit,
    context_management,
)
from lamina.providers import AnthropicProvider, Capabilities, Completed
from tests.wire.context_editing import CLEARED_TOOL_RESULT
from tests.wire.fixtures import API_KEY, anthropic_provider
from tests.wire.script import Reply
from tests.wire.server import WireServer

BIG = "line of output that the model read once\n" * 400
EDITING = Capabilities(context_editing=frozenset({CLEAR_TOOL_USES, CLEAR_THINKING}))


def _body(uses: int, *, edits: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "look around"}]
    for n in range(uses):
        use = {"type": "tool_use", "id": f"toolu_{n}", "name": "Read", "input": {"path": f"f{n}.py"}}
        messages.append({"role": "assistant", "content": [use]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": f"{n}: {BIG}"}
        messages.append({"role": "user", "content": [result]})
    messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    body: dict[str, Any] = {"model": "claude-sonnet-5", "max_tokens": 64, "messages": messages}
    managed = context_management(edits or [])
    return body if managed is None else {**body, "context_management": managed}


async def _send(provider: AnthropicProvider, body: dict[str, Any]) -> Completed:
    events = [e async for e in provider.stream(body)]  # type: ignore[arg-type]
    last = events[-1]
    assert isinstance(last, Completed)
    return last


async def test_the_server_clears_old_tool_uses_reports_it_and_the_cache_is_written_from_the_cleared_point(
    wire: WireServer,
) -> None:
    wire.script(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    async with anthropic_provider(wire, capabilities=EDITING) as provider:
        await _send(provider, _body(5))  # no edit: the whole history is cached
        cleared = await _send(provider, _body(5, edits=[clear_tool_uses_edit(keep=2)]))
        again = await _send(provider, _body(5, edits=[clear_tool_uses_edit(keep=2)]))
    first, second, third = wire.requests
    assert CONTEXT_MANAGEMENT_BETA in second.headers["anthropic-beta"]  # the SDK's beta path
    assert "anthropic-beta" not in first.headers
    assert [(e.kind, e.cleared_tool_uses) for e in cleared.context_edits] == [(CLEAR_TOOL_USES, 3)]
    assert cleared.context_edits[0].cleared_input_tokens > 2_000
    results = [
        b["content"] for m in second.seen["messages"] for b in m["content"] if isinstance(b, dict) and "content" in b
    ]
    assert results.count(CLEARED_TOOL_RESULT) == 3 and not any(CLEARED_TOOL_RESULT in str(r) for r in results[-2:])
    assert second.body["messages"][2]["content"][0]["content"].startswith("0: ")  # the client sent everything
    assert first.usage is not None and second.usage is not None and third.usage is not None
    assert second.usage.read < first.usage.write  # the cached prefix is lost from the first cleared result on
    assert second.usage.read + second.usage.write + second.usage.uncached < first.usage.write
    assert third.usage.read > 0.9 * (third.usage.read + third.usage.write + third.usage.uncached)  # the same clearing
    assert again.context_edits == cleared.context_edits


async def test_clear_at_least_leaves_the_prompt_alone_when_too_little_would_go(wire: WireServer) -> None:
    wire.script(Reply(text="kept"))
    async with anthropic_provider(wire, capabilities=EDITING) as provider:
        done = await _send(provider, _body(4, edits=[clear_tool_uses_edit(keep=3, clear_at_least=1_000_000)]))
    assert done.context_edits == ()
    assert wire.requests[0].applied_edits == ()
    assert CLEARED_TOOL_RESULT not in str(wire.requests[0].seen)


async def test_clear_thinking_keeps_the_newest_turns_thinking_and_is_listed_first(wire: WireServer) -> None:
    wire.script(Reply(text="a", reasoning="first thoughts"), Reply(text="b", reasoning="more"), Reply(text="c"))
    thinking = {"type": "adaptive"}
    async with anthropic_provider(wire, capabilities=EDITING) as provider:
        body: dict[str, Any] = {
            "model": "claude-sonnet-5",
            "max_tokens": 64,
            "thinking": thinking,
            "messages": [{"role": "user", "content": "hi"}],
        }
        messages = body["messages"]
        for text in ("again", "and again"):
            await _send(provider, body)
            reply = wire.requests[-1]
            assert reply.step is not None
            messages.append({"role": "assistant", "content": _assistant_blocks(wire)})
            messages.append({"role": "user", "content": text})
        edits = [clear_tool_uses_edit(keep=1), clear_thinking_edit(1)]
        done = await _send(provider, {**body, "context_management": context_management(edits)})
    sent = wire.requests[-1].body["context_management"]["edits"]
    assert [e["type"] for e in sent] == [CLEAR_THINKING, CLEAR_TOOL_USES]
    assert [(e.kind, e.cleared_thinking_turns) for e in done.context_edits] == [(CLEAR_THINKING, 1)]
    seen = wire.requests[-1].seen["messages"]
    assert [b["type"] for b in seen[1]["content"]] == ["text"] and seen[3]["content"][0]["type"] == "thinking"


def _assistant_blocks(wire: WireServer) -> list[dict[str, Any]]:
    """The last reply's blocks as the client sends them back (its thinking as signed by the server)."""
    signed = wire.anthropic_thinking
    step = wire.requests[-1].step
    assert isinstance(step, Reply)
    n = len(wire.requests)
    return [signed.block(step.reasoning, redacted=False, n=n), {"type": "text", "text": step.text}]


@pytest.mark.parametrize(
    ("edits", "thinking", "message"),
    [
        (
            [{"type": CLEAR_TOOL_USES, "keep": {"type": "tool_uses", "value": -1}}],
            None,
            "context_management.edits.0.keep.value: Input should be greater than or equal to 0",
        ),
        (
            [{"type": CLEAR_TOOL_USES, "trigger": {"type": "messages", "value": 3}}],
            None,
            "context_management.edits.0.trigger: Input tag 'messages' found using 'type' does not match",
        ),
        ([clear_thinking_edit("all")], None, "strategy requires thinking to be enabled or adaptive"),
        (
            [clear_tool_uses_edit(keep=1), clear_thinking_edit(1)],
            {"type": "adaptive"},
            "context_management.edits.1: `clear_thinking_20251015` must be the first strategy",
        ),
        ([{"type": "clear_everything"}], None, "Input tag 'clear_everything' found using 'type'"),
    ],
)
async def test_bad_configs_are_refused_with_the_api_s_400(
    wire: WireServer, edits: list[dict[str, Any]], thinking: dict[str, str] | None, message: str
) -> None:
    body = _body(2)
    body["context_management"] = {"edits": edits}  # as written: the builder would reorder
    if thinking is not None:
        body["thinking"] = thinking
    async with anthropic_provider(wire, capabilities=EDITING) as provider:
        with pytest.raises(InvalidRequestError, match=message.replace("(", r"\(").replace("`", "`")):
            await _send(provider, body)
    assert wire.requests[0].status == 400 and wire.pending == 0


async def test_without_the_beta_header_the_field_is_refused(wire: WireServer) -> None:
    client = anthropic.AsyncAnthropic(api_key=API_KEY, base_url=wire.url, max_retries=0)
    body = _body(1)
    with pytest.raises(anthropic.BadRequestError, match="context_management: Extra inputs are not permitted"):
        await client.messages.create(**body, extra_body={"context_management": {"edits": [{"type": CLEAR_TOOL_USES}]}})
    await client.close()


async def test_the_beta_response_passes_the_sdk_s_strict_validation(wire: WireServer) -> None:
    wire.script(Reply(text="ok"), Reply(text="ok"))
    client = anthropic.AsyncAnthropic(
        api_key=API_KEY, base_url=wire.url, max_retries=0, _strict_response_validation=True
    )
    body = _body(5)
    edits: Any = [clear_tool_uses_edit(keep=1, clear_tool_inputs=True)]
    message = await client.beta.messages.create(
        **body, context_management={"edits": edits}, betas=[CONTEXT_MANAGEMENT_BETA]
    )
    assert message.context_management is not None
    applied = message.context_management.applied_edits
    assert [(e.type, e.cleared_tool_uses) for e in applied] == [(CLEAR_TOOL_USES, 4)]
    assert wire.requests[0].seen["messages"][1]["content"][0]["input"] == {}  # the inputs were cleared too
    async with AnthropicProvider("claude-sonnet-5", client=client, capabilities=EDITING) as provider:
        done = await _send(provider, {**body, "context_management": {"edits": edits}})
    assert done.context_edits[0].cleared_tool_uses == 4
    await client.close()


def test_clear_tool_uses_is_never_sent_beside_server_compaction() -> None:
    from lamina.errors import UsageError

    with pytest.raises(UsageError, match="never sent with server compaction"):
        context_management([clear_tool_uses_edit(keep=1), {"type": "compact_20260112"}])
    assert context_management([]) is None


def test_the_log_keeps_what_the_server_cleared_and_old_logs_read_as_before() -> None:
    from lamina.compaction import apply_prunes
    from lamina.session import (
        AppliedEdit,
        AssistantMessage,
        LogEntry,
        ServerClearing,
        ToolCall,
        ToolOutputPruned,
        ToolResult,
        decode_entry,
        encode_entry,
    )

    answer = AssistantMessage(
        id="a1", text="ok", context_edits=(AppliedEdit(kind=CLEAR_TOOL_USES, cleared_tool_uses=2),)
    )
    assert decode_entry(encode_entry(answer)) == answer
    old = b'{"type":"prune","id":"p1","parent_id":null,"ts":0.0,"v":1,"call_ids":["c1"]}'
    prune = decode_entry(old)
    assert isinstance(prune, ToolOutputPruned) and prune.server is None
    view: list[LogEntry] = [
        ToolCall(id="c", call_id="c1", name="Read", input={"path": "a.py"}),
        ToolResult(id="r", call_id="c1", name="Read", content=BIG),
        ToolOutputPruned(id="p2", call_ids=("c1",), server=ServerClearing(clear_at_least=10)),
    ]
    shown = apply_prunes(view)  # the request keeps the result whole: the server's edit clears it
    assert isinstance(shown[1], ToolResult) and shown[1].content == BIG
