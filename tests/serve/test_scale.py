"""The inspector at scale: the plot's series kept and extended, pages bounded, reloads shared, damage shown."""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
import threading
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from lamina.serve import create_app
from lamina.serve._inspect import SessionIndex
from lamina.serve._reader import StoreReader
from lamina.serve._requests import SessionRequests
from lamina.serve._series import PlotSeries, series_of
from lamina.serve._shown import fit, shown_bytes
from lamina.session import (
    AssistantMessage,
    LocalSessionStore,
    PartRecord,
    SessionLog,
    ToolCall,
    ToolResult,
    TurnRecord,
    Usage,
    UserMessage,
)
from tests.conftest import examples

HOST = "http://127.0.0.1:8765"
BIDI = "\u202e"
"""RIGHT-TO-LEFT OVERRIDE: reverses what follows it on the screen."""


def _turn(session: SessionLog, n: int, *, tools: int = 1, parts: tuple[PartRecord, ...] = ()) -> None:
    user = session.append(UserMessage(text=f"request {n}"))
    record = TurnRecord(turn_id=f"t{n}", user_entry_id=user.id, stable_digest="d", stable_version=1, volatile=parts)
    session.append(record)
    for k in range(tools):
        session.append(ToolCall(call_id=f"c{n}-{k}", name="Read", input={"path": f"m{n}.py"}))
        session.append(ToolResult(call_id=f"c{n}-{k}", name="Read", content=f"line {n}\n" * (k + 1)))
    usage = Usage(input=10 + n, output=3, cache_read=100 * n, cache_write=7)
    session.append(AssistantMessage(text=f"answer {n}", model="claude-sonnet-5", usage=usage))


# -- the plot's series ------------------------------------------------------------------------------

STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("turn"), st.integers(0, 2)),
        st.tuples(st.just("branch"), st.integers(0, 10_000)),
    ),
    min_size=1,
    max_size=8,
)


