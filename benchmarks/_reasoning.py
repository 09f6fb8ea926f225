"""The cache benchmark with the model reasoning: our session through the wire server, thinking replayed, billed.

Each scenario (`coding`, `revisits`) runs on each format with the model reasoning: Anthropic
Messages with adaptive (interleaved) thinking, OpenAI Responses with reasoning and its encrypted
items sent back (`store` false). Every model call goes through our provider (`AnthropicProvider`,
`OpenAIResponsesProvider`) to the test suite's wire server, scripted with the step's text, its
tool calls and reasoning (`Reply(reasoning=...)`), so the thinking, its signature or encrypted
content and its usage come back as a real response does, are logged, and are replayed by the
renderer as it replays them. A request the server refuses (a signed block changed or dropped
inside a tool loop) counts in `thinking_requests_refused`, which must be 0; the run goes on with
the step's answer. The requests are billed by the cache simulator on the scripted clock: their
input as every other bill of the benchmark, their output (reasoning included) at the model's
output price, beside the same scenario run the same way without reasoning, and beside pi and
Codex with reasoning on when they are installed (`make peers`).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

from benchmarks import Figure
from benchmarks._billing import FIRST_BYTE_S, PRICES, simulator_for
from benchmarks._peers import PeerRun, PeerUnavailable, run_codex, run_pi
from benchmarks._scenario import ModelCall, ModelStep, ScriptedTurn, scripted_session
from lamina.cachesim import CacheUsage, TimedRequest, summarise
from lamina.errors import ProviderError
from lamina.placement import ReasoningConfig, render
from lamina.providers import AnthropicProvider, Completed, OpenAIResponsesProvider
from lamina.session import AssistantMessage, Usage

OUTPUT_PRICE: Final = {"anthropic": 5.0, "responses": 8.0}
"""An output token in base-price input tokens: Claude Sonnet 5 ($10 / $2), gpt-5 ($10 / $1.25)."""
_REASONING: Final = {
    "anthropic": ReasoningConfig(thinking="adaptive"),
    "responses": ReasoningConfig(effort="medium", summary="auto"),
}
_KEY: Final = "bench-local-key"


def thought(step: ModelStep) -> str:
    """The scripted model's reasoning before `step`: a few hundred tokens, as a short step's thinking runs."""
    reads = ", ".join(r.path for r in step.reads) or "no file"
    return f"The task needs {reads}. {step.text} Check the callers first, then the tests. " * 12


@dataclass(slots=True)
class ReasoningRun:
    """One run of a script on one format: what was billed and what the server refused."""

    usages: list[CacheUsage] = field(default_factory=list)
    output: int = 0
    """Output tokens as the responses reported them, reasoning included."""
    reasoning: int = 0
    """Of `output`, the reasoning tokens."""
    refused: int = 0
    replayed: int = 0
    """Reasoning blocks sent back, over every request."""

    def bill(self, target: str) -> float:
        """Input billed (cache reads and writes) plus output, in base-price input tokens."""
        return summarise(self.usages).weighted_tokens + self.output * OUTPUT_PRICE[target]


def _provider(target: str, server: WireServer, reasoning: ReasoningConfig | None) -> Any:
    if target == "anthropic":
        return AnthropicProvider("claude-sonnet-5", api_key=_KEY, base_url=server.url, reasoning=reasoning)
    return OpenAIResponsesProvider("gpt-5", api_key=_KEY, base_url=server.openai_url, reasoning=reasoning)


def _replayed(body: dict[str, Any], target: str) -> int:
    if target == "anthropic":
        blocks = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
        return sum(1 for b in blocks if b.get("type") in ("thinking", "redacted_thinking"))
    return sum(1 for item in body["input"] if isinstance(item, dict) and item.get("type") == "reasoning")


async def _complete(provider: Any, body: dict[str, Any]) -> Completed:
    completed: Completed | None = None
    async for event in provider.stream(body):
        if isinstance(event, Completed):
            completed = event
    assert completed is not None
    return completed


def run_on_wire(script: Sequence[ScriptedTurn], target: str, *, reasoning: bool) -> ReasoningRun:
    """Our session through the wire server on `target` ("anthropic" or "responses"), the model reasoning or not."""
    run, simulator = ReasoningRun(), simulator_for(target)
    loop = asyncio.new_event_loop()
    with WireServer() as server:
        provider = _provider(target, server, _REASONING[target] if reasoning else None)

        def respond(call: ModelCall, step: ModelStep) -> AssistantMessage:
            body = dict(render(call.turn, provider.target, continuation=call.engine.continuation(call.turn)))
            run.usages.append(simulator.submit(TimedRequest(call.t_start, body, call.t_start + FIRST_BYTE_S)))
            run.replayed += _replayed(body, target)
            calls = [ToolUse("Read", {"path": r.path}, id=r.call_id) for r in step.reads]
            server.script(Reply(text=step.text, tool_calls=calls, reasoning=thought(step) if reasoning else ""))
            try:
                done = loop.run_until_complete(_complete(provider, body))
            except ProviderError as exc:
                run.refused += 1
                print(f"cache: the wire server refused a request on {target}: {exc}", file=sys.stderr)
                return AssistantMessage(text=step.text, usage=Usage(input=100, output=30))
            run.output += done.usage.output
            run.reasoning += done.usage.reasoning
            return AssistantMessage(text=done.text, usage=done.usage, reasoning=done.reasoning, model=done.model)

        try:
            for _ in scripted_session(script, cache_prices=PRICES[target], respond=respond):
                pass
        finally:
            loop.run_until_complete(provider.aclose())
            loop.close()
    return run


def _peer(
    label: str, runner: Callable[..., PeerRun], target: str, script: Sequence[ScriptedTurn], **kw: Any
) -> float | None:
    """A peer's input bill with reasoning on, through the same server (None: not installed)."""
    try:
        peer = runner(script, reasoning=True, **kw)
    except PeerUnavailable as exc:
        print(f"cache: {label} with reasoning skipped: {exc}", file=sys.stderr)
        return None
    simulator = simulator_for(target)
    usages = [simulator.submit(TimedRequest(r.t_start, r.body, r.t_start + FIRST_BYTE_S)) for r in peer.requests]
    return summarise(usages).weighted_tokens


