"""`python -m benchmarks cache`: cache efficiency and input cost of placements on a 40-turn session.

The same scripted coding session (`benchmarks._scenario.session_script`: 119 model calls with
tool loops, time advancing every turn, three mode changes, sources toggled, AGENTS.md edited at
turn 20, one idle gap of 9 minutes at turn 30; 12 turns with `--quick`), run by a context engine
as a default session runs (the default preset's prompt, the built-in tools, Read's numbered lines),
is rendered seven ways and billed by the cache simulator (the Anthropic ways from a run whose cost
model decides with Anthropic's prices, the OpenAI ones from a run deciding with OpenAI's):

- `anthropic_lamina`: our Anthropic placement;
- `anthropic_system_appended`: the volatile parts appended to the system prompt every turn, as one
  of Craft's backends does (same breakpoints as ours);
- `anthropic_no_breakpoints`: our layout with no `cache_control` at all;
- `anthropic_rebuild_on_edit`: ours, but with the prefix rewritten when AGENTS.md changes (what
  Lamina did before a stable change went to the tail once);
- `anthropic_rolling_only`: ours with the turn breakpoint at 5 minutes like the rolling one (what
  Lamina did before the turn breakpoint took a 1-hour TTL);
- `openai_lamina`: our OpenAI Chat Completions placement under OpenAI's automatic caching;
- `openai_responses_lamina`: our OpenAI Responses placement, the same way;
- `openai_responses_gpt56_lamina`: our Responses placement for a GPT-5.6 model (explicit
  breakpoints, `prompt_cache_options`, the TTL priced per turn) under OpenAI's breakpoint regime,
  writes billed at 1.25x (30 minutes) and an assumed 2x (12 hours), from a run deciding with those
  prices; `billed_input_openai_gpt56_vs_automatic_ratio` sets its bill beside the automatic one's.

What a mid-session change costs (`change_cost_fraction_<target>_<change>`, target `anthropic` or
`openai` (Responses), change `agents_md_edit` or `date_change`): the extra input billed because of
the change, as a fraction of the session's bill: the session is billed again without the change
(AGENTS.md never edited; the whole session twelve hours earlier, so the date never changes) and
the difference is divided by the session's bill. Each peer's `peer_<peer>_change_cost_fraction_
agents_md_edit` is the same for the peer (run again without the edit; not with `--quick`; the
peers read the machine's clock, so their date does not change).

The peer, Claude Code (the CLI bundled in the claude-agent-sdk wheel, see `benchmarks._claude_code`),
runs the same turns for real against a local server that plays the model with the same answers;
its captured requests are billed by the same simulator on the same clock (`peer_claude_code_*`,
and `billed_input_vs_claude_code_ratio` = input billed at base price, ours / Claude Code's). It is
skipped, with the reason printed, when the `claude` extra is not installed.

Cache efficiency = tokens read from cache / tokens already sent in an earlier request that could
still have been read. Relative input cost = billed input / input billed with no caching.

A second scenario, `revisits` (`benchmarks._revisit`: 64 turns over 16 files of 5 to 30 KB, 25 of
them needing an earlier file again, the scripted model reading it again only when its content is
no longer in the request it receives; idle gaps of 10 and 70 minutes, a mode change, an AGENTS.md
edit, a date change), runs Lamina (pruned by default and never pruned) and the three peers through
the same machinery. Both scenarios (`coding`, `revisits`) end in the same goal figures per target
(`anthropic`, `responses`), named `<figure>_<scenario>_<target>` (`benchmarks._billing.goal_figures`):
`billed_input_vs_{pi,claude_code,codex}_ratio` (each peer on its own format),
`default_vs_unpruned_ratio`, `efficiency` and `floor_ratio` (the bill over each needed token
written once); the second scenario's bill is split by cause (`bill_revisits_<policy>_<target>_*`).

Both scenarios run again with the model reasoning (`benchmarks._reasoning`): Anthropic thinking
(adaptive, interleaved) and Responses reasoning (encrypted items sent back), through our providers
and the wire server: `thinking_requests_refused_<scenario>_<target>` (must be 0), the bill beside
the same run without reasoning, and beside pi and Codex with reasoning on (not with `--quick`).
With `--context-editing`, both scenarios run on Anthropic with the provider's context editing
`server` and `priced` against `off` (`benchmarks._context_editing`):
`billed_input_context_editing_<mode>_vs_off_ratio_<scenario>`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from benchmarks import Figure, ratio
from benchmarks._billing import (
    ANTHROPIC,
    FIRST_BYTE_S,
    PRICES,
    RESPONSES,
    PeerRunner,
    goal_figures,
    our_run,
    peer_bill,
)
from benchmarks._claude_code import run_claude_code
from benchmarks._context_editing import context_editing_figures
from benchmarks._mcp_tools import deferred_tool_figures
from benchmarks._peers import PeerUnavailable, run_codex, run_pi
from benchmarks._reasoning import reasoning_figures
from benchmarks._revisit import QUICK, RevisitShape, revisit_figures, revisit_script
from benchmarks._scenario import AGENTS_MD, DEFAULT_START, ModelCall, ScriptedTurn, scripted_session, session_script
from benchmarks._server_backend import server_compaction_figures
from lamina.cachesim import (
    AnthropicCacheSimulator,
    CacheSimulator,
    CacheSummary,
    CacheUsage,
    OpenAIBreakpointSimulator,
    OpenAICacheSimulator,
    TimedRequest,
    summarise,
)
from lamina.compaction import DEFAULT_PRUNE, PrunePolicy
from lamina.context import Part, ToolSpec, turn_tails
from lamina.placement import AnthropicTarget, OpenAIChatTarget, OpenAIResponsesTarget, render
from lamina.pricing import CachePrices
from lamina.reports import KINDS, SessionComposition, compose_turn
from lamina.tokens import DEFAULT_ESTIMATOR
from lamina.workspace import Skill, SkillScan, skill_catalogue_part

OPENAI = OpenAIChatTarget(model="gpt-5")
RESPONSES_GPT56 = OpenAIResponsesTarget(model="gpt-5.6", cache_breakpoints=True)
"""A model of OpenAI's breakpoint regime, as a provider whose capabilities say so builds its target."""
ROLLING_ONLY = AnthropicTarget(model="claude-sonnet-5", turn_ttl="5m")


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


