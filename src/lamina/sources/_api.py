"""API sources: HTTP endpoints declared in `source.toml`, called with httpx (I/O: network).

Each endpoint is a tool whose input schema is the endpoint's `params`. Path placeholders are
filled from the input (URL-quoted); the other fields go in the query string (GET, HEAD, DELETE)
or as a JSON body. The result is the status line and the body (JSON pretty-printed); an HTTP
error status, a refused connection or a timeout is an error result naming the source.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import quote

from lamina.errors import MissingExtraError, ToolDefinitionError
from lamina.sources._guide import guide_path
from lamina.sources._source_config import UNTRUSTED_REASON, ApiEndpoint, ApiSource, expand_env, path_params
from lamina.sources._tool import SourceTool, make_tools, short_description, tool_name
from lamina.tools import ToolContext, ToolOutput

try:
    import httpx
except ImportError as exc:
    raise MissingExtraError.of(exc, "an API source", "http") from None

_QUERY_METHODS: Final = ("GET", "HEAD", "DELETE")


class ApiConnection:
    """The HTTP client of one API source, kept for the agent's lifetime."""

    def __init__(self, source: ApiSource, *, environ: Mapping[str, str] | None = None) -> None:
        """A connection to one API source; its HTTP client is made now, used on the first call.

        Args:
            source: The API source's configuration.
            environ: The environment `${VAR}` references are expanded from; `os.environ` unless given.
        """
        self.source = source
        self._environ = os.environ if environ is None else environ
        # redirects are not followed: the headers, `${VAR}`s expanded, go only where the source says
        self._client = httpx.AsyncClient(timeout=source.timeout, follow_redirects=False)

    async def call(self, endpoint: ApiEndpoint, input: Mapping[str, Any]) -> ToolOutput:
        """Call `endpoint` with `input`; every failure is an error result, never an exception."""
        slug = self.source.slug
        if not self.source.trust.trusted:
            return ToolOutput(f"source {slug}: {UNTRUSTED_REASON}; {endpoint.name} did not run.", is_error=True)
        try:
            base_url = expand_env(self.source.base_url, self._environ)
            headers = {name: expand_env(value, self._environ) for name, value in self.source.headers.items()}
        except KeyError as exc:
            return ToolOutput(
                f"source {slug}: environment variable {exc.args[0]} is not set (source.toml references it); "
                f"{endpoint.name} did not run.",
                is_error=True,
            )
        placeholders = path_params(endpoint.path)
        path = endpoint.path
        for name in placeholders:
            path = path.replace(f"{{{name}}}", quote(_text(input[name]), safe=""))
        rest = {name: value for name, value in input.items() if name not in placeholders}
        url = base_url.rstrip("/") + path
        request = f"{endpoint.method} {path}"
        if _origin(url) != _origin(base_url):  # the secrets in the headers go to the declared host only
            return ToolOutput(f"source {slug}: {request} would leave {base_url}; it did not run.", is_error=True)
        try:
            if endpoint.method in _QUERY_METHODS:
                params = {name: _text(value) for name, value in rest.items() if value is not None}
                response = await self._client.request(endpoint.method, url, params=params, headers=headers)
            else:
                response = await self._client.request(endpoint.method, url, json=rest, headers=headers)
        except httpx.TimeoutException:
            return ToolOutput(
                f"source {slug}: {request} got no answer within {self.source.timeout:g} s.", is_error=True
            )
        except httpx.HTTPError as exc:
            return ToolOutput(f"source {slug}: {request} failed: {type(exc).__name__}: {exc}", is_error=True)
        status = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
        body = _body(response)
        if response.is_error:
            return ToolOutput(f"source {slug}: {request} answered {status}\n\n{body}".rstrip(), is_error=True)
        return ToolOutput(f"{status}\n\n{body}".rstrip())

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()


def _origin(url: str) -> tuple[str, str, int | None] | None:
    """Scheme, host and port of `url` (None: not a URL httpx can send to)."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return None
    return parsed.scheme, parsed.host, parsed.port


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def _body(response: httpx.Response) -> str:
    text = response.text
    if "json" in response.headers.get("content-type", ""):
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            return text
    return text


class ApiTool(SourceTool):
    """One endpoint of an API source, as a Lamina tool."""

    def __init__(self, connection: ApiConnection, endpoint: ApiEndpoint) -> None:
        """The tool for one endpoint of an API source.

        Args:
            connection: The source's connection, which makes the calls.
            endpoint: The endpoint this tool calls.
        """
        source = connection.source
        super().__init__(
            source=source.slug,
            name=tool_name(source.slug, endpoint.name),
            remote_name=endpoint.name,
            description=short_description(endpoint.description, source.slug),
            schema=endpoint.params,
            guide=guide_path(source),
        )
        self._connection = connection
        self._endpoint = endpoint

    @property
    def read_only(self) -> bool:
        """Whether the endpoint only reads, as its configuration says."""
        return self._endpoint.read_only

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """Call the endpoint with `input`; a failure comes back as an error result, never raised."""
        return await self._connection.call(self._endpoint, input)


def api_tools(connection: ApiConnection) -> tuple[list[ApiTool], list[ToolDefinitionError]]:
    """The Lamina tools of an API source, and the endpoints refused.

    Args:
        connection: The API source's connection.

    Returns:
        The tools, filtered by the source's `enabled_tools`, and the endpoints refused because their
        definition cannot go in a request (see `checked_definition`).
    """
    source = connection.source
    return make_tools(source.enabled_tools, source.endpoints, lambda endpoint: ApiTool(connection, endpoint))
