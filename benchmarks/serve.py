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
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from starlette.testclient import TestClient

from benchmarks import Figure
from benchmarks._scenario import TOOLS, stable_source
from lamina.cli._prices import cost_of
from lamina.engine import ContextEngine
from lamina.serve import create_app
from lamina.session._entries import AssistantMessage, ToolCall, ToolResult, Usage
from lamina.session._store import LocalSessionStore

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


def _ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1e3, 2)


def _timed(fetch: Callable[[], object]) -> float:
    started = time.perf_counter()
    fetch()
    return time.perf_counter() - started


def run(*, quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    repeats = 3 if quick else 7
    with tempfile.TemporaryDirectory(prefix="lamina-bench-serve-") as tmp:
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
    ]
