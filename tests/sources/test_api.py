"""API sources against a real local HTTP server (stdlib `http.server` in a thread)."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from lamina.sources import Source, SourceConnections, find_sources
from lamina.sources._tool import MAX_DESCRIPTION
from lamina.workspace import WorkspaceTrust
from tests.sources.conftest import pipeline, write_source


class _Handler(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str, dict[str, str], str]]] = []

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        self.seen.append((self.command, self.path, dict(self.headers), body))
        if self.path.startswith("/boom"):
            self._send(500, "text/plain", b"kaput")
        elif self.path.startswith("/repos/"):
            payload = {"path": self.path, "body": json.loads(body) if body else None}
            self._send(200, "application/json", json.dumps(payload).encode())
        else:
            self._send(404, "application/json", b'{"message":"Not Found"}')

    def _send(self, status: int, content_type: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:  # keep the test output quiet
        pass


@pytest.fixture
def api_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    # a short poll interval: `shutdown()` waits up to one interval (0.5 s by default), once per test
    thread = threading.Thread(target=functools.partial(server.serve_forever, poll_interval=0.02), daemon=True)
    thread.start()
    _Handler.seen.clear()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _trusted(workspace: Path) -> tuple[Source, ...]:
    return find_sources(workspace, trust=WorkspaceTrust.TRUSTED).sources


def _config(base_url: str) -> str:
    return f'''
        kind = "api"
        description = "A code host."
        base_url = "{base_url}"
        headers = {{ Authorization = "Bearer ${{LAMINA_TEST_TOKEN}}" }}

        [[endpoints]]
        name = "get_repo"
        method = "GET"
        path = "/repos/{{owner}}/{{repo}}"
        description = "Get one repository by owner and name. Returns stars, forks and the default branch."
        params.type = "object"
        params.required = ["owner", "repo"]
        params.properties.owner = {{ type = "string" }}
        params.properties.repo = {{ type = "string" }}
        params.properties.page = {{ type = "integer" }}

        [[endpoints]]
        name = "create_issue"
        method = "POST"
        path = "/repos/{{owner}}/issues"
        description = "Open an issue."
        params.required = ["owner", "title"]
        params.properties = {{ owner = {{ type = "string" }}, title = {{ type = "string" }} }}

        [[endpoints]]
        name = "missing"
        method = "GET"
        path = "/nowhere"
        description = "Always 404."

        [[endpoints]]
        name = "boom"
        method = "GET"
        path = "/boom"
        description = "Always 500."
        '''


@pytest.mark.slow
async def test_api_round_trip_with_path_query_headers_and_json_body(workspace: Path, api_url: str) -> None:
    write_source(workspace, "forge", _config(api_url))
    async with SourceConnections(_trusted(workspace), environ={"LAMINA_TEST_TOKEN": "s3cret"}) as sources:
        specs = {tool.spec.name: tool.spec for tool in sources.tools}
        assert list(specs) == ["forge__get_repo", "forge__create_issue", "forge__missing", "forge__boom"]
        assert all(len(spec.description) <= MAX_DESCRIPTION for spec in specs.values())
        assert specs["forge__get_repo"].description == (
            "Get one repository by owner and name. Read sources/forge/guide.md before first use."
        )
        assert [tool.read_only for tool in sources.tools] == [True, False, True, True]
        tools = pipeline(sources.tools, workspace)
        got = await tools.execute("c1", "forge__get_repo", {"owner": "a b", "repo": "x/y", "page": 2})
        assert not got.is_error
        assert got.content == 'HTTP 200 OK\n\n{\n  "path": "/repos/a%20b/x%2Fy?page=2",\n  "body": null\n}'
        method, path, headers, _ = _Handler.seen[-1]
        assert (method, path, headers["Authorization"]) == ("GET", "/repos/a%20b/x%2Fy?page=2", "Bearer s3cret")
        posted = await tools.execute("c2", "forge__create_issue", {"owner": "me", "title": "Bug"})
        assert json.loads(posted.content.split("\n\n", 1)[1]) == {"path": "/repos/me/issues", "body": {"title": "Bug"}}


@pytest.mark.slow
async def test_http_error_statuses_are_tool_errors(workspace: Path, api_url: str) -> None:
    write_source(workspace, "forge", _config(api_url))
    async with SourceConnections(_trusted(workspace), environ={"LAMINA_TEST_TOKEN": "t"}) as sources:
        tools = pipeline(sources.tools, workspace)
        missing = await tools.execute("c1", "forge__missing", {})
        assert missing.is_error
        assert (
            missing.content
            == 'source forge: GET /nowhere answered HTTP 404 Not Found\n\n{\n  "message": "Not Found"\n}'
        )
        boom = await tools.execute("c2", "forge__boom", {})
        assert boom.is_error
        assert boom.content == "source forge: GET /boom answered HTTP 500 Internal Server Error\n\nkaput"


@pytest.mark.slow
async def test_unreachable_api_and_missing_variable_are_tool_errors(workspace: Path, api_url: str) -> None:
    write_source(workspace, "forge", _config("http://127.0.0.1:9"))
    async with SourceConnections(_trusted(workspace), environ={"LAMINA_TEST_TOKEN": "t"}) as sources:
        down = await pipeline(sources.tools, workspace).execute("c1", "forge__missing", {})
        assert down.is_error and down.content.startswith("source forge: GET /nowhere failed: ConnectError")
    async with SourceConnections(_trusted(workspace), environ={}) as sources:
        unset = await pipeline(sources.tools, workspace).execute("c1", "forge__missing", {})
        assert unset.is_error
        assert unset.content.startswith("source forge: environment variable LAMINA_TEST_TOKEN is not set")
