"""The session read for the inspector: branches, compactions, plans, bridges, and each request rebuilt from the log."""

from __future__ import annotations

from pathlib import Path

from lamina.placement import AnthropicTarget, OpenAIChatTarget
from lamina.serve._inspect import LIST_TEXT_CHARS, SessionIndex, is_bridge
from lamina.serve._requests import WARM_UP, SessionRequests, target_for
from lamina.session import (
    AssistantMessage,
    CompactionBoundary,
    LogEntry,
    OutboxRecord,
    StateChange,
    TurnRecord,
    UserMessage,
)
from tests.serve.conftest import Stored
from tests.serve.sessions import PLAN_STATES


def _entries(stored: Stored, session_id: str) -> tuple[list[LogEntry], str | None, str]:
    with stored.store.open(session_id, writable=False) as session:
        return session.entries(), session.leaf_id, str(session.folder / "data")


def test_branches_name_their_fork_point_and_whether_it_was_still_in_view(stored: Stored) -> None:
    entries, leaf, _ = _entries(stored, stored.rich.id)
    index = SessionIndex(entries, leaf)
    branches = {b.leaf_id: b for b in index.branches()}
    assert set(branches) == {stored.rich.main_leaf, stored.rich.branch_leaf}
    trunk, side = branches[stored.rich.main_leaf], branches[stored.rich.branch_leaf]
    assert trunk.fork_id is None and trunk.current and trunk.point_in_view is None
    assert side.fork_id == stored.rich.fork_id and not side.current
    assert side.parent_leaf_id == stored.rich.main_leaf
    # the branch started after a compaction had summarised its fork point
    assert side.point_in_view is False
    assert side.label == "Try another way."
    # the side branch's path holds the fork point, not the main branch's later turns
    texts = [e.text for e in index.path(side.leaf_id) if isinstance(e, UserMessage)]
    assert texts == ["Why is total() wrong? Don't change anything yet.", "Try another way."]


def test_a_branch_from_the_leaf_itself_keeps_its_point_in_view() -> None:
    root = UserMessage(id="a", text="one", ts=1)
    answer = AssistantMessage(id="b", parent_id="a", text="two", ts=2)
    other = UserMessage(id="c", parent_id="a", text="again", ts=3)  # appended right after `b`, branching at `a`
    index = SessionIndex([root, answer, other], "c")
    side = next(b for b in index.branches() if b.leaf_id == "c")
    assert side.fork_id == "a" and side.point_in_view is True


def test_compaction_shows_what_it_kept_summary_and_the_users_words(stored: Stored) -> None:
    entries, leaf, _ = _entries(stored, stored.rich.id)
    index = SessionIndex(entries, leaf)
    path = index.path(leaf)
    [compaction] = index.compactions(path)
    boundary = next(e for e in entries if isinstance(e, CompactionBoundary))
    assert compaction.summary == boundary.summary and compaction.focus == "the bug"
    earlier = path[: path.index(boundary)]
    kept_from = next(i for i, e in enumerate(earlier) if e.id == boundary.first_kept_id)
    assert compaction.kept_entries == len(earlier) - kept_from > 0
    assert compaction.summarised_entries == kept_from
    assert [w.text for w in compaction.lane] == [w.text for w in boundary.lane.messages]
    assert compaction.lane[0].text == "Why is total() wrong? Don't change anything yet."
    # entries summarised away are out of the provider view; those kept and later are in it
    items = {i.id: i for i in index.items(path)}
    assert not items[stored.rich.fork_id].in_view
    assert items[boundary.first_kept_id or ""].in_view


def test_plans_list_every_transition_in_order(stored: Stored) -> None:
    entries, leaf, _ = _entries(stored, stored.rich.id)
    index = SessionIndex(entries, leaf)
    [plan] = index.plans(index.path(leaf))
    assert plan.plan_id == "plan-1" and plan.state == "done" and plan.plan_path == "plans/fix.md"
    assert [t.state for t in plan.transitions] == list(PLAN_STATES)


def test_hidden_one_shot_bridges_are_marked(stored: Stored) -> None:
    entries, leaf, _ = _entries(stored, stored.rich.id)
    bridges = [e for e in entries if is_bridge(e)]
    assert any(isinstance(e, OutboxRecord) and e.kind == "recovery" for e in bridges)
    assert any(isinstance(e, TurnRecord) and e.one_shots[0].key == "recovery" for e in bridges)
    index = SessionIndex(entries, leaf)
    marked = {i.id for i in index.items(index.path(leaf)) if i.hidden_bridge}
    assert marked == {e.id for e in bridges}
    assert not any(is_bridge(e) for e in entries if isinstance(e, UserMessage | AssistantMessage))


