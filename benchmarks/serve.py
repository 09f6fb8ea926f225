"""`python -m benchmarks serve`: the session inspector's pages over a 10,000-entry session.

The session is written by a real context engine: 2,000 turns of a user message and its turn record,
a tool call and its result, and the answer with the provider's usage (2,000 requests). Pages are
fetched through the ASGI application in process (no network), each timing the whole response.

- `serve_session_page_ms_10k`: the session's page with a cold inspector (the log read, indexed and
  the newest timeline page rendered); `serve_session_page_warm_ms_10k` with the log already read.
- `serve_request_layers_ms`: one request's layers (rebuilt, laid out, both sides' cache figures) once
  the simulator has replayed it (the page's plot replays the branch's newest 200 requests);
  `serve_request_layers_cold_ms_10k`: the same for a request far from any replay (the simulator
  starts 12 requests earlier); `serve_requests_series_ms_10k`: the plot's data (the newest 200
  requests rebuilt, laid out and replayed), cold.

This session never compacts, so its last requests carry all 10,000 entries (about 225,000 tokens by
the estimator, more than a real context window): the request figures are an upper bound.

The cold plot: a 20,000-entry session written like the one below (no compaction, so each of the newest
200 requests carries every turn), its plot's data asked of a fresh server each time, over a cache folder:
`serve_plot_ms_20k_first` with no file yet (computed and kept), `serve_plot_ms_20k_cold` with the file
(goal: under 2 s), `serve_plot_ms_20k_cold_append` with one turn appended since (the file extended).

At scale, a 100,000-entry session (20,000 turns, no compaction, a 10 MB tool result in its last turns)
written fast (the first turn by a real engine, the rest appended as the engine would), served by
`lamina serve`'s application in a server process of its own (uvicorn, over loopback):

- `serve_plot_ms_100k_cold`, `_warm`, `_append`: the plot's data (`/api/sessions/{id}/requests`, the
  request every session page makes and makes again on each live update) with a fresh server, asked
  again, and after one more turn is appended (the log read again, the series extended by the new
  request). Goal: warm under 50 ms.
- `serve_page_bytes_max_100k`: the largest page of that session, over the sessions list, the session
  page, its live fragment, every timeline page, every entry's page and the pages of the first, middle
  and last requests. Goal: no page over 2 MB.
- `serve_rss_mb_100k`: what 50 live followers add to the server's memory: its peak resident size while
  they follow 5 changes, less its peak while one follower follows 5 changes (the note gives both and
  the size before); each follower does what the page does on a change (the live fragment, then the
  plot's data). Goal: under 100 MB.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from starlette.testclient import TestClient

from benchmarks import Figure
from benchmarks._scenario import TOOLS, stable_source
from lamina.engine import ContextEngine
from lamina.pricing import cost_of
from lamina.serve import create_app
from lamina.session import LocalSessionStore
from lamina.session._entries import AssistantMessage, ToolCall, ToolResult, TurnRecord, Usage, UserMessage
from lamina.session._protocol import SessionLog

HOST = "http://127.0.0.1:8765"


def _session(root: Path, entries: int) -> tuple[LocalSessionStore, str]:
    workspace = root / "ws"
    workspace.mkdir(parents=True)
    (workspace / "AGENTS.md").write_text("# Rules\n- Run the tests.\n")
    store = LocalSessionStore(root / "store")
    session = store.create(cwd=str(workspace))
    engine = ContextEngine(session, stable_source=stable_source(workspace), tools=TOOLS)
    for n in range(entries // 5):
        turn = engine.prepare_turn(f"request {n}: fix the check in module_{n}.py")
        engine.record(ToolCall(call_id=f"c{n}", name="Read", input={"path": f"module_{n}.py"}))
        engine.record(ToolResult(call_id=f"c{n}", name="Read", content="def check():\n    return True\n" * 8))
        usage = Usage(input=40, output=12, cache_read=2_000 + 60 * n, cache_write=60)
        engine.record(AssistantMessage(text=f"Fixed module_{n}.py.", model="claude-sonnet-5", usage=usage))
        engine.commit(turn)
    session.close()
    return store, session.id


BIG_RESULT_BYTES = 10_000_000
FOLLOWERS = 5 * 10
CHANGES = 5


def _fast_session(root: Path, entries: int) -> tuple[LocalSessionStore, str]:
    """A session of `entries` entries: the first turn by a real engine, then turns appended as it records them."""
    workspace = root / "ws"
    workspace.mkdir(parents=True)
    (workspace / "AGENTS.md").write_text("# Rules\n- Run the tests.\n")
    store = LocalSessionStore(root / "store")
    session = store.create(cwd=str(workspace))
    engine = ContextEngine(session, stable_source=stable_source(workspace), tools=TOOLS)
    turn = engine.prepare_turn("request 0: fix the check in module_0.py")
    engine.record(
        AssistantMessage(text="Fixed module_0.py.", model="claude-sonnet-5", usage=Usage(input=40, output=12))
    )
    engine.commit(turn)
    record = next(e for e in session.entries() if isinstance(e, TurnRecord))
    turns = entries // 5
    for n in range(1, turns):
        big = n == turns - 3
        _append_turn(session, record, n, content="x" * BIG_RESULT_BYTES if big else None)
        if n % 1_000 == 0:
            session.flush()
    session.close()
    return store, session.id


def _append_turn(session: SessionLog, record: TurnRecord, n: int, *, content: str | None = None) -> None:
    user = session.append(UserMessage(text=f"request {n}: fix the check in module_{n}.py"))
    session.append(
        TurnRecord(
            turn_id=f"turn-{n}",
            user_entry_id=user.id,
            stable_digest=record.stable_digest,
            stable_version=record.stable_version,
            volatile=record.volatile,
        )
    )
    session.append(ToolCall(call_id=f"c{n}", name="Read", input={"path": f"module_{n}.py"}))
    text = content if content is not None else "def check():\n    return True\n" * 8
    session.append(ToolResult(call_id=f"c{n}", name="Read", content=text))
    usage = Usage(input=40, output=12, cache_read=2_000 + 60 * n, cache_write=60)
    session.append(AssistantMessage(text=f"Fixed module_{n}.py.", model="claude-sonnet-5", usage=usage))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_SERVER = """
