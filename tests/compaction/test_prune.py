"""Pruning old tool output: which results go, what the model sees instead, and that it pays."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from benchmarks._scenario import session_script
from benchmarks.cache import _bills
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.compaction import PrunePolicy, apply_prunes, choose_prune, prune_floor
from lamina.compaction._prune import pruned_note
from lamina.engine import ContextEngine
from lamina.session import (
    AssistantMessage,
    LocalSessionStore,
    LogEntry,
    ToolCall,
    ToolOutputPruned,
    ToolResult,
    UserMessage,
)
from tests.conftest import examples
from tests.support.engine import ANTHROPIC, TOOLS, Clock, json_body, workspace_source

SMALL = PrunePolicy(protect_turns=2, protect_tokens=1_000, minimum_tokens=2_000, smallest_tokens=50)
LINE = "    value = compute(item, limit=42)  # a line of code\n"


def _content(tokens: int) -> str:
    return LINE * max(1, tokens // 12)


def _turns(sizes: list[list[int]], paths: dict[tuple[int, int], str] | None = None) -> list[LogEntry]:
    """A view: one user turn per item of `sizes`, each reading files of about those many tokens."""
    entries: list[LogEntry] = []
    for t, reads in enumerate(sizes):
        entries.append(UserMessage(id=f"u{t}", text=f"turn {t}"))
        for r in range(len(reads)):  # one parallel batch: the calls, then their results
            path = (paths or {}).get((t, r), f"src/m_{t}_{r}.py")
            entries.append(ToolCall(id=f"c{t}_{r}", call_id=f"call_{t}_{r}", name="Read", input={"path": path}))
        for r, tokens in enumerate(reads):
            entries.append(ToolResult(id=f"r{t}_{r}", call_id=f"call_{t}_{r}", name="Read", content=_content(tokens)))
        entries.append(AssistantMessage(id=f"a{t}", text=f"done {t}"))
    return entries


def test_nothing_is_pruned_until_it_frees_the_minimum() -> None:
    assert choose_prune(_turns([[600], [600], [600]]), SMALL) is None  # 1,200 beyond the protected: too little
    chosen = choose_prune(_turns([[900], [900], [900], [900], [900]]), SMALL)
    assert chosen is not None and chosen.tokens >= SMALL.minimum_tokens


def test_the_last_turn_and_the_protected_tokens_stay_and_everything_older_goes() -> None:
    view = _turns([[800, 800], [800], [800], [500], [3_000]])
    chosen = choose_prune(view, SMALL)
    assert chosen is not None
    # turn 4 is the last completed turn (protected whole, however large); turn 3's 500 tokens fit in the
    # protected 1,000, turn 2's 800 does not: it and all older output goes
    assert chosen.call_ids == ("call_0_0", "call_0_1", "call_1_0", "call_2_0")


def test_reads_the_rules_count_on_and_small_outputs_are_never_pruned() -> None:
    paths = {(0, 0): "skills/deploy/SKILL.md", (0, 1): "docs/api.md", (0, 2): "pkg/AGENTS.md"}
    view = _turns([[900, 900, 900, 30, 900], [900], [900], [900], [900]], paths)
    chosen = choose_prune(view, SMALL)
    assert chosen is not None
    assert "call_0_4" in chosen.call_ids
    assert not {"call_0_0", "call_0_1", "call_0_2", "call_0_3"} & set(chosen.call_ids)


def test_the_note_names_the_call_and_how_to_get_it_back() -> None:
    call = ToolCall(call_id="x", name="Read", input={"path": "src/app.py", "offset": 10})
    note = pruned_note(call, ToolResult(call_id="x", name="Read", content="..."))
    assert "Read" in note and '"path": "src/app.py"' in note and "again" in note
    huge = ToolCall(call_id="y", name="Bash", input={"command": "echo " + "a" * 5_000})
    assert len(pruned_note(huge, ToolResult(call_id="y", name="Bash", content="a"))) < 400


sizes = st.lists(st.lists(st.integers(0, 1_500), max_size=4), min_size=1, max_size=12)


@pytest.mark.slow
@settings(max_examples=examples(150), deadline=None)
@given(sizes, st.integers(1, 4), st.integers(0, 3_000), st.integers(1, 4_000))
def test_pruning_never_touches_protected_turns_and_is_stable(
    turns: list[list[int]], protect_turns: int, protect_tokens: int, minimum: int
) -> None:
    policy = PrunePolicy(protect_turns=protect_turns, protect_tokens=protect_tokens, minimum_tokens=minimum)
    view = _turns(turns)
    chosen = choose_prune(view, policy)
    if chosen is None:
        return
    assert chosen.tokens >= minimum
    protected_from = max(0, len(turns) - (protect_turns - 1))
    assert all(int(c.split("_")[1]) < protected_from for c in chosen.call_ids)
    results = {e.call_id: e for e in view if isinstance(e, ToolResult)}
    assert set(chosen.call_ids) <= set(results)
    pruned = apply_prunes([*view, chosen])
    assert [e.id for e in pruned] == [*(e.id for e in view), chosen.id]  # same entries, same order
    for before, after in zip(view, pruned, strict=False):
        if isinstance(before, ToolResult) and before.call_id in chosen.call_ids:
            assert isinstance(after, ToolResult) and after.content.startswith("[output pruned")
        else:
            assert after is before
    assert choose_prune(pruned, policy) is None  # what is left is what the policy keeps: no prune right after


@pytest.mark.slow
@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.lists(st.integers(0, 1_500), max_size=4), min_size=1, max_size=14), st.integers(0, 2_000))
def test_looking_from_the_floor_chooses_what_looking_at_everything_does(turns: list[list[int]], protect: int) -> None:
    policy = PrunePolicy(protect_turns=2, protect_tokens=protect, minimum_tokens=1_500)
    # reads always kept, last in their batch: their call comes before results a prune takes
    paths = {(t, len(turns[t]) - 1): "pkg/AGENTS.md" for t in range(0, len(turns), 3)}
    full = _turns(turns, paths)
    starts = [*(i for i, e in enumerate(full) if isinstance(e, UserMessage) and i), len(full)]
    prunes: list[ToolOutputPruned] = []
    for end in starts:  # the session grows a turn at a time and prunes before each next turn
        view = apply_prunes([*full[:end], *prunes])
        whole = choose_prune(view, policy)
        assert choose_prune(view, policy, start=prune_floor(view)) == whole
        if whole is not None:
            prunes.append(whole)


def _engine(tmp_path: Path, clock: Clock, session_id: str | None = None) -> ContextEngine:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    (workspace / "AGENTS.md").write_text("Run the tests.\n")
    store = LocalSessionStore(tmp_path / "store", clock=clock)
    session = store.open(session_id) if session_id else store.create(cwd=str(workspace))
    return ContextEngine(session, stable_source=workspace_source(workspace), tools=TOOLS, clock=clock, prune=SMALL)


def _messages(engine: ContextEngine, turn: Any) -> list[dict[str, Any]]:
    return list(json_body(engine.request(turn, ANTHROPIC))["messages"])


def test_the_engine_prunes_before_a_turn_keeps_the_log_whole_and_renders_the_same_after_reopen(
    tmp_path: Path,
) -> None:
    clock = Clock()
    engine = _engine(tmp_path, clock)
    secret = "UNIQUE-OLD-CONTENT"
    for t in range(5):
        turn = engine.prepare_turn(f"Look at module {t}")
        engine.record(ToolCall(call_id=f"call{t}", name="Read", input={"path": f"m{t}.py"}))
        engine.record(ToolResult(call_id=f"call{t}", name="Read", content=f"{secret}-{t}\n" + _content(900)))
        engine.record(AssistantMessage(text=f"Read m{t}.py."))
        engine.commit(turn)
        engine.end_turn()
        clock.advance(7_200)  # two hours between turns: the cache is cold, so the cost model prunes
    logged = len(engine.session.entries())
    preview = engine.preview_turn("And now?")  # a report shows the prune the turn would make, logging nothing
    assert f"{secret}-2" not in json.dumps(_messages(engine, preview))
    assert len(engine.session.entries()) == logged
    turn = engine.prepare_turn("And now?")
    pruned = {c for e in engine.session.entries() if isinstance(e, ToolOutputPruned) for c in e.call_ids}
    assert {"call0", "call2"} <= pruned and "call4" not in pruned
    body = json.dumps(_messages(engine, turn))
    assert f"{secret}-0" not in body and f"{secret}-4" in body  # the old output went, the last turn's stayed
    assert body.count("[output pruned from context: Read") == len(pruned)
    results = [e for e in engine.session.entries() if isinstance(e, ToolResult) and e.call_id == "call0"]
    assert f"{secret}-0" in results[0].content  # the log keeps every byte

    # the next request of the turn extends the first one: the prune does not move again
    first = _messages(engine, turn)
    engine.record(AssistantMessage(text="Checking."))
    second = _messages(engine, turn)
    assert second[: len(first) - 1] == first[:-1]
    engine.commit(turn)
    engine.end_turn()
    session_id = engine.session.id
    engine.session.close()

    reopened = _engine(tmp_path, clock, session_id)
    again = json.dumps(_messages(reopened, reopened.preview_turn("And now?")))
    assert f"{secret}-0" not in again and again.count("[output pruned from context: Read") == len(pruned)
    reopened.session.close()


def test_with_no_policy_nothing_is_pruned(tmp_path: Path) -> None:
    clock = Clock()
    engine = _engine(tmp_path, clock)
    engine.compactor.prune_policy = None
    for t in range(6):
        turn = engine.prepare_turn(f"Look at module {t}")
        engine.record(ToolCall(call_id=f"call{t}", name="Read", input={"path": f"m{t}.py"}))
        engine.record(ToolResult(call_id=f"call{t}", name="Read", content=_content(900)))
        engine.commit(turn)
    assert not [e for e in engine.session.entries() if isinstance(e, ToolOutputPruned)]
    engine.session.close()


@pytest.mark.slow
def test_the_default_policy_lowers_the_bill_of_a_long_coding_session() -> None:
    script = session_script(turns=28)
    pruned, unpruned = _bills(script, PrunePolicy()), _bills(script, None)
    for target in ("anthropic", "openai"):  # Anthropic: the cache writes after a prune are paid back
        assert pruned[target].weighted_tokens < 0.9 * unpruned[target].weighted_tokens
