"""The session tree: paths, the provider view and mended links, on hand-made trees (pure)."""

from __future__ import annotations

import msgspec
import pytest

from lamina.errors import MissingEntryError
from lamina.session import AssistantMessage, CompactionBoundary, LogEntry, UserMessage
from lamina.session._tree import (
    LostLine,
    Relink,
    find_broken_links,
    mend_links,
    path_to,
    provider_view,
    view_start_id,
)


def _user(entry_id: str, parent: str | None) -> UserMessage:
    return UserMessage(id=entry_id, parent_id=parent, text=f"message {entry_id}")


def _boundary(entry_id: str, parent: str | None, first_kept: str | None) -> CompactionBoundary:
    return CompactionBoundary(
        id=entry_id,
        parent_id=parent,
        summary="summary",
        first_kept_id=first_kept,
        tokens_before=10,
        tokens_after=2,
        trigger="manual",
    )


def _by_id(entries: list[LogEntry]) -> dict[str, LogEntry]:
    return {e.id: e for e in entries}


def test_a_first_entry_whose_parent_is_missing_becomes_a_root() -> None:
    order: list[LogEntry] = [_user("a", "gone"), _user("b", "a")]
    assert mend_links(order) == [Relink("a", 0, "gone", None, "missing_parent")]


def test_an_entry_whose_parent_is_missing_hangs_from_the_entry_before_it() -> None:
    order: list[LogEntry] = [_user("a", None), _user("b", "a"), _user("c", "gone")]
    assert mend_links(order) == [Relink("c", 2, "gone", "b", "missing_parent")]


def test_a_cycle_and_a_later_parent_are_told_apart() -> None:
    cycle: list[LogEntry] = [_user("a", "c"), _user("b", "a"), _user("c", "b")]
    assert mend_links(cycle) == [Relink("a", 0, "c", None, "cycle")]
    later: list[LogEntry] = [_user("r", None), _user("a", "b"), _user("b", "r")]
    assert mend_links(later) == [Relink("a", 1, "b", "r", "later_parent")]


def test_children_of_lost_lines_follow_the_salvaged_parents_to_a_survivor() -> None:
    order: list[LogEntry] = [_user("root", None), _user("x", "l2"), _user("y", "gone")]
    lost = [LostLine(1, "l1", "root"), LostLine(1, "l2", "l1")]
    assert mend_links(order, lost) == [
        Relink("x", 1, "l2", "root", "lost_parent"),
        Relink("y", 2, "gone", "x", "lost_parent"),  # after a damaged line: its parent may have been there
    ]
    unsalvaged = [LostLine(1, None, None)]
    assert mend_links(order, unsalvaged)[0] == Relink("x", 1, "l2", "root", "lost_parent")


def test_broken_links_are_found_with_or_without_the_ids() -> None:
    order: list[LogEntry] = [_user("a", None), _user("b", "a"), _user("c", "a"), _user("d", "z"), _user("e", "d")]
    ids = [e.id for e in order]
    assert find_broken_links(order) == find_broken_links(order, ids) == [3]
    chain: list[LogEntry] = [_user("a", None), _user("b", "a"), _user("c", "b")]
    assert find_broken_links(chain) == []
    assert find_broken_links([_user("a", "gone"), _user("b", "a")]) == [0]


@pytest.mark.parametrize(
    ("problem", "words"),
    [
        ("missing_parent", "names a parent that is not in the log"),
        ("lost_parent", "names a parent whose line is damaged"),
        ("cycle", "names a parent that leads back to itself (a cycle)"),
        ("later_parent", "names a parent that comes later in the log"),
    ],
)
def test_a_relink_says_what_was_wrong_and_where_the_entry_hangs_now(problem: str, words: str) -> None:
    moved = Relink("e2", 1, "p9", "e1", problem)  # type: ignore[arg-type]
    assert moved.describe() == f"entry e2 {words} (p9); re-linked to e1"
    rooted = Relink("e2", 1, "p9", None, problem)  # type: ignore[arg-type]
    assert rooted.describe() == f"entry e2 {words} (p9); now a root"


