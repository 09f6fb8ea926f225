"""The model's reasoning in the reports: a `reasoning` kind in the composition, a row of its own in the budget."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.context import Tier
from lamina.engine import ContextEngine
from lamina.reports import KINDS, budget_of_turn, compose_turn
from lamina.session import AssistantMessage, InMemorySessionStore, Reasoning
from lamina.tokens import DEFAULT_ESTIMATOR
from lamina.tools import default_tool_specs
from lamina.workspace import Preferences, WorkspaceContext
from tests.support.engine import Clock


def _engine(tmp_path: Path) -> ContextEngine:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    clock = Clock()
    session = InMemorySessionStore(tmp_path / "files", clock=clock).create(cwd=str(workspace))
    context = WorkspaceContext(workspace, preferences=Preferences(), environ={}, tools=default_tool_specs())
    return ContextEngine(session, stable_source=context, tools=context.tools, clock=clock)


def _answered(engine: ContextEngine, *blocks: Reasoning) -> None:
    turn = engine.prepare_turn("what now?")
    engine.record(AssistantMessage(text="This.", reasoning=blocks))
    engine.commit(turn)


def test_reasoning_is_counted_apart_in_the_history_tier_and_as_its_own_kind(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    thought = Reasoning(provider="anthropic", kind="thinking", text="Weigh both options first.", signature="s")
    summary = Reasoning(provider="openai", kind="reasoning", data="enc", item_id="rs_1", summary=("Plan.", "Act."))
    redacted = Reasoning(provider="anthropic", kind="redacted_thinking", data="opaque")
    _answered(engine, thought, summary, redacted)
    turn = engine.prepare_turn("and then?")
    budget, composition = budget_of_turn(turn), compose_turn(turn)
    expected = DEFAULT_ESTIMATOR.count(thought.text) + DEFAULT_ESTIMATOR.count("Plan.\n\nAct.")
    history = budget.tiers[list(Tier).index(Tier.HISTORY)]
    assert history.reasoning == budget.reasoning == expected  # the redacted block has nothing to count
    assert "reasoning" in history.items and history.tokens > history.reasoning
    assert all(t.reasoning == 0 for t in budget.tiers if t.tier is not Tier.HISTORY)
    assert list(composition.by_kind()) == list(KINDS)
    assert composition.by_kind()["reasoning"] == expected
    assert composition.total == budget.total  # every token counted once, in one kind


def test_a_session_without_reasoning_counts_none(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    _answered(engine)
    turn = engine.prepare_turn("next")
    assert budget_of_turn(turn).reasoning == 0 and compose_turn(turn).by_kind()["reasoning"] == 0
    assert "reasoning" not in budget_of_turn(turn).tiers[list(Tier).index(Tier.HISTORY)].items


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(max_size=60), max_size=4))
def test_the_budgets_reasoning_row_and_the_compositions_kind_agree(texts: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        engine = _engine(Path(folder))
        _answered(engine, *(Reasoning(provider="anthropic", kind="thinking", text=t, signature="s") for t in texts))
        turn = engine.prepare_turn("next")
        budget, composition = budget_of_turn(turn), compose_turn(turn)
    assert budget.reasoning == composition.by_kind()["reasoning"] == sum(DEFAULT_ESTIMATOR.count(t) for t in texts)
    assert composition.total == budget.total
