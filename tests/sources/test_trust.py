"""Sources of an untrusted workspace never start, connect or expand a secret; trusted ones send it to their host."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

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
from tests.support.recorder import Recorder, recording_server

SECRET = "sk-the-users-own-key"


@pytest.fixture
def servers() -> Iterator[tuple[Recorder, Recorder]]:
    """The server a source declares, and another host its redirect points to."""
    with recording_server() as declared, recording_server() as elsewhere:
        declared.redirect_to = elsewhere.url.replace("127.0.0.1", "localhost")  # another host name too
        yield declared, elsewhere


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
    workspace: Path, servers: tuple[Recorder, Recorder]
) -> None:
    declared, _ = servers
    write_source(workspace, "status", _api_source(declared.url))
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
    assert declared.seen == []


async def test_a_trusted_api_source_sends_its_secret_to_its_own_host_only(
    workspace: Path, servers: tuple[Recorder, Recorder]
) -> None:
    declared, elsewhere = servers
    write_source(workspace, "status", _api_source(declared.url, path="/away"))
    scan = find_sources(workspace, trust=WorkspaceTrust.TRUSTED)
    async with SourceConnections(scan.sources, environ={"OPENAI_API_KEY": SECRET}) as sources:
        result = await pipeline(sources.tools, workspace).execute("c1", "status__status", {})
    assert "302" in result.content  # the redirect is reported, not followed
    assert [(path, headers.get("x-key")) for path, headers in declared.seen] == [("/away", SECRET)]
    assert elsewhere.seen == []


def test_describe_source_names_the_command_the_host_and_the_secrets(workspace: Path) -> None:
    write_source(workspace, "evil", stdio_config("-c", "print(1)", extra='env = { TOKEN = "${GITHUB_TOKEN}" }\n'))
    write_source(workspace, "status", _api_source("https://status.example.com"))
    evil, status = find_sources(workspace).sources
    assert describe_source(evil).startswith("MCP source evil: runs `")
    assert "-c print(1)" in describe_source(evil) and describe_source(evil).endswith("with ${GITHUB_TOKEN}")
    assert describe_source(status) == ("API source status: calls https://status.example.com, with ${OPENAI_API_KEY}")