def test_a_boundary_that_keeps_nothing_starts_the_view_after_itself() -> None:
    path: list[LogEntry] = [_user("u1", None), _user("u2", "u1"), _boundary("b", "u2", None), _user("u3", "b")]
    view = provider_view(path)
    assert view.boundary == path[2] and [e.id for e in view.entries] == ["u3"]
    assert view_start_id(_by_id(path), "u3") == "b"


def test_a_boundary_keeps_its_first_kept_entry_and_what_follows() -> None:
    path: list[LogEntry] = [
        _user("u1", None),
        _user("u2", "u1"),
        _user("u3", "u2"),
        _boundary("b", "u3", "u2"),
        _user("u4", "b"),
    ]
    view = provider_view(path)
    assert [e.id for e in view.entries] == ["u2", "u3", "u4"]
    assert view_start_id(_by_id(path), "u4") == "u2"
    assert view_start_id(_by_id(path), "u3") == "u1"  # before the boundary: from the root


def test_a_walk_names_the_entry_it_could_not_find() -> None:
    entries = _by_id([_user("a", "gone")])
    with pytest.raises(MissingEntryError) as raised:
        view_start_id(entries, "a")
    assert raised.value.entry_id == "gone"
    with pytest.raises(MissingEntryError) as raised:
        path_to(entries, "a")
    assert raised.value.entry_id == "gone"


def test_an_unmended_cycle_ends_the_walks() -> None:
    entries = _by_id([_user("a", "b"), _user("b", "a")])
    assert [e.id for e in path_to(entries, "a")] == ["b", "a"]
    assert view_start_id(entries, "a") in {"a", "b"}


def test_links_replace_written_parents_in_a_walk() -> None:
    entries = _by_id([_user("a", None), _user("b", "gone"), _user("c", "b")])
    assert [e.id for e in path_to(entries, "c", {"b": "a"})] == ["a", "b", "c"]
    assert view_start_id(entries, "c", {"b": "a"}) == "a"
    assistant = msgspec.structs.replace(AssistantMessage(text="x"), id="d", parent_id="c")
    assert [e.id for e in provider_view(path_to({**entries, "d": assistant}, "d", {"b": None})).entries] == [
        "b",
        "c",
        "d",
    ]


def test_an_empty_walk_starts_nowhere() -> None:
    assert view_start_id({}, None) is None
    assert path_to({}, None) == []


def test_a_parent_that_leads_into_a_loop_elsewhere_is_a_cycle_and_a_dead_end_is_not() -> None:
    into_loop: list[LogEntry] = [_user("r", None), _user("x", "y"), _user("y", "z"), _user("z", "y")]
    assert [(r.entry_id, r.problem) for r in mend_links(into_loop)] == [("x", "cycle"), ("y", "cycle")]
    dead_end: list[LogEntry] = [_user("x", "y"), _user("y", "gone")]
    assert [(r.entry_id, r.problem) for r in mend_links(dead_end)] == [("x", "later_parent"), ("y", "missing_parent")]


def test_lost_lines_that_lead_to_the_root_or_back_to_themselves_make_a_root() -> None:
    order: list[LogEntry] = [_user("r", None), _user("x", "l1")]
    assert mend_links(order, [LostLine(1, "l1", None)]) == [Relink("x", 1, "l1", None, "lost_parent")]
    looping = [LostLine(1, "l1", "l2"), LostLine(1, "l2", "l1")]
    assert mend_links(order, looping) == [Relink("x", 1, "l1", None, "lost_parent")]


def test_a_lost_line_that_names_the_entry_itself_never_makes_it_its_own_parent() -> None:
    order: list[LogEntry] = [_user("r", None), _user("x", "l1")]
    assert mend_links(order, [LostLine(1, "l1", "x")]) == [Relink("x", 1, "l1", "r", "lost_parent")]