import sys, uvicorn
from lamina.pricing import cost_of
from lamina.serve import create_app
from lamina.session import LocalSessionStore
from pathlib import Path
cache = Path(sys.argv[3]) if len(sys.argv) > 3 else None
store = LocalSessionStore(sys.argv[1])
app = create_app(store, port=int(sys.argv[2]), poll_seconds=0.2, prices=cost_of, cache_dir=cache)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
"""


@contextmanager
def _server(store: LocalSessionStore, cache_dir: Path | None = None) -> Iterator[tuple[str, int]]:
    """`lamina serve`'s application in a process of its own (the plot's data kept in `cache_dir`); its URL, pid."""
    port = _free_port()
    argv = [sys.executable, "-c", _SERVER, str(store.root), str(port), *([str(cache_dir)] if cache_dir else [])]
    process = subprocess.Popen(argv, env=dict(os.environ))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(url + "/favicon.ico", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the inspector's server did not start") from None
                time.sleep(0.1)
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(30)


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _follow(url: str, session_id: str, updates: list[int], done: threading.Semaphore, stop: threading.Event) -> None:
    """One live page: on each change, the live fragment and then the plot's data, like `app.js`."""
    with (
        httpx.Client(base_url=url, timeout=600) as client,
        client.stream("GET", f"/sessions/{session_id}/events") as events,
    ):
        for line in events.iter_lines():
            if stop.is_set():
                return
            if line == "event: changed":
                client.get(f"/sessions/{session_id}/live").raise_for_status()
                client.get(f"/api/sessions/{session_id}/requests").raise_for_status()
                updates.append(1)
                done.release()


