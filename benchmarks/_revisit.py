"""The cache benchmark's second scenario: a long session that needs old files again.

64 turns (12 with `--quick`) over 16 files of 5 to 30 KB, each read once when it comes up, and
25 later turns that need one of them again (`ModelStep.needs`): the scripted model reads it again
only when its content is no longer in the request it receives (`ScriptedModel`), so each harness
pays for what its own context left out. Small helper files are read on the other turns. Idle gaps
of 10 and 70 minutes (one under and one over an hour), a mode change, an AGENTS.md edit and a date
change (the session starts at 23:38 in Berlin) on the simulated clock.
"""

from __future__ import annotations

import hashlib
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from benchmarks import Figure
from benchmarks._billing import TARGETS, PeerRunner, bill_breakdown, goal_figures, our_run, peer_bill, simulator_for
from benchmarks._claude_code import run_claude_code
from benchmarks._peers import PeerUnavailable, run_codex, run_pi
from benchmarks._scenario import AGENTS_MD, DEFAULT_START, REREAD_S, FileRead, ModelStep, ScriptedTurn, _code
from lamina.cachesim import CacheSummary, summarise

Progress = Callable[[str], None]

_NAMES = (
    "parser",
    "scheduler",
    "storage",
    "router",
    "billing",
    "auth",
    "search",
    "render",
    "queue",
    "metrics",
    "config",
    "session",
    "export",
    "importer",
    "notify",
    "planner",
)


@dataclass(frozen=True, slots=True)
class RevisitShape:
    """The scenario's sizes and events, as fractions of the session where they happen."""

    turns: int = 64
    files: int = 16
    revisits: int = 25
    smallest_bytes: int = 5_000
    largest_bytes: int = 30_000
    short_gap_s: float = 600.0
    long_gap_s: float = 4_200.0
    short_gap_at: float = 0.31
    long_gap_at: float = 0.69
    mode_at: float = 0.45
    edit_at: float = 0.55


QUICK = RevisitShape(turns=12, files=4, revisits=5, short_gap_at=0.4, long_gap_at=0.7, mode_at=0.5, edit_at=0.6)