@pytest.mark.slow
@settings(max_examples=examples(25, 1_000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=STEPS, limit=st.integers(1, 4))
def test_the_series_extended_on_append_is_the_full_recompute(steps: list[tuple[str, int]], limit: int) -> None:
    """After every append (or branch) the kept series equals the one computed from nothing, for both leaves."""
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalSessionStore(Path(tmp))
        with store.create(cwd="/w") as session:
            _turn(session, 0)
            session.flush()
            session_id = session.id
            plot = PlotSeries(limit=limit)
            requests: SessionRequests | None = None
            first_leaf = session.leaf_id
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
                if requests is None or not requests.extend(entries):
                    requests = SessionRequests(session_id, entries)
                index = SessionIndex(entries, leaf)
                for shown in (None, first_leaf):
                    assert plot.get(requests, index, shown) == series_of(requests, index, shown, limit=limit)
                    assert plot.get(requests, index, shown) is plot.get(requests, index, shown)  # kept


def test_appends_extend_the_series_without_computing_it_again(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    with store.create(cwd="/w") as session:
        for n in range(5):
            _turn(session, n)
        session.flush()
        session_id = session.id
    reader = StoreReader(store)
    client = TestClient(create_app(store), base_url=HOST)
    first = client.get(f"/api/sessions/{session_id}/requests").json()
    for n in range(5, 9):
        with store.open(session_id) as session:
            _turn(session, n)
        now = client.get(f"/api/sessions/{session_id}/requests").json()
        assert [r["entry_id"] for r in now["requests"][: len(first["requests"])]] == [
            r["entry_id"] for r in first["requests"]
        ]
        assert len(now["requests"]) == n + 1
    loaded = reader.load(session_id)
    whole = series_of(SessionRequests(session_id, loaded.index.entries), loaded.index, None)
    assert [r.entry_id for r in whole.requests] == [r["entry_id"] for r in now["requests"]]
    inspector = client.app.state.inspector  # type: ignore[attr-defined]
    assert inspector.reader._plots[session_id].computed == 1  # once; every append only extended it


# -- bounded pages ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_pages_stay_under_the_bound_and_a_cut_text_downloads_whole(tmp_path: Path) -> None:
    bound = 400_000
    huge = ("<b>" + BIDI + "x" * 97 + "\n") * 60_000  # 6 MB, every character of it costlier on a page than raw
    store = LocalSessionStore(tmp_path)
    with store.create(cwd="/w", title="big") as session:
        for n in range(140):  # more than one page of timeline
            _turn(session, n, tools=1, parts=(PartRecord(key="session_state", text="<s>" * 5_000),))
        session.append(ToolCall(call_id="big", name="Read", input={"path": "huge.txt"}))
        result = session.append(ToolResult(call_id="big", name="Read", content=huge))
        session.append(AssistantMessage(text="read it", model="claude-sonnet-5", usage=Usage(input=1, output=1)))
        session.flush()
        session_id = session.id
        entries = session.entries()
    client = TestClient(create_app(store, max_page_bytes=bound), base_url=HOST)
    pages = max(1, (len(entries) + 299) // 300)
    assert pages >= 2
    urls = ["/", f"/sessions/{session_id}", f"/sessions/{session_id}/live"]
    urls += [f"/sessions/{session_id}?page={p}" for p in range(pages)]
    urls += [f"/sessions/{session_id}/entries/{e.id}" for e in entries]
    urls += [f"/sessions/{session_id}/requests/{i}" for i in (0, 70, 140)]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url
        assert len(response.content) <= bound, (url, len(response.content))
    page = client.get(f"/sessions/{session_id}/entries/{result.id}").text
    link = re.search(r'<a href="([^"]+/raw)" download id="download-whole">', page)
    assert link is not None
    whole = client.get(link.group(1))
    assert whole.status_code == 200 and whole.headers["content-type"] == "text/plain; charset=utf-8"
    assert whole.headers["content-disposition"].startswith("attachment")
    assert whole.content.decode() == huge
    record = next(e for e in entries if isinstance(e, TurnRecord))
    part = client.get(f"/sessions/{session_id}/entries/{record.id}/raw", params={"part": "0"})
    assert part.text == "<s>" * 5_000
    body = client.get(f"/sessions/{session_id}/requests/140/body.json")
    assert body.status_code == 200 and body.headers["content-disposition"].startswith("attachment")
    blocks = [b for m in json.loads(body.content)["messages"] for b in m["content"] if b.get("tool_use_id") == "big"]
    assert len(json.dumps(blocks)) > bound  # the request as sent, not cut to the page's bound


@pytest.mark.slow
@settings(max_examples=examples(200), deadline=None)
@given(text=st.text(st.characters(codec="utf-8")), budget=st.integers(0, 400))
def test_fit_cuts_a_start_of_the_text_within_the_budget(text: str, budget: int) -> None:
    cut = fit(text, budget)
    assert text.startswith(cut)
    assert shown_bytes(cut) <= max(budget, 0)
    if shown_bytes(text) <= budget:
        assert cut == text


# -- shared reloads ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_change_followed_by_many_pages_is_read_and_rendered_once(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    with store.create(cwd="/w") as session:
        _turn(session, 0)
        session.flush()
        session_id = session.id
    app = create_app(store)
    inspector = app.state.inspector
    followers, changes = 30, 4

    async def follow_changes() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        statuses: list[int] = []
        async with httpx.AsyncClient(transport=transport, base_url=HOST) as client:
            for n in range(1, changes + 1):
                with store.open(session_id) as session:
                    _turn(session, n)
                answers = await asyncio.gather(
                    *(client.get(f"/sessions/{session_id}/live") for _ in range(followers)),
                    *(client.get(f"/api/sessions/{session_id}/requests") for _ in range(followers)),
                )
                statuses += [a.status_code for a in answers]
                assert all(f"request {n}" in a.text for a in answers[:followers])
        return statuses

    statuses = asyncio.run(follow_changes())
    assert set(statuses) == {200}
    assert inspector.reader.reads == changes  # one read of the log per change, shared by every page
    assert inspector.renders == changes  # one render of the live fragment per change


def test_one_read_at_a_time_when_threads_ask_together(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    with store.create(cwd="/w") as session:
        for n in range(50):
            _turn(session, n)
        session.flush()
        session_id = session.id
    reader = StoreReader(store)
    threads = 16
    for n in range(3):
        with store.open(session_id) as session:
            _turn(session, 100 + n)
        barrier = threading.Barrier(threads)
        seen: list[int] = []

        def load(barrier: threading.Barrier = barrier, seen: list[int] = seen) -> None:
            barrier.wait()
            seen.append(len(reader.load(session_id).index.entries))

        workers = [threading.Thread(target=load) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(30)
        assert len(set(seen)) == 1 and len(seen) == threads
        assert reader.reads == n + 1


# -- damage and controls ---------------------------------------------------------------------------


@pytest.fixture
def damaged(tmp_path: Path) -> tuple[LocalSessionStore, str]:
    store = LocalSessionStore(tmp_path)
    with store.create(cwd="/w") as session:
        _turn(session, 0)
        _turn(session, 1, parts=(PartRecord(key="not a block name", text="x"),))  # a part key no block has
        session.flush()
        return store, session.id


def test_a_damaged_turn_record_is_shown_as_damage_not_a_500(damaged: tuple[LocalSessionStore, str]) -> None:
    store, session_id = damaged
    client = TestClient(create_app(store), base_url=HOST, raise_server_exceptions=False)
    assert client.get(f"/sessions/{session_id}").status_code == 200
    series = client.get(f"/api/sessions/{session_id}/requests")
    assert series.status_code == 200
    first, second = series.json()["requests"]
    assert first["damage"] is None and first["simulated"]["total"] > 0
    assert "not a block name" in second["damage"] and "#1" in second["damage"]
    assert any("cannot be rebuilt" in note for note in series.json()["notes"])
    page = client.get(f"/sessions/{session_id}/requests/1")
    assert page.status_code == 200 and 'id="damage"' in page.text and "not a block name" in page.text
    api = client.get(f"/api/sessions/{session_id}/requests/1")
    assert api.status_code == 422 and "not a block name" in api.json()["error"]
    assert client.get(f"/sessions/{session_id}/requests/0").status_code == 200


@pytest.mark.slow
def test_bidi_and_control_characters_are_escaped_on_timeline_and_entry_pages(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    hostile = f"look {BIDI}txt.exe\u2066 and \x1b[2J and \u200f"
    with store.create(cwd=f"/w{BIDI}", title=f"t{BIDI}") as session:
        user = session.append(UserMessage(text=hostile))
        call = session.append(ToolCall(call_id="c", name=f"Read{BIDI}", input={"path": hostile}))
        result = session.append(ToolResult(call_id="c", name=f"Read{BIDI}", content=hostile))
        session.flush()
        session_id = session.id
    client = TestClient(create_app(store), base_url=HOST)
    pages = [
        f"/sessions/{session_id}",
        f"/sessions/{session_id}/live",
        "/",
        *(f"/sessions/{session_id}/entries/{e.id}" for e in (user, call, result)),
    ]
    for url in pages:
        text = client.get(url).text
        for raw in (BIDI, "\u2066", "\x1b", "\u200f"):
            assert raw not in text, (url, hex(ord(raw)))
    assert "&lt;U+202E&gt;txt.exe&lt;U+2066&gt;" in client.get(f"/sessions/{session_id}/entries/{result.id}").text
    assert "␛[2J" in client.get(f"/sessions/{session_id}").text


@pytest.mark.slow
def test_long_lists_are_paged_or_cut_with_a_note(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    for n in range(205):
        with store.create(cwd=f"/w{n}") as session:
            session.append(UserMessage(text=f"session {n}"))
    with store.create(cwd="/branches") as session:
        root = session.append(UserMessage(text="root"))
        for n in range(120):
            session.branch(root.id)
            session.append(UserMessage(text=f"branch {n}"))
        oldest = session.children(root.id)[0].id
        branchy = session.id
    client = TestClient(create_app(store), base_url=HOST)
    first, second = client.get("/").text, client.get("/", params={"page": "1"}).text
    assert first.count('<tr data-session="') == 200 and 'id="sessions-pager"' in first
    assert second.count('<tr data-session="') == 206 - 200
    assert client.get("/", params={"page": "2"}).status_code == 400
    page = client.get(f"/sessions/{branchy}", params={"leaf": oldest}).text
    assert page.count('<li class="branch') == 100 and 'id="more-branches"' in page
    assert f'data-leaf="{oldest}"' in page  # the shown branch is always listed
    assert len(client.get(f"/api/sessions/{branchy}").json()["branches"]) == 120