def reasoning_figures(
    scenario: str, script: Sequence[ScriptedTurn], *, progress: Callable[[str], None], peers: bool
) -> list[Figure]:
    """The scenario with reasoning on both formats, beside itself without and (with `peers`) pi and Codex."""
    figures: list[Figure] = []
    for target in ("anthropic", "responses"):
        progress(f"{scenario} on {target} through the wire server, with and without reasoning")
        figures += _target_figures(scenario, target, script, progress=progress, peers=peers)
    return figures


def _target_figures(
    scenario: str, target: str, script: Sequence[ScriptedTurn], *, progress: Callable[[str], None], peers: bool
) -> list[Figure]:
    on = run_on_wire(script, target, reasoning=True)
    off = run_on_wire(script, target, reasoning=False)
    billed_on, billed_off = summarise(on.usages).weighted_tokens, summarise(off.usages).weighted_tokens

    def figure(name: str, value: float, unit: str, note: str = "") -> Figure:
        return Figure(f"{name}_{scenario}_{target}", value, unit, note=note, scenario=scenario, target=target)

    figures = [
        figure("thinking_requests_refused", on.refused + off.refused, "requests", note="must be 0"),
        figure("thinking_blocks_replayed", on.replayed, "blocks", note=f"over {len(on.usages)} requests"),
        figure("reasoning_output_tokens", on.reasoning, "tokens", note=f"of {on.output:,} output tokens"),
        figure("billed_input_tokens_thinking", round(billed_on), "tokens"),
        figure("billed_input_tokens_plain", round(billed_off), "tokens", note="the same run, no reasoning"),
        figure(
            "thinking_vs_plain_input_ratio",
            round(billed_on / billed_off, 4) if billed_off else 0.0,
            "ratio",
            note="replayed reasoning, billed as input",
        ),
        figure(
            "thinking_vs_plain_bill_ratio",
            round(on.bill(target) / off.bill(target), 4) if off.bill(target) else 0.0,
            "ratio",
            note=f"input + output at {OUTPUT_PRICE[target]:g}x: {on.bill(target):,.0f} / {off.bill(target):,.0f}",
        ),
        figure("efficiency_thinking", round(summarise(on.usages).cache_efficiency, 4), "ratio"),
    ]
    if peers:
        label, slug, runner = ("pi", "pi", run_pi) if target == "anthropic" else ("Codex CLI", "codex", run_codex)
        theirs = _peer(label, runner, target, script, progress=progress)
        if theirs is not None:
            note = f"{billed_on:,.0f} / {theirs:,.0f}, both reasoning"
            figures.append(
                figure(f"billed_input_vs_{slug}_ratio_thinking", round(billed_on / theirs, 4), "ratio", note)
            )
    return figures