def _followed(
    url: str, pid: int, store: LocalSessionStore, session_id: str, record: TurnRecord, followers: int, first: int
) -> tuple[float, int]:
    """The server's peak resident size (MB) while `followers` live pages follow `CHANGES` appended turns."""
    peak = [_rss_mb(pid)]
    stop = threading.Event()
    done = threading.Semaphore(0)
    updates: list[int] = []
    pages = [
        threading.Thread(target=_follow, args=(url, session_id, updates, done, stop), daemon=True)
        for _ in range(followers)
    ]
    for page in pages:
        page.start()

    def sample() -> None:
        while not stop.is_set():
            peak.append(_rss_mb(pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    time.sleep(2)  # every follower connected
    for change in range(CHANGES):
        with store.open(session_id) as session:
            _append_turn(session, record, first + change)
        for _ in range(followers):
            if not done.acquire(timeout=600):
                break
    stop.set()
    sampler.join(5)
    return max(peak), len(updates)


def _at_scale(root: Path, entries: int, label: str, progress: Callable[[str], None]) -> list[Figure]:
    progress(f"writing a {entries:,}-entry session (no compaction, a 10 MB tool result)")
    store, session_id = _fast_session(root, entries)
    with _server(store) as (url, pid), httpx.Client(base_url=url, timeout=3_600) as client:
        plot = f"/api/sessions/{session_id}/requests"

        def fetch(path: str) -> httpx.Response:
            response = client.get(path)
            assert response.status_code == 200, (path, response.status_code)
            return response

        progress("the plot's data, cold (the newest 200 requests rebuilt and replayed)")
        cold = _timed(lambda: fetch(plot))
        warm = [_timed(lambda: fetch(plot)) for _ in range(9)]
        progress("one turn appended: the plot's data again")
        with store.open(session_id) as session:
            record = next(e for e in reversed(session.entries()) if isinstance(e, TurnRecord))
            _append_turn(session, record, 1_000_000)
        appended = _timed(lambda: fetch(plot))
        progress("every page's size")
        detail = fetch(f"/api/sessions/{session_id}").json()
        path_entries = detail["path_entries"]
        pages = ["/", f"/sessions/{session_id}", f"/sessions/{session_id}/live"]
        pages += [f"/sessions/{session_id}?page={p}" for p in range((path_entries + 299) // 300)]
        ids = [
            e["id"]
            for p in range(0, path_entries, 1_000)
            for e in fetch(f"/api/sessions/{session_id}/entries?offset={p}&limit=1000").json()["entries"]
        ]
        pages += [f"/sessions/{session_id}/entries/{i}" for i in ids]
        requests = detail["session"]["requests"]
        pages += [f"/sessions/{session_id}/requests/{i}" for i in (0, requests // 2, requests - 1)]
        largest = max((len(fetch(p).content), p) for p in pages)
        fetch(f"/sessions/{session_id}/live")
        baseline = _rss_mb(pid)
        progress(f"one live follower, {CHANGES} changes")
        one, _ = _followed(url, pid, store, session_id, record, 1, 2_000_000)
        progress(f"{FOLLOWERS} live followers, {CHANGES} changes")
        many, updates = _followed(url, pid, store, session_id, record, FOLLOWERS, 3_000_000)
    return [
        Figure(f"serve_plot_ms_{label}_cold", _ms([cold]), "ms", note="fresh server: 200 requests rebuilt"),
        Figure(f"serve_plot_ms_{label}_warm", _ms(warm), "ms", note="goal: under 50 ms"),
        Figure(
            f"serve_plot_ms_{label}_append", _ms([appended]), "ms", note="one turn appended: log read, series extended"
        ),
        Figure(
            f"serve_page_bytes_max_{label}",
            largest[0],
            "bytes",
            note=f"over {len(pages):,} pages, largest {largest[1].split('?')[0].rsplit('/', 2)[-2]}; goal: ≤ 2,000,000",
        ),
        Figure(
            f"serve_rss_mb_{label}",
            round(many - one, 1),
            "MB",
            note=f"peak with {FOLLOWERS} followers {many:.0f} MB, with one {one:.0f} MB, before {baseline:.0f} MB; "
            f"{updates} of {FOLLOWERS * CHANGES} updates seen; goal: under 100 MB",
        ),
    ]


COLD_ENTRIES = 20_000


def _cold_plot(root: Path, progress: Callable[[str], None]) -> list[Figure]:
    """The plot's data of a 20,000-entry session from a fresh server: first ever, then with the file kept on disk."""
    progress(f"writing a {COLD_ENTRIES:,}-entry session for the cold plot")
    store, session_id = _fast_session(root, COLD_ENTRIES)
    cache = root / "plot-cache"
    plot = f"/api/sessions/{session_id}/requests"

    def fresh_server_plot() -> float:
        with _server(store, cache) as (url, _), httpx.Client(base_url=url, timeout=3_600) as client:
            return _timed(lambda: client.get(plot).raise_for_status())

    progress("the plot's data, the first time (computed, kept on disk)")
    first = fresh_server_plot()
    progress("the plot's data from a fresh server (read from disk)")
    cold = [fresh_server_plot() for _ in range(3)]
    progress("one turn appended, the plot's data from a fresh server (the file extended)")
    with store.open(session_id) as session:
        record = next(e for e in reversed(session.entries()) if isinstance(e, TurnRecord))
        _append_turn(session, record, 2_000_000)
    appended = fresh_server_plot()
    return [
        Figure("serve_plot_ms_20k_first", _ms([first]), "ms", note="no file yet: 200 requests rebuilt and replayed"),
        Figure("serve_plot_ms_20k_cold", _ms(cold), "ms", note="fresh server, the file on disk; goal: under 2,000"),
        Figure(
            "serve_plot_ms_20k_cold_append",
            _ms([appended]),
            "ms",
            note="fresh server, one turn appended since the file: the new request replayed 12 requests warm",
        ),
    ]


def _ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1e3, 2)


def _timed(fetch: Callable[[], object]) -> float:
    started = time.perf_counter()
    fetch()
    return time.perf_counter() - started


def run(*, quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    repeats = 3 if quick else 7
    with tempfile.TemporaryDirectory(prefix="lamina-bench-serve-") as tmp:
        cold_plot = _cold_plot(Path(tmp) / "cold", progress)
        scale = _at_scale(Path(tmp) / "scale", 10_000 if quick else 100_000, "10k" if quick else "100k", progress)
        progress("writing a 10,000-entry session")
        store, session_id = _session(Path(tmp), 10_000)
        page = f"/sessions/{session_id}"

        def get(client: TestClient, url: str) -> None:
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)

        progress("session page, cold and warm")
        cold: list[float] = []
        warm: list[float] = []
        for _ in range(repeats):
            client = TestClient(create_app(store, prices=cost_of), base_url=HOST)
            cold.append(_timed(lambda c=client: get(c, page)))  # type: ignore[misc]
            warm.append(_timed(lambda c=client: get(c, page)))  # type: ignore[misc]
        client = TestClient(create_app(store, prices=cost_of), base_url=HOST)
        requests = client.get(f"/api/sessions/{session_id}").json()["session"]["requests"]
        progress(f"the plot's data (the newest 200 of {requests:,} requests), cold")
        series = [_timed(lambda: get(client, f"/api/sessions/{session_id}/requests"))]
        progress("one request's layers, its replay done")
        layers: list[float] = []
        for i in range(repeats * 3):
            url = f"/api/sessions/{session_id}/requests/{requests - 1 - 7 * i}"
            layers.append(_timed(lambda u=url: get(client, u)))  # type: ignore[misc]
        progress("one request's layers, cold")
        layers_cold: list[float] = []
        for i in range(repeats):
            url = f"/api/sessions/{session_id}/requests/{requests - 250 - 97 * i}"
            layers_cold.append(_timed(lambda u=url: get(client, u)))  # type: ignore[misc]
    return [
        Figure("serve_session_page_ms_10k", _ms(cold), "ms", note="cold: log read, indexed, newest page rendered"),
        Figure("serve_session_page_warm_ms_10k", _ms(warm), "ms", note="the log already read"),
        Figure("serve_request_layers_ms", _ms(layers), "ms", note="a request of the 10k session the plot replayed"),
        Figure("serve_request_layers_cold_ms_10k", _ms(layers_cold), "ms", note="13 requests replayed first"),
        Figure("serve_requests_series_ms_10k", _ms(series), "ms", note="the plot's data: 200 requests, cold"),
        *cold_plot,
        *scale,
    ]
