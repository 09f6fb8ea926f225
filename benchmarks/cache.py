"""`python -m benchmarks cache`: cache efficiency and input cost of placements on a 60-turn session.

The same scripted coding session (tool loops, time advancing every turn, three mode changes,
sources toggled, AGENTS.md edited at turn 30, one idle gap of 9 minutes) is rendered four ways and
billed by the cache simulator:

- `anthropic_lamina`: our Anthropic placement;
- `anthropic_system_appended`: the volatile parts appended to the system prompt every turn, as one
  of Craft's backends does (same breakpoints as ours);
- `anthropic_no_breakpoints`: our layout with no `cache_control` at all;
- `openai_lamina`: our OpenAI Chat Completions placement under OpenAI's automatic caching.

Cache efficiency = tokens read from cache / tokens already sent in an earlier request that could
still have been read. Relative input cost = billed input / input billed with no caching.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from benchmarks import Figure
from benchmarks._scenario import ModelCall, scripted_session
from lamina.messages import turn_tails
from lamina.parts import Part
from lamina.placement import AnthropicTarget, OpenAIChatTarget, render
from lamina.placement.cache_sim import (
    AnthropicCacheSimulator,
    CacheSimulator,
    OpenAICacheSimulator,
    TimedRequest,
    summarise,
)
from lamina.tokens import DEFAULT_ESTIMATOR
from lamina.turn import ToolSpec
from lamina.workspace.skills import Skill, SkillScan, skill_catalogue_part

ANTHROPIC = AnthropicTarget(model="claude-sonnet-5")
OPENAI = OpenAIChatTarget(model="gpt-5")


def _unmarked(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"} if "cache_control" in block else block


def _strip_markers(body: dict[str, Any]) -> dict[str, Any]:
    """Our layout with every `cache_control` removed (copies only what changes)."""
    messages = [{**m, "content": [_unmarked(b) for b in m["content"]]} for m in body["messages"]]
    return {**body, "system": [_unmarked(b) for b in body["system"]], "messages": messages}


def _system_appended(body: dict[str, Any], tails: set[str], current_volatile: str) -> dict[str, Any]:
    """Craft's placement: no tails in the messages; this turn's volatile text appended to the system prompt."""
    messages = []
    for message in body["messages"]:
        kept = [b for b in message["content"] if not (b.get("type") == "text" and b.get("text") in tails)]
        if not kept:
            kept = [{"type": "text", "text": "(context)"}]
        if any("cache_control" in b for b in message["content"]) and "cache_control" not in kept[-1]:
            kept[-1] = {**kept[-1], "cache_control": {"type": "ephemeral", "ttl": "5m"}}
        messages.append({**message, "content": kept})
    system = [_unmarked(b) for b in body["system"]]
    system.append({"type": "text", "text": current_volatile, "cache_control": body["system"][-1]["cache_control"]})
    return {**body, "system": system, "messages": messages}


def _skills_and_sources() -> tuple[Part, tuple[ToolSpec, ...], dict[int, str]]:
    """A catalogue of 100 skills, 20 sources with two tools each, and guides read at three turns."""
    skills = tuple(
        Skill(
            name=f"skill-{i:03d}",
            description=f"How to handle task family {i}: steps, checks and the commands to run. " * 2,
            path=Path(f"/ws/.lamina/skills/skill-{i:03d}/SKILL.md"),
        )
        for i in range(100)
    )
    catalogue = skill_catalogue_part(SkillScan(skills=skills))
    assert catalogue is not None
    schema = {"type": "object", "properties": {"query": {"type": "string"}}}
    tools = tuple(
        ToolSpec(
            f"src{i:02d}__{verb}",
            f"{verb.title()} records of source {i}. Read sources/src{i:02d}/guide.md first.",
            schema,
        )
        for i in range(20)
        for verb in ("search", "get")
    )
    guide = "# Guide\nEndpoints, pagination, rate limits and examples.\n" * 120
    return catalogue, tools, {5: guide, 22: guide, 41: guide}


def _simulate(calls: Iterable[ModelCall]) -> tuple[list[Any], int, str]:
    simulator = AnthropicCacheSimulator()
    usages: list[Any] = []
    prefix_tokens, system_text = 0, ""
    for call in calls:
        body = dict(render(call.turn, ANTHROPIC, continuation=call.engine.continuation(call.turn)))
        usages.append(simulator.submit(TimedRequest(call.t_start, body, call.t_start + 2.0)))
        system_text = json.dumps(body["system"])
        prefix_tokens = DEFAULT_ESTIMATOR.count(json.dumps([body.get("tools"), body["system"]]))
    return usages, prefix_tokens, system_text


def run(*, quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    simulators: dict[str, CacheSimulator] = {
        "anthropic_lamina": AnthropicCacheSimulator(),
        "anthropic_system_appended": AnthropicCacheSimulator(),
        "anthropic_no_breakpoints": AnthropicCacheSimulator(),
        "openai_lamina": OpenAICacheSimulator(),
    }
    usages: dict[str, list[Any]] = {name: [] for name in simulators}
    progress("rendering and simulating a 60-turn session four ways")
    for call in scripted_session():
        continuation = call.engine.continuation(call.turn)
        ours = dict(render(call.turn, ANTHROPIC, continuation=continuation))
        tails = set(turn_tails([*call.turn.history, *continuation]).values()) | {call.turn.tail}
        full_volatile = "\n".join(p.text for p in call.turn.volatile)
        bodies = {
            "anthropic_lamina": ours,
            "anthropic_system_appended": _system_appended(ours, tails, full_volatile or "(no change)"),
            "anthropic_no_breakpoints": _strip_markers(ours),
            "openai_lamina": dict(render(call.turn, OPENAI, continuation=continuation)),
        }
        for name, body in bodies.items():
            usages[name].append(simulators[name].submit(TimedRequest(call.t_start, body, call.t_start + 2.0)))
    figures: list[Figure] = []
    for name in simulators:
        summary = summarise(usages[name])
        figures.append(Figure(f"cache_efficiency_{name}", round(summary.cache_efficiency, 4), "ratio"))
    for name in simulators:
        summary = summarise(usages[name])
        figures.append(Figure(f"relative_input_cost_{name}", round(summary.relative_input_cost, 4), "ratio"))
    requests = summarise(usages["anthropic_lamina"]).requests
    figures.append(Figure("requests_simulated", requests, "requests"))

    progress("the same session with 100 skills and 20 sources, reading three guides")
    catalogue, source_tools, guides = _skills_and_sources()
    plain_prefix = DEFAULT_ESTIMATOR.count(json.dumps([ours.get("tools"), ours["system"]]))
    rich, rich_prefix, system = _simulate(
        scripted_session(extra_parts=(catalogue,), extra_tools=source_tools, guide_reads=guides)
    )
    assert "Endpoints, pagination" not in system  # guides are never in the stable prefix
    figures += [
        Figure("cache_efficiency_anthropic_lamina_skills", round(summarise(rich).cache_efficiency, 4), "ratio"),
        Figure("relative_input_cost_anthropic_lamina_skills", round(summarise(rich).relative_input_cost, 4), "ratio"),
        Figure("stable_prefix_tokens_lamina", plain_prefix, "tokens"),
        Figure("stable_prefix_tokens_lamina_skills", rich_prefix, "tokens", note="catalogue + 40 source tools"),
        Figure("skill_catalogue_tokens", DEFAULT_ESTIMATOR.count(catalogue.text), "tokens", note="100 skills"),
    ]
    return figures
