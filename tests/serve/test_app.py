"""The inspector over HTTP: read-only, escaped, confined to the store, host-checked, live."""

from __future__ import annotations

import re
import threading
import time

import httpx
import pytest
from starlette.testclient import TestClient

from lamina.pricing import cost_of
from lamina.serve import create_app
from lamina.serve._security import CSP, host_name
from lamina.session import UserMessage
from tests.serve.conftest import Running, Stored
from tests.serve.sessions import HOSTILE_MARKUP, HOSTILE_SCRIPT


@pytest.fixture(scope="module")
def client(stored: Stored) -> TestClient:
    return TestClient(create_app(stored.store, prices=cost_of), base_url="http://127.0.0.1:8765")


def _body(html: str) -> str:
    """The page without the inspector's own script tags."""
    return re.sub(r'<script (type="module" )?src="/static/[^"]+"( defer)?></script>', "", html)


@pytest.mark.slow
def test_every_response_carries_a_csp_that_forbids_inline_scripts(client: TestClient, stored: Stored) -> None:
    for url in ("/", f"/sessions/{stored.rich.id}", "/api/sessions", "/static/app.js", "/sessions/nope"):
        response = client.get(url)
        assert response.headers["content-security-policy"] == CSP, url
        assert response.headers["x-content-type-options"] == "nosniff"
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP and "unsafe-eval" not in CSP
    page = client.get(f"/sessions/{stored.rich.id}").text
    # no inline script and no inline style anywhere in the inspector's own pages
    assert re.findall(r"<script(?![^>]*\bsrc=)", page) == []
    assert " style=" not in page and "<style" not in page
    assert re.search(r"<[^>]*\son[a-z]+\s*=", page) is None  # no event handler attributes


def test_hostile_session_content_is_shown_as_text(client: TestClient, stored: Stored) -> None:
    for url in ("/", f"/sessions/{stored.hostile}", f"/api/sessions/{stored.hostile}"):
        response = client.get(url)
        assert response.status_code == 200
        if url.startswith("/api/"):
            assert response.json()["session"]["title"].startswith(HOSTILE_SCRIPT)
            continue
        body = _body(response.text)
        assert "<script" not in body and "<img src=x" not in body and "</pre><script" not in body, url
        assert "&lt;script&gt;document.title=" in body
    page = _body(client.get(f"/sessions/{stored.hostile}").text)
    assert "&lt;img src=x onerror=" in page
    assert "more characters" in page and len(page) < 200_000  # the 1 MB result is cut in the timeline
    with stored.store.open(stored.hostile, writable=False) as session:
        huge = session.entries()[2]
    whole = client.get(f"/sessions/{stored.hostile}/entries/{huge.id}")
    assert whole.status_code == 200 and "x" * 1_000_000 in whole.text and "<script" not in _body(whole.text)
    assert HOSTILE_MARKUP not in page


def test_only_get_is_served(client: TestClient, stored: Stored) -> None:
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert client.request(method, f"/api/sessions/{stored.rich.id}").status_code == 405
        assert client.request(method, f"/sessions/{stored.rich.id}").status_code == 405


@pytest.mark.parametrize(
    "url",
    [
        "/sessions/..%2F..%2Fetc",
        "/api/sessions/%2E%2E",
        "/api/sessions/..%2Fstore",
        "/static/..%2F..%2Fserve%2Fapp.py",
        "/static/%2e%2e/app.py",
        "/static/..%2fapp.py",
        "/sessions/{id}/attachments/..%2F..%2Fmeta.json/thumbnail.png",
        "/sessions/{id}/attachments/" + "0" * 64 + "/thumbnail.png",
        "/sessions/{id}/entries/..%2Fmeta.json",
    ],
)
def test_no_path_outside_the_store_is_served(client: TestClient, stored: Stored, url: str) -> None:
    response = client.get(url.format(id=stored.rich.id))
    assert response.status_code in (400, 404), url
    assert b"def create_app" not in response.content and b'"leaf_id"' not in response.content


