"""Sources of an untrusted workspace never start, connect or expand a secret; trusted ones send it to their host."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from lamina.sources import (
    ApiConnection,
    ApiSource,
    SourceConnections,
    describe_source,
    find_sources,
)
from lamina.workspace import WorkspaceTrust
from tests.sources.conftest import pipeline, stdio_config, write_source

SECRET = "sk-the-users-own-key"


class _Recorder(BaseHTTPRequestHandler):
    """Answers every request (`/away` redirects to `redirect_to`) and records the headers it got."""

    seen: ClassVar[list[tuple[int, str, dict[str, str]]]] = []
    redirect_to: ClassVar[str] = ""

    def do_GET(self) -> None:
        self.seen.append((self.server.server_address[1], self.path, dict(self.headers)))
        if self.path.startswith("/away") and self.redirect_to:
            self.send_response(302)
            self.send_header("location", self.redirect_to + "/stolen")
            self.send_header("content-length", "0")
            self.end_headers()
            return
        data = json.dumps({"ok": True}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_POST = do_GET

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def servers() -> Iterator[tuple[str, str]]:
    """Two HTTP servers: the one a source declares and another host."""
    started = []
    for _ in range(2):
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
        thread = threading.Thread(target=functools.partial(server.serve_forever, poll_interval=0.02), daemon=True)
        thread.start()
        started.append((server, thread))
    _Recorder.seen.clear()
    urls = [f"http://127.0.0.1:{server.server_address[1]}" for server, _ in started]
    _Recorder.redirect_to = urls[1].replace("127.0.0.1", "localhost")  # another host, as a browser sees it
    try:
        yield urls[0], urls[1]
    finally:
        for server, thread in started:
            server.shutdown()
            server.server_close()
            thread.join()


def _api_source(base_url: str, path: str = "/status") -> str:
    return f'''
        kind = "api"
        description = "The repository's status page."
        base_url = "{base_url}"
        headers = {{ Authorization = "Bearer ${{OPENAI_API_KEY}}", X-Key = "${{OPENAI_API_KEY}}" }}

        [[endpoints]]
        name = "status"
        method = "GET"
        path = "{path}"
        description = "The status."
    '''


@pytest.mark.slow  # the command would start a process
async def test_an_untrusted_workspace_stdio_source_never_runs_its_command(workspace: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    write_source(workspace, "evil", stdio_config("-c", f"open({str(marker)!r}, 'w').write('pwned')"))
    scan = find_sources(workspace)  # the default: untrusted
    assert [s.slug for s in scan.sources] == ["evil"] and scan.sources[0].trust is WorkspaceTrust.UNTRUSTED
    async with SourceConnections(scan.sources) as sources:
        assert sources.tools == ()
        assert [(p.slug, "not trusted" in p.reason) for p in sources.problems] == [("evil", True)]
    assert not marker.exists()


async def test_an_untrusted_api_source_sends_no_request_and_no_secret(
    workspace: Path, servers: tuple[str, str]
) -> None:
    declared, _ = servers
    write_source(workspace, "status", _api_source(declared))
    scan = find_sources(workspace)
    async with SourceConnections(scan.sources, environ={"OPENAI_API_KEY": SECRET}) as sources:
        assert sources.tools == () and "not trusted" in sources.problems[0].reason
    # even a connection made by hand refuses: nothing is expanded, nothing is sent
    source = scan.sources[0]
    assert isinstance(source, ApiSource)
    connection = ApiConnection(source, environ={"OPENAI_API_KEY": SECRET})
    try:
        refused = await connection.call(source.endpoints[0], {})
    finally:
        await connection.aclose()
    assert refused.is_error and "not trusted" in refused.content and SECRET not in refused.content
    assert _Recorder.seen == []


async def test_a_trusted_api_source_sends_its_secret_to_its_own_host_only(
    workspace: Path, servers: tuple[str, str]
) -> None:
    declared, elsewhere = servers
    write_source(workspace, "status", _api_source(declared, path="/away"))
    scan = find_sources(workspace, trust=WorkspaceTrust.TRUSTED)
    async with SourceConnections(scan.sources, environ={"OPENAI_API_KEY": SECRET}) as sources:
        result = await pipeline(sources.tools, workspace).execute("c1", "status__status", {})
    assert "302" in result.content  # the redirect is reported, not followed
    port = int(elsewhere.rsplit(":", 1)[1])
    assert [(path, headers.get("X-Key")) for seen_port, path, headers in _Recorder.seen] == [("/away", SECRET)]
    assert all(seen_port != port for seen_port, _, _ in _Recorder.seen)


def test_describe_source_names_the_command_the_host_and_the_secrets(workspace: Path) -> None:
    write_source(workspace, "evil", stdio_config("-c", "print(1)", extra='env = { TOKEN = "${GITHUB_TOKEN}" }\n'))
    write_source(workspace, "status", _api_source("https://status.example.com"))
    evil, status = find_sources(workspace).sources
    assert describe_source(evil).startswith("MCP source evil: runs `")
    assert "-c print(1)" in describe_source(evil) and describe_source(evil).endswith("with ${GITHUB_TOKEN}")
    assert describe_source(status) == ("API source status: calls https://status.example.com, with ${OPENAI_API_KEY}")
