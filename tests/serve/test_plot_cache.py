"""The plot's series kept on disk by log position: a fresh server answers from it, extends it, or ignores it."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from lamina.serve import create_app
from lamina.serve._inspect import SessionIndex
from lamina.serve._plot_cache import PlotCache
from lamina.serve._requests import SessionRequests
from lamina.serve._series import PlotSeries, series_of
from lamina.session import AssistantMessage, LocalSessionStore
from tests.conftest import examples
from tests.serve.test_scale import _turn

HOST = "http://127.0.0.1:8765"

STEPS = st.lists(
    st.one_of(st.tuples(st.just("turn"), st.integers(0, 2)), st.tuples(st.just("branch"), st.integers(0, 10_000))),
    min_size=1,
    max_size=6,
)


@pytest.mark.slow
@settings(max_examples=examples(20, 500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=STEPS, limit=st.integers(1, 4))
def test_a_fresh_server_reads_the_series_from_disk_or_extends_it(steps: list[tuple[str, int]], limit: int) -> None:
    """After every append or branch, a new `PlotSeries` over the same cache folder gives the full recompute."""
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalSessionStore(Path(tmp) / "store")
        cache = PlotCache(Path(tmp) / "cache", store.location)
        with store.create(cwd="/w") as session:
            _turn(session, 0)
            session.flush()
            session_id, first_leaf = session.id, session.leaf_id
            for n, (op, arg) in enumerate(steps, start=1):
                if op == "turn":
                    _turn(session, n, tools=arg)
                else:
                    entries = session.entries()
                    session.branch(entries[arg % len(entries)].id)
                    _turn(session, n, tools=0)
                session.flush()
                with store.open(session_id, writable=False) as reader:
                    entries, leaf = reader.entries(), reader.leaf_id
                index = SessionIndex(entries, leaf)
                for shown in (None, first_leaf):
                    fresh = PlotSeries(limit=limit, cache=cache, session_id=session_id)  # a server started now
                    got = fresh.get(SessionRequests(session_id, entries), index, shown)
                    assert got == series_of(SessionRequests(session_id, entries), index, shown, limit=limit)


def _session(tmp_path: Path, turns: int) -> tuple[LocalSessionStore, str]:
    store = LocalSessionStore(tmp_path / "store")
    with store.create(cwd="/w") as session:
        for n in range(turns):
            _turn(session, n)
        return store, session.id


def _plot_of(client: TestClient, session_id: str) -> tuple[dict[str, object], PlotSeries]:
    body = client.get(f"/api/sessions/{session_id}/requests").json()
    return body, client.app.state.inspector.reader._plots[session_id]  # type: ignore[attr-defined]


def test_a_fresh_server_does_not_compute_the_series_again(tmp_path: Path) -> None:
    store, session_id = _session(tmp_path, 6)
    cache_dir = tmp_path / "cache"
    first, plot = _plot_of(TestClient(create_app(store, cache_dir=cache_dir), base_url=HOST), session_id)
    assert plot.computed == 1 and plot.cache is not None and plot.cache.writes == 1
    again, plot = _plot_of(TestClient(create_app(store, cache_dir=cache_dir), base_url=HOST), session_id)
    assert again == first
    assert plot.computed == 0 and plot.cache is not None and plot.cache.writes == 0  # read, not computed or written
    with store.open(session_id) as session:
        _turn(session, 6)
    grown, plot = _plot_of(TestClient(create_app(store, cache_dir=cache_dir), base_url=HOST), session_id)
    assert plot.computed == 0  # the file taken as the start, only the new request computed
    assert len(grown["requests"]) == 7  # type: ignore[arg-type]
    assert grown["requests"][:6] == first["requests"]  # type: ignore[index]


def test_a_log_that_is_not_the_cached_one_grown_is_computed_again(tmp_path: Path) -> None:
    store, session_id = _session(tmp_path, 3)
    cache_dir = tmp_path / "cache"
    first, _ = _plot_of(TestClient(create_app(store, cache_dir=cache_dir), base_url=HOST), session_id)
    for file in cache_dir.rglob("*.json"):  # as if the log had been rewritten under the file: another last entry
        saved = json.loads(file.read_text())
        file.write_text(json.dumps({**saved, "last_id": "an-entry-no-longer-there"}))
    again, plot = _plot_of(TestClient(create_app(store, cache_dir=cache_dir), base_url=HOST), session_id)
    assert again == first and plot.computed == 1


def test_a_cache_folder_that_cannot_be_written_is_ignored(tmp_path: Path) -> None:
    store, session_id = _session(tmp_path, 2)
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder would be")
    body, plot = _plot_of(TestClient(create_app(store, cache_dir=blocked), base_url=HOST), session_id)
    assert len(body["requests"]) == 2 and plot.computed == 1  # type: ignore[arg-type]
    assert plot.cache is not None and plot.cache.writes == 0


def test_a_damaged_cache_file_is_computed_again(tmp_path: Path) -> None:
    store, session_id = _session(tmp_path, 2)
    cache_dir = tmp_path / "cache"
    first, _ = _plot_of(TestClient(create_app(store, cache_dir=cache_dir), base_url=HOST), session_id)
    for file in cache_dir.rglob("*.json"):
        file.write_text('{"format": 1, "position": "not a number"}')
    again, plot = _plot_of(TestClient(create_app(store, cache_dir=cache_dir), base_url=HOST), session_id)
    assert again == first and plot.computed == 1


def test_a_leaf_moved_without_a_new_entry_is_not_answered_from_the_old_branchs_file(tmp_path: Path) -> None:
    store, session_id = _session(tmp_path, 4)
    cache_dir = tmp_path / "cache"
    first, _ = _plot_of(TestClient(create_app(store, cache_dir=cache_dir), base_url=HOST), session_id)
    with store.open(session_id) as session:  # a rewind to the second answer: the leaf moves, nothing is appended
        answers = [e.id for e in session.entries() if isinstance(e, AssistantMessage)]
        session.branch(answers[1])
    moved, plot = _plot_of(TestClient(create_app(store, cache_dir=cache_dir), base_url=HOST), session_id)
    assert plot.computed == 1 and len(moved["requests"]) == 2 and len(first["requests"]) == 4  # type: ignore[arg-type]


@pytest.mark.parametrize("change", ["unknown field", "index out of range", "another leaf"])
def test_a_cache_file_not_fully_understood_is_computed_again(tmp_path: Path, change: str) -> None:
    """A file of the right format that says more than it should, or disagrees with itself, is not used."""
    store, session_id = _session(tmp_path, 2)
    cache_dir = tmp_path / "cache"
    first, _ = _plot_of(TestClient(create_app(store, cache_dir=cache_dir), base_url=HOST), session_id)
    for file in cache_dir.rglob("*.json"):
        saved = json.loads(file.read_text())
        if change == "unknown field":
            saved["trusted"] = True
        elif change == "index out of range":
            saved["indices"].append(saved["calls"])
        else:
            saved["series"]["leaf_id"] = "elsewhere"
        file.write_text(json.dumps(saved))
    again, plot = _plot_of(TestClient(create_app(store, cache_dir=cache_dir), base_url=HOST), session_id)
    assert again == first and plot.computed == 1