def test_thumbnails_only_for_images_the_log_attaches(client: TestClient, stored: Stored) -> None:
    with stored.store.open(stored.rich.id, writable=False) as session:
        ref = next(r for e in session.entries() if isinstance(e, UserMessage) for r in e.attachments)
    response = client.get(f"/sessions/{stored.rich.id}/attachments/{ref.sha256}/thumbnail.png")
    assert response.status_code == 200 and response.headers["content-type"] == "image/png"
    assert response.content.startswith(b"\x89PNG")
    # the same file asked for through another session is not served
    assert client.get(f"/sessions/{stored.hostile}/attachments/{ref.sha256}/thumbnail.png").status_code == 404


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1:8765", True),
        ("localhost:8765", True),
        ("[::1]:8765", True),
        ("localhost", True),
        ("evil.example:8765", False),
        ("127.0.0.1.evil.example", False),
        ("", False),
    ],
)
def test_host_header_is_checked_on_loopback(client: TestClient, host: str, allowed: bool) -> None:
    response = client.get("/api/sessions", headers={"host": host})
    assert (response.status_code == 200) is allowed, host
    assert response.headers["content-security-policy"] == CSP


def test_host_names_are_read_without_port_or_brackets() -> None:
    assert host_name("LOCALHOST:80") == "localhost"
    assert host_name("[::1]:8765") == "::1"
    assert host_name("::1") == "::1"
    assert host_name("[::1") == ""


def test_search_keeps_matching_sessions(client: TestClient, stored: Stored) -> None:
    every = client.get("/api/sessions").json()["sessions"]
    assert {stored.rich.id, stored.hostile} <= {r["id"] for r in every}
    rich = next(r for r in every if r["id"] == stored.rich.id)
    assert rich["turns"] == 5 and rich["requests"] == 6 and rich["input_tokens"] > 0 and rich["cost_usd"] > 0
    found = client.get("/api/sessions", params={"q": "WORKSPACE"}).json()["sessions"]
    # other tests of the package add sessions to the shared store: every one found holds the word, the hostile one not
    assert stored.rich.id in {r["id"] for r in found} and stored.hostile not in {r["id"] for r in found}
    assert all("workspace" in f"{r['id']} {r['title']} {r['cwd']}".lower() for r in found)
    assert "No sessions" in client.get("/", params={"q": "no such thing"}).text


def test_unknown_branch_entry_or_request_is_404(client: TestClient, stored: Stored) -> None:
    sid = stored.rich.id
    assert client.get(f"/api/sessions/{sid}", params={"leaf": "nope"}).status_code == 404
    assert client.get(f"/api/sessions/{sid}/entries/nope").status_code == 404
    assert client.get(f"/api/sessions/{sid}/requests/99").status_code == 404
    assert client.get(f"/sessions/{sid}/requests/x").status_code == 404
    assert client.get(f"/api/sessions/{sid}/entries", params={"limit": "0"}).status_code == 400
    assert client.get(f"/api/sessions/{sid}/entries", params={"offset": "x"}).json() == {
        "error": "offset must be an integer"
    }


@pytest.mark.slow
def test_events_announce_every_change_of_the_log(server: Running, stored: Stored) -> None:
    """The server-sent event stream says `changed` when an entry is appended, without a request from the page."""
    with stored.store.create(cwd="elsewhere") as session:
        session.append(UserMessage(text="first"))
        watched = session.id
    events: list[str] = []
    ready = threading.Event()

    def listen() -> None:
        with httpx.stream("GET", f"{server.url}/sessions/{watched}/events", timeout=10) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            ready.set()
            for line in response.iter_lines():
                if line.startswith("event:"):
                    events.append(line)
                    return

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    assert ready.wait(10)
    time.sleep(0.5)
    with stored.store.open(watched) as session:
        session.append(UserMessage(text="appended while watched"))
    thread.join(10)
    assert events == ["event: changed"]
    assert "appended while watched" in httpx.get(f"{server.url}/sessions/{watched}/live").text