def _rebuilt_on_edit(body: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """Our layout as it was before stable changes went to the tail: the prefix rewritten with the edited AGENTS.md."""

    def swap(block: dict[str, Any]) -> dict[str, Any]:
        text = block.get("text")
        return {**block, "text": text.replace(old, new)} if isinstance(text, str) and old in text else block

    messages = list(body["messages"])
    if messages and isinstance(messages[0]["content"], list):  # project files may open the first user message
        messages[0] = {**messages[0], "content": [swap(b) for b in messages[0]["content"]]}
    return {**body, "system": [swap(b) for b in body["system"]], "messages": messages}


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
    return catalogue, tools, {5: guide, 22: guide, 41: guide}  # turn numbers of a 60-turn session; rescaled


def _simulate(calls: Iterable[ModelCall]) -> tuple[list[CacheUsage], int, str]:
    simulator = AnthropicCacheSimulator()
    usages: list[CacheUsage] = []
    prefix_tokens, system_text = 0, ""
    for call in calls:
        body = dict(render(call.turn, ANTHROPIC, continuation=call.engine.continuation(call.turn)))
        usages.append(simulator.submit(TimedRequest(call.t_start, body, call.t_start + FIRST_BYTE_S)))
        system_text = json.dumps(body["system"])
        prefix_tokens = DEFAULT_ESTIMATOR.count(json.dumps([body.get("tools"), body["system"]]))
    return usages, prefix_tokens, system_text


def _edit_turn(script: Sequence[ScriptedTurn]) -> int:
    return next(t.index for t in script if t.agents_md is not None)


def _peer_figures(
    script: Sequence[ScriptedTurn],
    ours: list[CacheUsage],
    our_turns: list[int],
    progress: Callable[[str], None],
    *,
    quick: bool,
) -> tuple[list[Figure], CacheSummary | None]:
    """Claude Code through the same script, billed by the same simulator; our figures with ratios against it."""
    lamina = summarise(ours)
    edit = _edit_turn(script)
    our_edit_writes = sum(u.write for u, turn in zip(ours, our_turns, strict=True) if turn == edit)
    plain = [
        Figure("cache_efficiency_anthropic_lamina", round(lamina.cache_efficiency, 4), "ratio"),
        Figure("relative_input_cost_anthropic_lamina", round(lamina.relative_input_cost, 4), "ratio"),
    ]
    try:
        peer = run_claude_code(script, progress=progress)
    except PeerUnavailable as exc:
        print(f"cache: Claude Code peer skipped: {exc}", file=sys.stderr)
        return plain, None
    theirs = peer_bill(peer, AnthropicCacheSimulator())
    claude = summarise(theirs)
    their_edit_writes = sum(u.write for u, r in zip(theirs, peer.requests, strict=True) if r.turn == edit)
    side = sum(1 for r in peer.requests if not r.main)
    edit_cost = (
        []
        if quick
        else _peer_edit_cost(
            "Claude Code",
            "claude_code",
            run_claude_code,
            AnthropicCacheSimulator,
            script,
            claude.weighted_tokens,
            progress,
        )
    )
    return [
        *edit_cost,
        Figure(
            "cache_efficiency_anthropic_lamina",
            round(lamina.cache_efficiency, 4),
            "ratio",
            ratio(lamina.cache_efficiency, claude.cache_efficiency, "peer_claude_code_cache_efficiency"),
        ),
        Figure("peer_claude_code_cache_efficiency", round(claude.cache_efficiency, 4), "ratio", note=peer.version),
        Figure(
            "relative_input_cost_anthropic_lamina",
            round(lamina.relative_input_cost, 4),
            "ratio",
            ratio(lamina.relative_input_cost, claude.relative_input_cost, "peer_claude_code_relative_input_cost"),
        ),
        Figure("peer_claude_code_relative_input_cost", round(claude.relative_input_cost, 4), "ratio"),
        Figure(
            "billed_input_vs_claude_code_ratio",
            round(lamina.weighted_tokens / claude.weighted_tokens, 4),
            "ratio",
            note="input billed at base price, ours / Claude Code's, same session",
        ),
        Figure("billed_input_tokens_anthropic_lamina", round(lamina.weighted_tokens), "tokens"),
        Figure("peer_claude_code_billed_input_tokens", round(claude.weighted_tokens), "tokens"),
        Figure("edit_turn_cache_write_tokens_anthropic_lamina", our_edit_writes, "tokens"),
        Figure("peer_claude_code_edit_turn_cache_write_tokens", their_edit_writes, "tokens"),
        Figure("peer_claude_code_requests", len(theirs), "requests", note=f"{side} side requests"),
    ], claude


_HALF_DAY: Final = 12 * 3600.0


def _peer_edit_cost(
    label: str,
    slug: str,
    runner: PeerRunner,
    simulator: Callable[[], CacheSimulator],
    script: Sequence[ScriptedTurn],
    bill: float,
    progress: Callable[[str], None],
) -> list[Figure]:
    """What the AGENTS.md edit cost the peer: the same session without the edit, billed again."""
    progress(f"{label} again without the AGENTS.md edit")
    unchanged = tuple(replace(t, agents_md=None) for t in script)
    without = summarise(peer_bill(runner(unchanged, progress=progress), simulator())).weighted_tokens
    return [
        Figure(
            f"peer_{slug}_change_cost_fraction_agents_md_edit",
            round((bill - without) / bill, 4),
            "ratio",
            note=f"{bill - without:+,.0f} of {bill:,.0f} billed tokens",
        )
    ]


def _other_peer(
    label: str,
    slug: str,
    runner: PeerRunner,
    simulator: Callable[[], CacheSimulator],
    script: Sequence[ScriptedTurn],
    ours: list[CacheUsage],
    our_name: str,
    progress: Callable[[str], None],
    *,
    quick: bool,
) -> tuple[list[Figure], CacheSummary | None]:
    """A peer (pi, Codex CLI) through the same script, billed by the simulator of its wire format, beside us."""
    try:
        peer = runner(script, progress=progress)
    except PeerUnavailable as exc:
        print(f"cache: {label} peer skipped: {exc}", file=sys.stderr)
        return [], None
    theirs = peer_bill(peer, simulator())
    summary, lamina = summarise(theirs), summarise(ours)
    side = sum(1 for r in peer.requests if not r.main)
    name = f"peer_{slug}"
    edit = [] if quick else _peer_edit_cost(label, slug, runner, simulator, script, summary.weighted_tokens, progress)
    return [
        *edit,
        Figure(
            f"billed_input_vs_{slug}_ratio",
            round(lamina.weighted_tokens / summary.weighted_tokens, 4),
            "ratio",
            note=f"input billed at base price, ours ({our_name}) / {label}'s, same session",
        ),
        Figure(f"{name}_billed_input_tokens", round(summary.weighted_tokens), "tokens", note=peer.version),
        Figure(
            f"{name}_cache_efficiency",
            round(summary.cache_efficiency, 4),
            "ratio",
            ratio(summary.cache_efficiency, lamina.cache_efficiency, f"cache_efficiency_{our_name}"),
        ),
        Figure(
            f"{name}_relative_input_cost",
            round(summary.relative_input_cost, 4),
            "ratio",
            ratio(summary.relative_input_cost, lamina.relative_input_cost, f"relative_input_cost_{our_name}"),
        ),
        Figure(f"{name}_tokens_per_request_mean", round(summary.total / len(theirs)), "tokens", note="as billed"),
        Figure(f"{name}_first_request_tokens", theirs[0].total if theirs else 0, "tokens", note="as billed"),
        Figure(f"{name}_requests", len(theirs), "requests", note=f"{side} side requests"),
    ], summary


def _gpt56_figures(new: CacheSummary, automatic: CacheSummary) -> list[Figure]:
    """Our Responses placement on a GPT-5.6 model under the breakpoint regime, beside the automatic regime's bill."""
    name = "openai_responses_gpt56_lamina"
    return [
        Figure(f"billed_input_tokens_{name}", round(new.weighted_tokens), "tokens"),
        Figure(f"cache_writes_30m_{name}", new.write_30m, "tokens", note="billed at 1.25x"),
        Figure(f"cache_writes_12h_{name}", new.write_12h, "tokens", note="billed at 2x (assumed: not published)"),
        Figure(
            "billed_input_openai_gpt56_vs_automatic_ratio",
            round(new.weighted_tokens / automatic.weighted_tokens, 4) if automatic.weighted_tokens else 0.0,
            "ratio",
            note="breakpoint regime (GPT-5.6) / automatic regime (gpt-5), same session",
        ),
    ]


def _submit(
    simulators: dict[str, CacheSimulator],
    usages: dict[str, list[CacheUsage]],
    call: ModelCall,
    bodies: dict[str, dict[str, Any]],
) -> None:
    """Bill each way's request body of `call` on its own simulator."""
    for name, body in bodies.items():
        usages[name].append(simulators[name].submit(TimedRequest(call.t_start, body, call.t_start + FIRST_BYTE_S)))


def _bills(script: Sequence[ScriptedTurn], prune: PrunePolicy | None = DEFAULT_PRUNE) -> dict[str, CacheSummary]:
    """What `script` costs on our Anthropic and OpenAI Responses (`openai`) placements, old output pruned by `prune`."""
    run = our_run(script, prune)
    return {"anthropic": run.summary("anthropic"), "openai": run.summary("responses")}


def _composition_figures(composition: SessionComposition, *, top: int = 5) -> list[Figure]:
    """Tokens per request (mean and first) and where they go: per kind, and the largest components."""
    figures = [
        Figure("tokens_per_request_mean", round(composition.mean_request_tokens), "tokens", note="text estimate"),
        Figure("first_request_tokens", composition.first_request_tokens, "tokens"),
    ]
    per_request = composition.by_kind()
    for kind in KINDS:
        name = kind.replace(" ", "_").replace("-", "_")
        figures.append(
            Figure(f"composition_{name}_tokens_per_request", round(per_request[kind] / composition.requests), "tokens")
        )
    for i, c in enumerate(composition.top(top), 1):
        figures.append(
            Figure(
                f"composition_top_{i}_tokens_per_request",
                round(c.tokens / composition.requests),
                "tokens",
                note=f"{c.kind}: {c.name}",
            )
        )
    return figures


def run(
    *,
    quick: bool,
    progress: Callable[[str], None],
    deferred_tools: bool = False,
    context_editing: bool = False,
    server_compaction: bool = False,
) -> list[Figure]:
    script = session_script(turns=12 if quick else 40)
    simulators: dict[str, CacheSimulator] = {
        "anthropic_lamina": AnthropicCacheSimulator(),
        "anthropic_system_appended": AnthropicCacheSimulator(),
        "anthropic_no_breakpoints": AnthropicCacheSimulator(),
        "anthropic_rebuild_on_edit": AnthropicCacheSimulator(),
        "anthropic_rolling_only": AnthropicCacheSimulator(),
        "openai_lamina": OpenAICacheSimulator(),
        "openai_responses_lamina": OpenAICacheSimulator(),
        "openai_responses_gpt56_lamina": OpenAIBreakpointSimulator(),
    }
    edit = _edit_turn(script)
    edited = next(t.agents_md for t in script if t.agents_md is not None)
    assert edited is not None
    usages: dict[str, list[CacheUsage]] = {name: [] for name in simulators}
    our_turns: list[int] = []
    composition = SessionComposition()
    progress(f"rendering and simulating a {len(script)}-turn session seven ways")
    for call in scripted_session(script):  # the Anthropic placements: the cost model decides with Anthropic's prices
        continuation = call.engine.continuation(call.turn)
        composition.add(compose_turn(call.turn, continuation))
        ours = dict(render(call.turn, ANTHROPIC, continuation=continuation))
        tails = set(turn_tails([*call.turn.history, *continuation]).values()) | {call.turn.tail}
        full_volatile = "\n".join(p.text for p in call.turn.volatile)
        bodies = {
            "anthropic_lamina": ours,
            "anthropic_system_appended": _system_appended(ours, tails, full_volatile or "(no change)"),
            "anthropic_no_breakpoints": _strip_markers(ours),
            "anthropic_rebuild_on_edit": _rebuilt_on_edit(ours, AGENTS_MD, edited) if call.turn_index >= edit else ours,
            "anthropic_rolling_only": dict(render(call.turn, ROLLING_ONLY, continuation=continuation)),
        }
        _submit(simulators, usages, call, bodies)
        our_turns.append(call.turn_index)
    for call in scripted_session(script, cache_prices=PRICES["responses"]):  # the OpenAI ones, with OpenAI's
        continuation = call.engine.continuation(call.turn)
        bodies = {
            "openai_lamina": dict(render(call.turn, OPENAI, continuation=continuation)),
            "openai_responses_lamina": dict(render(call.turn, RESPONSES, continuation=continuation)),
        }
        _submit(simulators, usages, call, bodies)
    for call in scripted_session(script, cache_prices=CachePrices.for_target(RESPONSES_GPT56)):  # GPT-5.6's prices
        body = dict(render(call.turn, RESPONSES_GPT56, continuation=call.engine.continuation(call.turn)))
        _submit(simulators, usages, call, {"openai_responses_gpt56_lamina": body})

    progress(f"Claude Code through the same {len(script)} turns")
    figures, claude = _peer_figures(script, usages["anthropic_lamina"], our_turns, progress, quick=quick)
    for name in simulators:
        if name != "anthropic_lamina":
            figures.append(
                Figure(f"cache_efficiency_{name}", round(summarise(usages[name]).cache_efficiency, 4), "ratio")
            )
    for name in simulators:
        if name != "anthropic_lamina":
            summary = summarise(usages[name])
            figures.append(Figure(f"relative_input_cost_{name}", round(summary.relative_input_cost, 4), "ratio"))
    figures.append(Figure("requests_simulated", len(our_turns), "requests"))
    responses = summarise(usages["openai_responses_lamina"])
    figures.append(Figure("billed_input_tokens_openai_responses_lamina", round(responses.weighted_tokens), "tokens"))
    figures += _gpt56_figures(summarise(usages["openai_responses_gpt56_lamina"]), responses)
    rolling_only = summarise(usages["anthropic_rolling_only"]).weighted_tokens
    figures.append(Figure("billed_input_tokens_anthropic_rolling_only", round(rolling_only), "tokens"))
    for name, target in (("anthropic_lamina", "anthropic"), ("openai_responses_lamina", "openai_responses")):
        mean = summarise(usages[name]).total / len(usages[name])
        figures.append(Figure(f"tokens_per_request_mean_{target}_lamina", round(mean), "tokens", note="as billed"))
        figures.append(
            Figure(f"first_request_tokens_{target}_lamina", usages[name][0].total, "tokens", note="as billed")
        )
    progress(f"pi through the same {len(script)} turns")
    pi_figures, pi = _other_peer(
        "pi",
        "pi",
        run_pi,
        AnthropicCacheSimulator,
        script,
        usages["anthropic_lamina"],
        "anthropic_lamina",
        progress,
        quick=quick,
    )
    figures += pi_figures
    progress(f"Codex CLI through the same {len(script)} turns")
    codex_figures, codex = _other_peer(
        "Codex CLI",
        "codex",
        run_codex,
        OpenAICacheSimulator,
        script,
        usages["openai_responses_lamina"],
        "openai_responses_lamina",
        progress,
        quick=quick,
    )
    figures += codex_figures
    figures += _composition_figures(composition)
    progress("the same session without the AGENTS.md edit, and twelve hours earlier (no date change)")
    bills = {"anthropic": summarise(usages["anthropic_lamina"]).weighted_tokens, "openai": responses.weighted_tokens}
    counterfactuals = {
        "agents_md_edit": tuple(replace(t, agents_md=None) for t in script),
        "date_change": session_script(turns=len(script), start=DEFAULT_START - _HALF_DAY),
    }
    for change, unchanged in counterfactuals.items():
        without = _bills(unchanged)
        for target, bill in bills.items():
            extra = bill - without[target].weighted_tokens
            figures.append(
                Figure(
                    f"change_cost_fraction_{target}_{change}",
                    round(extra / bill, 4),
                    "ratio",
                    note=f"{extra:+,.0f} of {bill:,.0f} billed tokens",
                )
            )
    progress("the same session with old tool output never pruned")
    never = our_run(script, prune=None)
    unpruned = {"anthropic": never.summary("anthropic"), "openai": never.summary("responses")}
    peers = {slug: bill for slug, bill in (("claude_code", claude), ("pi", pi), ("codex", codex)) if bill is not None}
    for target, billed in (("anthropic", summarise(usages["anthropic_lamina"])), ("responses", responses)):
        figures += goal_figures("coding", target, billed, never.summary(target), never.floor(target), peers)
    for target, name in (("anthropic", "anthropic"), ("openai", "openai_responses")):
        figures += [
            Figure(f"billed_input_tokens_{name}_unpruned", round(unpruned[target].weighted_tokens), "tokens"),
            Figure(f"cache_efficiency_{name}_unpruned", round(unpruned[target].cache_efficiency, 4), "ratio"),
            Figure(
                f"prune_saving_fraction_{name}",
                round(1 - bills[target] / unpruned[target].weighted_tokens, 4),
                "ratio",
                note="the bill pruning saves (DEFAULT_PRUNE)",
            ),
        ]

    progress("the same session with 100 skills and 20 sources, reading three guides")
    catalogue, source_tools, guides = _skills_and_sources()
    plain_prefix = DEFAULT_ESTIMATOR.count(json.dumps([ours.get("tools"), ours["system"]]))
    guide_turns = {round(len(script) * f): text for f, text in zip((0.08, 0.37, 0.68), guides.values(), strict=True)}
    rich, rich_prefix, system = _simulate(
        scripted_session(
            session_script(turns=len(script), guide_reads=guide_turns),
            extra_parts=(catalogue,),
            extra_tools=source_tools,
        )
    )
    assert "Endpoints, pagination" not in system  # guides are never in the stable prefix
    figures += [
        Figure("cache_efficiency_anthropic_lamina_skills", round(summarise(rich).cache_efficiency, 4), "ratio"),
        Figure("relative_input_cost_anthropic_lamina_skills", round(summarise(rich).relative_input_cost, 4), "ratio"),
        Figure("stable_prefix_tokens_lamina", plain_prefix, "tokens"),
        Figure("stable_prefix_tokens_lamina_skills", rich_prefix, "tokens", note="catalogue + 40 source tools"),
        Figure("skill_catalogue_tokens", DEFAULT_ESTIMATOR.count(catalogue.text), "tokens", note="100 skills"),
    ]
    figures += revisit_figures(quick=quick, progress=progress)
    figures += reasoning_figures("coding", script, progress=progress, peers=not quick)
    revisits = revisit_script(QUICK if quick else RevisitShape())
    figures += reasoning_figures("revisits", revisits, progress=progress, peers=not quick)
    if context_editing:
        scenarios = {"coding": script, "revisits": revisits}
        figures += context_editing_figures(scenarios, progress=progress)
    if server_compaction:
        figures += server_compaction_figures(script, progress=progress)
    return figures + (deferred_tool_figures(quick=quick, progress=progress) if deferred_tools else [])
