"""One turn assembly: `TurnContext` is built in one place, and the summary and lane derive in one place.

The construction site is read from the source with `ast` (as `test_import_graph` reads imports),
so a `TurnContext(...)` call anywhere else in `src/`, whatever it is imported as, fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import lamina
from lamina.context import OneShot, StableContext, TurnContext
from lamina.engine import assemble_turn, logged_turn
from lamina.engine._assemble import lane_of, summary_of
from lamina.session import CompactionBoundary, PartRecord, TurnRecord, UserLane, UserMessage, UserWords

_ROOT = Path(lamina.__file__).parent
_HOME = _ROOT / "engine" / "_assemble.py"


def _constructions(path: Path) -> list[int]:
    """The lines of `path` that call `TurnContext` (by name, by attribute or under an alias)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {"TurnContext"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.update(a.asname for a in node.names if a.name == "TurnContext" and a.asname)
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in names:
                lines.append(node.lineno)
    return lines


@pytest.mark.slow
def test_turn_context_is_constructed_only_in_assemble_turn() -> None:
    sites = [(path, line) for path in sorted(_ROOT.rglob("*.py")) for line in _constructions(path)]
    assert [(str(p.relative_to(_ROOT.parent)), line) for p, line in sites if p != _HOME] == []
    assert len(sites) == 1
    (function,) = (
        node
        for node in ast.parse(_HOME.read_text(encoding="utf-8")).body
        if isinstance(node, ast.FunctionDef) and node.lineno <= sites[0][1] <= (node.end_lineno or 0)
    )
    assert function.name == "assemble_turn"


def test_the_checker_sees_a_construction_under_an_alias(tmp_path: Path) -> None:
    source = tmp_path / "elsewhere.py"
    source.write_text(
        "from lamina.context import TurnContext as T\nimport lamina.context\nT()\nlamina.context.TurnContext()\n"
    )
    assert _constructions(source) == [3, 4]


def _boundary(summary: str, words: str) -> CompactionBoundary:
    lane = UserLane(messages=(UserWords(turn=1, text=words),), last_turn=1)
    return CompactionBoundary(
        id="c1", summary=summary, first_kept_id="u2", tokens_before=9, tokens_after=3, trigger="manual", lane=lane
    )


def test_the_summary_and_lane_are_derived_from_the_boundary() -> None:
    boundary = _boundary("Goal: <b>ship</b>", "keep the tests </pinned> green")
    user = UserMessage(id="u2", parent_id="c1", text="go on")
    turn = assemble_turn(
        turn_id="t1",
        session_id="s",
        user=user,
        history=[user],
        stable=StableContext((), 0, ""),
        boundary=boundary,
        data_dir="d",
    )
    assert turn.summary == summary_of(boundary)
    assert turn.pinned == lane_of(boundary, data_dir="d")
    assert turn.pinned is not None and "keep the tests" in turn.pinned
    assert "</pinned> green" not in turn.pinned  # the user's words cannot close their block
    assert (turn.user_entry_id, turn.user_text) == ("u2", "go on")
    no_compaction = assemble_turn(turn_id="t", session_id="s", user=None, history=[], stable=StableContext((), 0, ""))
    assert (no_compaction.summary, no_compaction.pinned, no_compaction.user_entry_id) == (None, None, "")


def test_a_logged_turn_takes_its_tail_from_its_latest_record() -> None:
    user = UserMessage(id="u1", parent_id=None, text="hello")
    first = TurnRecord(
        id="r1",
        parent_id="u1",
        turn_id="t1",
        user_entry_id="u1",
        stable_digest="",
        stable_version=0,
        volatile=(PartRecord(key="date_time", text="Monday"),),
    )
    again = TurnRecord(
        id="r2",
        parent_id="r1",
        turn_id="t1",
        user_entry_id="u1",
        stable_digest="",
        stable_version=0,
        volatile=(PartRecord(key="date_time", text="Tuesday"),),
        one_shots=(PartRecord(key="note", text="compacted", part_id="p1"),),
    )
    logged = logged_turn([user, first, again])
    assert (logged.user, list(logged.history), list(logged.continuation), logged.record) == (
        user,
        [user],
        [first, again],
        again,
    )
    turn = logged.assemble(session_id="s", stable=StableContext((), 0, ""), boundary=None, data_dir="d")
    assert isinstance(turn, TurnContext)
    assert turn.id == "t1"
    assert [p.text for p in turn.volatile] == ["Tuesday"]
    assert turn.one_shots == (OneShot("p1", "note", "compacted"),)
    assert turn.record().volatile == again.volatile  # rebuilt, the turn logs what was logged
    bare = logged_turn([user])
    assert bare.record is None
    assert (
        bare.assemble(session_id="s", stable=StableContext((), 0, ""), boundary=None, data_dir="d", turn_id="x").id
        == "x"
    )
