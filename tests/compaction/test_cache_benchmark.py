"""The cache benchmark's second scenario, small: the scripted model re-reads exactly when a file is gone.

Lamina runs the quick revisits scenario (`benchmarks._revisit`) with a policy that prunes early,
so some needed files leave the request; every request is rendered as the model receives it.
"""

from __future__ import annotations

import itertools
import json

import pytest
from benchmarks._billing import ANTHROPIC, CAUSES, bill_breakdown, our_run
from benchmarks._revisit import QUICK, revisit_count, revisit_script
from benchmarks._scenario import REREAD_S, ScriptedTurn, scripted_session

from lamina.compaction import PrunePolicy
from lamina.placement import render
from tests.support.engine import json_body

EAGER = PrunePolicy(protect_turns=1, protect_tokens=0, minimum_tokens=2_000)
"""Prunes as soon as 2,000 tokens go: the needed files of the quick scenario leave the request."""


def _shape_holds(script: tuple[ScriptedTurn, ...]) -> None:
    assert revisit_count(script) == QUICK.revisits
    big = {r.path: r for t in script for s in t.steps for r in s.reads if r.path.startswith("src/app/")}
    assert len(big) == QUICK.files
    assert min(len(r.content) for r in big.values()) >= QUICK.smallest_bytes - 80
    assert max(len(r.content) for r in big.values()) <= QUICK.largest_bytes
    needed = [n for t in script for s in t.steps for n in s.needs]
    assert needed and all(n.path in big and n.content == big[n.path].content for n in needed)
    times = [s.t for t in script for s in t.steps]
    assert times == sorted(times)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert any(600 <= g < 3600 for g in gaps) and any(g > 3600 for g in gaps)  # one gap under an hour, one over


@pytest.mark.slow
def test_the_model_reads_a_file_again_exactly_when_its_content_is_gone() -> None:
    script = revisit_script(QUICK)
    _shape_holds(script)
    needs = {t.index: t.steps[0].needs[0] for t in script if t.steps[0].needs}
    calls = [
        (
            call.turn_index,
            call.after_reread,
            call.t_start,
            json.dumps(json_body(render(call.turn, ANTHROPIC, continuation=call.engine.continuation(call.turn)))),
        )
        for call in scripted_session(script, prune=EAGER)
    ]
    rereads = 0
    for turn, needed in needs.items():
        mine = [c for c in calls if c[0] == turn]
        first, second = mine[0], mine[1]
        assert not first[1]
        if needed.seen_in(first[3]):
            assert not second[1] and len(mine) == 2  # still there: answered at once
        else:
            rereads += 1
            assert second[1] and len(mine) == 3  # gone: read again, then answered
            assert needed.seen_in(second[3])  # and the re-read brought it back
            assert second[2] == first[2] + REREAD_S
    assert rereads > 0  # the eager policy pruned some needed file
    assert sum(1 for c in calls if c[1]) == rereads


@pytest.mark.slow
def test_the_bill_is_above_the_floor_and_unpruned_never_reads_again() -> None:
    script = revisit_script(QUICK)
    pruned, never = our_run(script, EAGER), our_run(script, prune=None)
    for target in ("anthropic", "responses"):
        assert never.rereads(target) == 0 and pruned.rereads(target) > 0
        assert len(pruned.calls[target]) == len(never.calls[target]) + pruned.rereads(target)
        floor = never.floor(target)
        assert 0 < floor < never.summary(target).weighted_tokens
        assert floor < pruned.summary(target).weighted_tokens


@pytest.mark.slow
def test_the_breakdown_adds_up_to_the_bill_and_finds_the_prunes_and_the_rereads() -> None:
    script = revisit_script(QUICK)
    edit = next(t.index for t in script if t.agents_md is not None)
    run = our_run(script, EAGER)
    for target in ("anthropic", "responses"):
        bill = run.summary(target).weighted_tokens
        parts = {f.name.rsplit(f"{target}_", 1)[1]: f.value for f in bill_breakdown("q", "p", run, target, edit)}
        assert abs(sum(parts[k] for k in ("reads", "writes_5m", "writes_1h", "uncached")) - bill) <= 4
        assert abs(parts["reads"] + sum(parts[f"new_{c}"] for c in CAUSES) - bill) <= len(CAUSES) + 1
        assert parts["new_prune"] > 0 and parts["new_reread"] > 0 and parts["new_gap"] > 0
        if target == "responses":
            assert parts["writes_5m"] == parts["writes_1h"] == 0  # OpenAI writes are not billed apart
