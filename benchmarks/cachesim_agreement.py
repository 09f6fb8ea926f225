"""`python -m benchmarks cachesim_agreement`: how often Lamina's cache prediction says what the diagnostics say.

Every request of two sessions goes to the wire server (tests/wire) through our providers on the
official SDKs, asking for the provider's cache diagnostics (Anthropic's `diagnostics`, OpenAI's
`prompt_cache_options.comparison_response_id`); the wire server answers them by the documented
rules, from its cache simulator and the request named. Beside each answer, Lamina's prediction
(`lamina.cachesim.CacheMissPredictor`, what the agent records) is made from the same requests. A
diagnosis of no divergence on a request that read less than the one before left cached counts as
`ttl_expired` on both sides, as the agent records it.

- `coding`: the cache benchmark's scripted session (`benchmarks._scenario.session_script`, the
  AGENTS.md edit and the 9-minute gap; 12 turns with `--quick`), rendered by our placement.
- `changes`: a short session that changes each thing in turn: the tools, the system prompt, an
  idle gap past the TTL, the model, an earlier message, a setting (thinking, reasoning effort).

Figures per scenario and target (`anthropic`, `responses`): `agreement` (the share of compared
calls where both name the same reason; a call is compared when it is not the first and the
provider gave a diagnosis), `compared_calls`, `provider_misses` (calls the provider said missed),
`missed_tokens_error` (on calls both say missed for the same reason: the mean of |predicted −
provider| / provider missed tokens). `agreement_all` pools every compared call.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from tests.wire.script import Reply
from tests.wire.server import ManualClock, WireServer

from benchmarks import Figure
from benchmarks._billing import PLACEMENTS, PRICES, TARGETS
from benchmarks._scenario import scripted_session, session_script
from lamina.cachesim import CacheMissPredictor, TimedRequest, cache_held, find_divergence, settle_miss
from lamina.placement import RenderedRequest, render
from lamina.providers import Capabilities, Completed, Provider, ask_cache_diagnostics
from lamina.session import CacheMiss

_DIAGNOSED: Final = Capabilities(cache_diagnostics=True)
_NO_ANSWER: Final = frozenset({"not_found", "pending", "unavailable"})
_RULES: Final = "\n".join(f"Rule {i}: keep functions small and name them after what they do." for i in range(160))
_Body = dict[str, Any]


@dataclass
class _Tally:
    compared: int = 0
    agreed: int = 0
    misses: int = 0
    errors: list[float] = field(default_factory=list)
    disagreements: list[str] = field(default_factory=list)

    def add(self, provider: CacheMiss, predicted: CacheMiss) -> None:
        if provider.reason in _NO_ANSWER and predicted.reason != provider.reason:
            return  # the provider said nothing about this request
        self.compared += 1
        self.misses += provider.reason != "none"
        if provider.reason == predicted.reason:
            self.agreed += 1
            if provider.missed_tokens:
                self.errors.append(abs(predicted.missed_tokens - provider.missed_tokens) / provider.missed_tokens)
        else:
            self.disagreements.append(f"{provider.reason} vs {predicted.reason}")


def _coding(target: str, quick: bool) -> Iterator[tuple[float, _Body]]:
    script = session_script(
        turns=12 if quick else 40, idle_gap_turn=8 if quick else None, edit_turn=6 if quick else None
    )
    for call in scripted_session(script, cache_prices=PRICES[target]):
        yield (
            call.t_start,
            dict(render(call.turn, PLACEMENTS[target], continuation=call.engine.continuation(call.turn))),
        )


def _changes(target: str) -> Iterator[tuple[float, _Body]]:
    """Ten requests: appends between a change of each kind, and one idle gap past the TTL."""
    anthropic = target == "anthropic"
    tools: list[_Body] = [_tool("Read", anthropic)]
    system, model, setting = _RULES, PLACEMENTS[target].model, None
    texts = ["Start the work."]
    t = 0.0
    steps: list[tuple[str, float]] = [
        ("append", 30), ("append", 30), ("tools", 30), ("append", 30), ("system", 30),
        ("append", 420), ("model", 30), ("rewrite", 30), ("setting", 30), ("append", 30),
    ]  # fmt: skip
    for step, gap in steps:
        t += gap
        if step == "tools":
            tools = [*tools, _tool("Grep", anthropic)]
        elif step == "system":
            system = _RULES + "\nRule 160: say what you changed."
        elif step == "model":
            model = "claude-opus-5" if anthropic else "gpt-5.5"
        elif step == "rewrite":
            texts[1] = "An answer written again."
        elif step == "setting":
            setting = {"type": "enabled", "budget_tokens": 1024} if anthropic else {"effort": "high"}
        texts += [f"Answer {len(texts)}.", f"Question {len(texts)}."]
        yield t, _body(target, model, tools, system, texts, setting)


def _tool(name: str, anthropic: bool) -> _Body:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    if anthropic:
        return {"name": name, "description": f"{name} a file.", "input_schema": schema}
    return {"type": "function", "name": name, "description": f"{name} a file.", "parameters": schema}


def _body(target: str, model: str, tools: list[_Body], system: str, texts: list[str], setting: object) -> _Body:
    roles = ["user" if i % 2 == 0 else "assistant" for i in range(len(texts))]
    if target == "anthropic":
        pairs = zip(roles, texts, strict=True)
        messages: list[_Body] = [{"role": r, "content": [{"type": "text", "text": x}]} for r, x in pairs]
        messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
        body: _Body = {
            "model": model,
            "max_tokens": 2048,
            "tools": tools,
            "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
            "messages": messages,
        }
        return body if setting is None else {**body, "thinking": setting}
    items = [{"role": r, "content": x} for r, x in zip(roles, texts, strict=True)]
    body = {"model": model, "tools": tools, "instructions": system, "input": items, "store": False}
    return body if setting is None else {**body, "reasoning": setting}


async def _session(
    wire: WireServer, clock: ManualClock, provider: Provider, target: str, requests: Sequence[tuple[float, _Body]]
) -> _Tally:
    fmt = "anthropic" if target == "anthropic" else "openai"
    predictor, tally = CacheMissPredictor(fmt), _Tally()
    previous: Completed | None = None
    for t, body in requests:
        clock.now = t
        wire.script(Reply(text="ok"))
        sent = ask_cache_diagnostics(_rendered(body), provider.target, previous.response_id if previous else None)
        done = [e async for e in provider.stream(sent) if isinstance(e, Completed)][-1]
        _, predicted = predictor.submit(TimedRequest(t, body))
        if previous is not None and predicted is not None and done.cache_miss is not None:
            before = previous.usage
            held = cache_held(
                fmt,
                read=before.cache_read,
                write=before.cache_write,
                total=before.input + before.cache_read + before.cache_write,
            )
            tally.add(settle_miss(done.cache_miss, held=held, read=done.usage.cache_read), predicted)
        previous = done
    return tally


def _rendered(body: _Body) -> RenderedRequest:
    return json.loads(json.dumps(body))  # type: ignore[no-any-return]


def _provider(wire: WireServer, target: str) -> Provider:
    from lamina.providers import AnthropicProvider, OpenAIResponsesProvider

    if target == "anthropic":
        return AnthropicProvider("claude-sonnet-5", api_key="bench", base_url=wire.url, capabilities=_DIAGNOSED)
    return OpenAIResponsesProvider("gpt-5", api_key="bench", base_url=wire.openai_url, capabilities=_DIAGNOSED)


async def _measure(scenario: str, target: str, quick: bool) -> _Tally:
    requests = list(_coding(target, quick) if scenario == "coding" else _changes(target))
    clock = ManualClock(requests[0][0])
    with WireServer(clock=clock) as wire:
        provider = _provider(wire, target)
        try:
            return await _session(wire, clock, provider, target, requests)
        finally:
            await provider.aclose()  # type: ignore[attr-defined]


def run(*, quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    figures: list[Figure] = []
    pooled = _Tally()
    for scenario in ("coding", "changes"):
        for target in TARGETS:
            progress(f"{scenario} on {target}")
            tally = asyncio.run(_measure(scenario, target, quick))
            pooled.compared += tally.compared
            pooled.agreed += tally.agreed
            note = "; ".join(sorted(set(tally.disagreements)))
            error = sum(tally.errors) / len(tally.errors) if tally.errors else 0.0
            for name, value, unit, why in (
                ("agreement", tally.agreed / tally.compared if tally.compared else 1.0, "share", note),
                ("compared_calls", tally.compared, "calls", ""),
                ("provider_misses", tally.misses, "calls", ""),
                ("missed_tokens_error", round(error, 4), "share", ""),
            ):
                figures.append(
                    Figure(f"{name}_{scenario}_{target}", value, unit, note=why, scenario=scenario, target=target)
                )
    share = pooled.agreed / pooled.compared if pooled.compared else 1.0
    figures.append(Figure("agreement_all", share, "share", note=f"{pooled.agreed} of {pooled.compared} calls"))
    # the same walk the prediction makes, on the first change of the `changes` scenario: a check of the setup
    bodies = [b for _, b in _changes("anthropic")]
    first = find_divergence(bodies[1], bodies[2], fmt="anthropic")
    assert first is not None and first.reason == "tools_changed", first
    return figures