def _file(rng: random.Random, path: str, size: int) -> FileRead:
    """A file of `size` bytes or a line less, whose first and last lines are its own (re-reads are decided on them)."""
    tag = hashlib.blake2b(f"{path}:{size}".encode(), digest_size=6).hexdigest()
    head, foot = f"# module {path} revision {tag}\n", f"# end of module {path} revision {tag}\n"
    room = size - len(head) - len(foot)
    lines, used = [], 0
    for line in _code(rng, size // 40).split("\n"):
        if used + len(line) + 1 > room:
            break
        lines.append(line)
        used += len(line) + 1
    return FileRead(call_id=f"read_{tag}", path=path, content=head + "\n".join(lines) + "\n" + foot)


def _small(rng: random.Random, n: int, c: int) -> FileRead:
    path = f"src/util/helper_{n}_{c}.py"
    return FileRead(f"call_{n}_{c}", path, _code(rng, rng.randrange(15, 60)))


def revisit_script(shape: RevisitShape = RevisitShape(), *, seed: int = 11) -> tuple[ScriptedTurn, ...]:
    """The scenario as scripted turns, agent-neutral (see the module docstring)."""
    rng = random.Random(seed)
    turns = shape.turns
    spacing = max(1, (turns * 3 // 4) // shape.files)
    step = (shape.largest_bytes - shape.smallest_bytes) // max(1, shape.files - 1)
    sizes = [shape.smallest_bytes + k * step for k in range(shape.files)]
    rng.shuffle(sizes)
    intro = {k * spacing: _file(rng, f"src/app/{_NAMES[k % len(_NAMES)]}.py", sizes[k]) for k in range(shape.files)}
    candidates = [t for t in range(2, turns) if t not in intro]
    revisit_turns = sorted(rng.sample(candidates, min(shape.revisits, len(candidates))))
    revisits: dict[int, FileRead] = {}
    for t in revisit_turns:
        seen = [f for turn, f in sorted(intro.items()) if turn < t]
        revisits[t] = rng.choice(seen[-3:]) if rng.random() < 0.5 else rng.choice(seen)
    gaps = {round(turns * shape.short_gap_at): shape.short_gap_s, round(turns * shape.long_gap_at): shape.long_gap_s}
    mode_turn, edit_turn = round(turns * shape.mode_at), round(turns * shape.edit_at)
    now = DEFAULT_START
    script: list[ScriptedTurn] = []
    for n in range(turns):
        now += gaps.get(n, rng.uniform(60.0, 150.0))
        steps: list[ModelStep] = []
        if n in intro:
            big = intro[n]
            steps.append(ModelStep(now, f"Reading {big.path}.", (big,)))
            prompt = f"Turn {n}: {big.path} has a bug in its main loop; find it and explain. " * 2
        elif n in revisits:
            old = revisits[n]
            steps.append(ModelStep(now, f"Back in {old.path}.", (_small(rng, n, 0),), needs=(old,)))
            now += REREAD_S
            prompt = f"Turn {n}: back to {old.path}: apply the same fix to its second loop. " * 2
        else:
            reads = tuple(_small(rng, n, c) for c in range(1 + n % 2))
            steps.append(ModelStep(now, "Looking at the helpers.", reads))
            prompt = f"Turn {n}: check the helpers used by the last change. " * 2
        now += rng.uniform(5.0, 20.0)
        steps.append(ModelStep(now, f"Done with turn {n}: the change is in place."))
        now += rng.uniform(5.0, 20.0)
        script.append(
            ScriptedTurn(
                index=n,
                prompt=prompt,
                steps=tuple(steps),
                mode="explore" if n == mode_turn else None,
                agents_md=(AGENTS_MD + "- Never push to main.\n") if n == edit_turn else None,
            )
        )
    return tuple(script)


def revisit_count(script: Sequence[ScriptedTurn]) -> int:
    """How many turns need an earlier file again."""
    return sum(1 for t in script if any(s.needs for s in t.steps))


_PEERS: Final = (
    ("Claude Code", "claude_code", run_claude_code, "anthropic"),
    ("pi", "pi", run_pi, "anthropic"),
    ("Codex CLI", "codex", run_codex, "responses"),
)


def _peer(
    label: str, slug: str, runner: PeerRunner, target: str, script: Sequence[ScriptedTurn], progress: Progress
) -> tuple[list[Figure], CacheSummary | None]:
    progress(f"{label} through the same {len(script)} turns")
    try:
        run = runner(script, progress=progress)
    except PeerUnavailable as exc:
        print(f"cache: {label} peer skipped on the revisits scenario: {exc}", file=sys.stderr)
        return [], None
    summary = summarise(peer_bill(run, simulator_for(target)))
    name = f"peer_{slug}"
    return [
        Figure(f"{name}_billed_input_tokens_revisits", round(summary.weighted_tokens), "tokens", note=run.version),
        Figure(f"{name}_cache_efficiency_revisits", round(summary.cache_efficiency, 4), "ratio"),
        Figure(f"{name}_requests_revisits", summary.requests, "requests"),
        Figure(f"{name}_rereads_revisits", len(run.rereads), "reads", note="files read again: content gone"),
    ], summary


def revisit_figures(*, quick: bool, progress: Progress) -> list[Figure]:
    """The second scenario: ours pruned by default and never pruned, the peers through it, the goal figures."""
    script = revisit_script(QUICK if quick else RevisitShape())
    edit = next((t.index for t in script if t.agents_md is not None), None)
    progress(f"revisits: a {len(script)}-turn session needing {revisit_count(script)} earlier files again")
    default, never = our_run(script), our_run(script, prune=None)
    figures: list[Figure] = []
    peers: dict[str, CacheSummary] = {}
    for label, slug, runner, target in _PEERS:
        found, summary = _peer(label, slug, runner, target, script, progress)
        figures += found
        if summary is not None:
            peers[slug] = summary
    for target in TARGETS:
        figures += goal_figures(
            "revisits", target, default.summary(target), never.summary(target), never.floor(target), peers
        )
    for target in TARGETS:
        figures += bill_breakdown("revisits", "default", default, target, edit)
        figures += bill_breakdown("revisits", "unpruned", never, target, edit)
    note = "files the scripted model read again: their content was gone from the request"
    for target in TARGETS:
        tags = {"scenario": "revisits", "target": target}
        figures += [
            Figure(f"rereads_revisits_{target}", default.rereads(target), "reads", note=note, **tags),
            Figure(f"rereads_unpruned_revisits_{target}", never.rereads(target), "reads", note=note, **tags),
        ]
    return figures
