"""The inspector on a network (issue 42, item 8): a token off loopback, a Host check that follows the address.

Before, `create_app(store, host="0.0.0.0")` turned the Host check off and served every session, tool
output included, to any Host header with no authentication.
"""

from __future__ import annotations

import socket

import pytest
from starlette.testclient import TestClient

from lamina.errors import UsageError
from lamina.serve import create_app, needs_token
from tests.serve.conftest import Stored

TOKEN = "k3y-Of-The-Test_0123456789abcdefghijklmnop"
LAN = "http://192.0.2.10:8765"
"""How a machine on the network names the server (a documentation address: no request leaves the test)."""


@pytest.fixture(scope="module")
def exposed(stored: Stored) -> TestClient:
    """The inspector as `lamina serve --host 0.0.0.0` runs it, asked by another machine."""
    return TestClient(create_app(stored.store, host="0.0.0.0", token=TOKEN), base_url=LAN, follow_redirects=False)


ANSWER = {"/favicon.ico": 204, "/no/such/route": 404}
"""What a route answers with the token, where it is not 200."""


def routes(stored: Stored) -> list[str]:
    """One address of every route: pages, the JSON API, its OpenAPI document, static files, and no route at all."""
    rich = stored.rich.id
    return [
        "/",
        f"/sessions/{rich}",
        f"/sessions/{rich}/live",
        f"/sessions/{rich}/events",
        f"/sessions/{rich}/requests/0",
        f"/sessions/{rich}/requests/0/body.json",
        "/api/sessions",
        f"/api/sessions/{rich}",
        f"/api/sessions/{rich}/entries",
        f"/api/sessions/{rich}/requests",
        "/api/openapi.json",
        "/static/app.js",
        "/static/vendor/uPlot.iife.min.js",
        "/favicon.ico",
        "/no/such/route",
    ]


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "192.0.2.10", "inspector.lan"])
def test_an_inspector_off_loopback_cannot_be_made_without_a_token(stored: Stored, host: str) -> None:
    with pytest.raises(UsageError, match="needs a token"):
        create_app(stored.store, host=host)
    with pytest.raises(UsageError, match="empty"):
        create_app(stored.store, host=host, token="")


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_alone_needs_no_token(host: str) -> None:
    assert not needs_token(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "192.168.1.5", "fe80::1", "inspector.lan"])
def test_every_other_address_needs_a_token(host: str) -> None:
    assert needs_token(host)


def test_every_route_refuses_a_request_without_the_token(exposed: TestClient, stored: Stored) -> None:
    for url in routes(stored):
        for headers in ({}, {"authorization": "Bearer wrong"}, {"cookie": "lamina_token_8765=wrong"}):
            response = exposed.get(url, headers=headers)
            assert response.status_code == 401, (url, headers)
            assert stored.rich.id not in response.text.replace(url, "")  # nothing of the store is shown
            assert response.headers["www-authenticate"] == 'Bearer realm="lamina serve"'
            assert "content-security-policy" in response.headers
        assert exposed.get(url, params={"token": TOKEN[:-1] + "X"}).status_code == 401
        assert exposed.head(url).status_code == 401
    # what a token that is no ASCII does to the comparison: a refusal, not an error
    assert exposed.get("/api/sessions", params={"token": "é" * 10}).status_code == 401


def test_every_route_answers_with_the_token(exposed: TestClient, stored: Stored) -> None:
    for url in routes(stored):
        if url.endswith("/events"):
            continue  # an endless stream; the token check comes before it (the test above)
        response = exposed.get(url, headers={"authorization": f"Bearer {TOKEN}"})
        assert response.status_code == ANSWER.get(url, 200), url