def test_timeline_texts_are_bounded_and_totals_add_up(stored: Stored) -> None:
    entries, leaf, _ = _entries(stored, stored.hostile)
    index = SessionIndex(entries, leaf)
    items = index.items(index.path(leaf))
    huge = next(i for i in items if i.kind == "tool_result")
    assert len(huge.text) == LIST_TEXT_CHARS and huge.text_chars > 1_000_000
    assert index.item(index.by_id[huge.id], in_view=True, whole=True).text_chars == huge.text_chars
    assert index.totals.turns == 1 and index.totals.requests == 1 and index.totals.input_tokens == 10


def test_each_request_is_rebuilt_from_what_the_log_recorded(stored: Stored) -> None:
    """The layers of every request hold the recorded tail, one-shots and stable parts; usage is the provider's."""
    entries, _, data_dir = _entries(stored, stored.rich.id)
    requests = SessionRequests(stored.rich.id, entries, data_dir=data_dir)
    calls = [e for e in entries if isinstance(e, AssistantMessage)]
    assert requests.count == len(calls) == 6
    prefixes = [e for e in entries if isinstance(e, StateChange) and e.key == "stable" and e.prefix]
    recorded_keys = [p.key for p in prefixes[-1].prefix]
    for index, call in enumerate(calls):
        layers = requests.layers(index)
        assert layers.entry_id == call.id and layers.model == call.model
        record = next(
            e
            for e in reversed(entries[: entries.index(call)])
            if isinstance(e, TurnRecord) and e.turn_id == call.turn_id
        )
        by_name = {layer.name: layer for layer in layers.layers}
        assert [p.key for p in by_name["tail"].parts] == [p.key for p in record.volatile]
        assert [p.text for p in by_name["tail"].parts] == [p.text for p in record.volatile]
        assert [p.key for p in by_name["one_shot"].parts] == [p.key for p in record.one_shots]
        assert [p.key for p in by_name["stable"].parts] == recorded_keys
        assert layers.stable_recorded and layers.stable_digest == record.stable_digest
        # the same request component by component (lamina.reports, which counts earlier turns' tails too)
        components = {(c.kind, c.name) for c in layers.composition}
        assert {("volatile", p.key) for p in record.volatile} <= components
        assert {("one-shot", p.key) for p in record.one_shots} <= components
        assert call.usage is not None and layers.provider is not None
        assert (layers.provider.read, layers.provider.write, layers.provider.uncached) == (
            call.usage.cache_read,
            call.usage.cache_write,
            call.usage.input,
        )
        assert sum(layer.tokens for layer in layers.layers) == layers.blocks[-1].cumulative == layers.simulated.total
        assert layers.breakpoints and len(layers.breakpoints) <= 4
    # the recovery one-shot rode exactly one request
    carrying = [
        i for i in range(requests.count) if any(p.key == "recovery" for p in requests.layers(i).layers[4].parts)
    ]
    assert len(carrying) == 1
    # the simulator reads what the provider read, less the tool definitions the log does not hold
    later = requests.layers(4)
    assert later.simulated.read > 0 and later.provider is not None and later.provider.read > later.simulated.read


def test_requests_extend_when_the_log_grows_and_start_over_when_it_does_not() -> None:
    first: list[LogEntry] = [
        UserMessage(id="u", text="hi", ts=1),
        AssistantMessage(id="a", parent_id="u", text="yo", ts=2),
    ]
    requests = SessionRequests("s", first)
    assert requests.count == 1 and requests.summary(0, on_path=True).simulated.total > 0
    more = [*first, UserMessage(id="u2", parent_id="a", text="again", ts=3)]
    more.append(AssistantMessage(id="a2", parent_id="u2", text="ok", ts=4))
    assert requests.extend(more) and requests.count == 2
    assert not requests.extend([first[0]])


def test_the_wire_format_follows_the_model_name() -> None:
    assert isinstance(target_for("claude-sonnet-5"), AnthropicTarget)
    assert isinstance(target_for("gpt-5"), OpenAIChatTarget)
    assert isinstance(target_for("openai/o3-mini"), OpenAIChatTarget)
    assert isinstance(target_for(""), AnthropicTarget)


def test_a_replay_started_a_few_requests_back_gives_the_figures_of_a_whole_replay(tmp_path: Path) -> None:
    """Rolling breakpoints: each request reads what the one before wrote, so the warm-up is enough."""
    from benchmarks.serve import _session

    store, session_id = _session(tmp_path, 5 * (WARM_UP * 3))
    with store.open(session_id, writable=False) as session:
        entries = session.entries()
    whole = SessionRequests(session_id, entries)
    last = whole.count - 1
    whole.simulate(list(range(whole.count)))
    assert whole.replayed_from(last) == 0
    windowed = SessionRequests(session_id, entries)
    assert windowed.replayed_from(last) == last - WARM_UP
    for index in (last, last - 3):
        assert windowed.summary(index, on_path=True) == whole.summary(index, on_path=True)
    assert windowed.layers(last).simulated == whole.layers(last).simulated
    assert windowed.layers(last).simulated.read > 0