def test_the_printed_address_sets_a_cookie_and_the_links_work(stored: Stored) -> None:
    client = TestClient(create_app(stored.store, host="0.0.0.0", token=TOKEN, port=9123), base_url=LAN)
    first = client.get(f"/sessions/{stored.rich.id}", params={"token": TOKEN, "page": "0"}, follow_redirects=False)
    # the token leaves the address bar: a page that keeps it in a cookie and opens the same address without it
    # (a refresh from this origin, not a redirect, which would not carry a SameSite=Strict cookie after a link
    # followed from another site)
    assert first.status_code == 200
    assert f"<meta http-equiv='refresh' content='0; url=/sessions/{stored.rich.id}?page=0'>" in first.text
    assert TOKEN not in first.text and stored.rich.id + "</" not in first.text
    cookie = first.headers["set-cookie"]
    assert cookie.startswith(f"lamina_token_9123={TOKEN};")  # named by the port: cookies do not tell ports apart
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert first.headers["cache-control"] == "no-store"
    assert first.headers["content-security-policy"]  # the page holds no script: a refresh and a link
    quoted = client.get("/", params={"token": TOKEN, "q": "x'><script>"}, follow_redirects=False).text
    assert "<script>" not in quoted and "url=/?q=x%27%3E%3Cscript%3E'>" in quoted  # the address as sent, quoted
    # an address of two slashes stays on this site: the refresh never names another host
    elsewhere = client.get(f"{LAN}//evil.example/x", params={"token": TOKEN}, follow_redirects=False).text
    assert "url=/evil.example/x'" in elsewhere and "url=//" not in elsewhere
    # then every link of the page, its scripts and its API calls, goes through on the cookie alone
    client.cookies.set("lamina_token_9123", TOKEN)
    page = client.get(f"/sessions/{stored.rich.id}")
    assert page.status_code == 200 and stored.rich.id in page.text
    for url in routes(stored):
        if not url.endswith("/events"):
            assert client.get(url).status_code == ANSWER.get(url, 200), url


def test_the_json_api_takes_the_token_in_its_address(exposed: TestClient, stored: Stored) -> None:
    response = exposed.get("/api/sessions", params={"token": TOKEN})
    assert response.status_code == 200 and stored.rich.id in response.text
    document = exposed.get("/api/openapi.json", params={"token": TOKEN}).json()
    assert document["security"] == [{"bearer": []}, {"query": []}]
    assert set(document["components"]["securitySchemes"]) == {"bearer", "query"}
    assert all("401" in op["get"]["responses"] for op in document["paths"].values())


@pytest.mark.parametrize(
    ("bind", "host", "allowed"),
    [
        ("0.0.0.0", "192.0.2.10:8765", True),  # any address of the machine: an address is no name to rebind
        ("0.0.0.0", "127.0.0.1:8765", True),
        ("0.0.0.0", "localhost:8765", True),
        ("0.0.0.0", socket.gethostname(), True),  # the machine's own name
        ("0.0.0.0", "evil.example:8765", False),  # a DNS rebinding page names its own host
        ("0.0.0.0", "[2001:db8::1]:8765", False),  # 0.0.0.0 listens on IPv4 only
        ("0.0.0.0", "", False),
        ("::", "[2001:db8::1]:8765", True),
        ("::", "192.0.2.10", True),
        ("::", "evil.example", False),
        ("192.0.2.10", "192.0.2.10:8765", True),  # one address: that one
        ("192.0.2.10", "192.0.2.11:8765", False),
        ("192.0.2.10", "localhost", False),
        ("192.0.2.10", "evil.example", False),
        ("2001:db8::1", "[2001:DB8:0::1]:8765", True),
        ("inspector.lan", "inspector.lan:8765", True),  # a name: that name
        ("inspector.lan", "evil.example", False),
    ],
)
def test_the_host_allow_list_follows_the_address_bound(stored: Stored, bind: str, host: str, allowed: bool) -> None:
    client = TestClient(create_app(stored.store, host=bind, token=TOKEN), base_url=LAN)
    response = client.get("/api/sessions", headers={"host": host, "authorization": f"Bearer {TOKEN}"})
    assert response.status_code == (200 if allowed else 400), (bind, host)


def test_more_names_are_answered_when_asked_for(stored: Stored) -> None:
    app = create_app(stored.store, host="0.0.0.0", token=TOKEN, extra_hosts=("inspector.internal",))
    client = TestClient(app, base_url="http://inspector.internal", headers={"authorization": f"Bearer {TOKEN}"})
    assert client.get("/api/sessions").status_code == 200
    assert client.get("/api/sessions", headers={"host": "evil.example"}).status_code == 400


def test_a_token_is_checked_on_loopback_too_when_given(stored: Stored) -> None:
    client = TestClient(create_app(stored.store, token=TOKEN), base_url="http://127.0.0.1:8765")
    assert client.get("/api/sessions").status_code == 401
    assert client.get("/api/sessions", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200
