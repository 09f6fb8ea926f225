"""MCP sources: one client session per server, held open for the agent's lifetime (I/O: subprocess, network).

`McpConnection.start()` starts or reaches the server through the official `mcp` SDK and keeps the
session open in a background task. Nothing raised by the SDK or the server reaches the pipeline:
a failure becomes an error result naming the source and what happened (`docs/sources.md`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import mimetypes
import os
import re
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Final, TextIO, cast

from lamina.attachments import NamedBytes
from lamina.errors import MissingExtraError, SourceConnectionError, ToolDefinitionError
from lamina.sources._guide import guide_path
from lamina.sources._source_config import UNTRUSTED_REASON, McpHttp, McpSource, McpStdio, expand_env
from lamina.sources._tool import SourceTool, make_tools, short_description, tool_name
from lamina.tools import ToolContext, ToolOutput

try:
    import anyio
    import httpx2
    import mcp_types
    from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client
except ImportError as exc:
    raise MissingExtraError.of(exc, "an MCP source", "mcp") from None

_STDERR_TAIL: Final = 800  # characters of the server's stderr quoted in an error
_CLOSE_GRACE: Final = 10.0  # seconds the SDK gets to stop a server before its task is cancelled
_MEASURE_CAP: Final = 256 * 1024 * 1024
"""Most bytes of an over-limit answer read (and dropped) to tell its size."""
_OVER_LIMIT: Final = re.compile(r"exceeded the (\d+) byte limit")


class McpConnection:
    """One MCP server and the client session Lamina keeps open to it."""

    def __init__(self, source: McpSource, *, environ: Mapping[str, str] | None = None) -> None:
        """A connection to one MCP server, not yet started (`start`).

        Args:
            source: The MCP source's configuration.
            environ: The environment `${VAR}` references are expanded from; `os.environ` unless given.
        """
        self.source = source
        self._environ = os.environ if environ is None else environ
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()
        self._stderr: TextIO | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._measured: _MeasuredTransport | None = None

    async def start(self) -> list[mcp_types.Tool]:
        """Start (or reach) the server and list its tools.

        Raises:
            SourceConnectionError: The server cannot start, does not speak MCP, or does not answer in time.
        """
        if not self.source.trust.trusted:  # its command never runs, its `${VAR}`s are never expanded
            raise SourceConnectionError(self.source.slug, UNTRUSTED_REASON)
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[list[mcp_types.Tool]] = loop.create_future()
        self._closing = asyncio.Event()
        self._task = asyncio.create_task(self._hold(ready), name=f"mcp source {self.source.slug}")
        try:
            return await ready
        except SourceConnectionError:
            await self._stop()
            raise

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolOutput:
        """Call tool `name` on the server; every failure is an error result, never an exception."""
        slug = self.source.slug
        async with self._lock:
            if self._closed:
                return ToolOutput(f"source {slug}: the connection is closed; {name} did not run.", is_error=True)
            if self._session is None:
                await self._stop()
                try:
                    await self.start()
                except SourceConnectionError as exc:
                    return ToolOutput(f"{exc}. {name} did not run.", is_error=True)
            session = self._session
        assert session is not None
        try:
            result = await session.call_tool(name, arguments, read_timeout_seconds=self.source.timeout)
        except MCPError as exc:
            limit = _over_limit(exc)
            if limit is not None:
                return await self._too_large(name, limit)
            if exc.code == mcp_types.CONNECTION_CLOSED:
                self._session = None  # the next call starts the server again
                return ToolOutput(
                    f"source {slug}: the MCP server stopped during the call to {name} (connection closed); "
                    f"the call's outcome is unknown.{self._stderr_tail()}",
                    is_error=True,
                )
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                return ToolOutput(
                    f"source {slug}: {name} got no answer within {self.source.timeout:g} s.", is_error=True
                )
            return ToolOutput(f"source {slug}: {name} failed: MCP error {exc.code}: {exc.message}", is_error=True)
        except Exception as exc:  # a transport or SDK failure: still a result for the call
            self._session = None
            return ToolOutput(f"source {slug}: {name} failed: {type(exc).__name__}: {exc}", is_error=True)
        return render_result(result, tool_name(slug, name))

    async def _too_large(self, name: str, limit: int) -> ToolOutput:
        """The error result for a call whose answer was over the client's event limit (the session is kept)."""
        size = None if self._measured is None else await self._measured.size(name, self.source.timeout)
        shown = f"is {size:,} bytes" if size is not None and limit < size <= _MEASURE_CAP else "is too large"
        return ToolOutput(
            f"source {self.source.slug}: the result of {name} {shown}, more than the MCP client takes in one"
            f" message ({limit:,} bytes); the tool ran but its result cannot be received. The connection is"
            f" kept: ask for less (a smaller page, range or query).",
            is_error=True,
        )

    async def aclose(self) -> None:
        """Close the session and stop the server (idempotent)."""
        self._closed = True
        await self._stop()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    async def _stop(self) -> None:
        task, self._task = self._task, None
        self._session = None
        if task is None:
            return
        self._closing.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), _CLOSE_GRACE)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        except Exception:  # the server's own shutdown noise is not ours to report
            pass

    async def _hold(self, ready: asyncio.Future[list[mcp_types.Tool]]) -> None:
        """Own the SDK's context managers from start to close, in this one task."""
        slug = self.source.slug
        try:
            async with contextlib.AsyncExitStack() as stack:
                try:
                    read, write = await stack.enter_async_context(self._transport())
                    session = await stack.enter_async_context(ClientSession(read, write))
                    with anyio.fail_after(self.source.timeout):
                        await session.initialize()
                        tools = await _list_tools(session)
                except KeyError as exc:
                    raise SourceConnectionError(slug, f"environment variable {exc.args[0]} is not set") from None
                except TimeoutError:
                    raise SourceConnectionError(
                        slug, f"the MCP server did not finish its handshake within {self.source.timeout:g} s"
                    ) from None
                except OSError as exc:
                    raise SourceConnectionError(slug, f"cannot start the MCP server: {exc}") from None
                except MCPError as exc:
                    raise SourceConnectionError(
                        slug, f"the MCP server failed during start-up: {exc.message}{self._stderr_tail()}"
                    ) from None
                self._session = session
                ready.set_result(tools)
                await self._closing.wait()
        except SourceConnectionError as exc:
            if not ready.done():
                ready.set_exception(exc)
        except Exception as exc:  # includes the SDK's exception groups
            if not ready.done():
                ready.set_exception(SourceConnectionError(slug, f"cannot connect: {_describe(exc)}"))
        finally:
            self._session = None

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        connection = self.source.connection
        match connection:
            case McpStdio():
                if self._stderr is None:
                    # The server's stderr is kept so a failure can quote its last lines.
                    self._stderr = cast(TextIO, tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"))  # noqa: SIM115
                env = {key: expand_env(value, self._environ) for key, value in connection.env.items()}
                params = StdioServerParameters(
                    command=expand_env(connection.command, self._environ),
                    args=[expand_env(arg, self._environ) for arg in connection.args],
                    env=env or None,
                    cwd=self.source.directory,
                )
                return stdio_client(params, errlog=self._stderr)
            case McpHttp():
                headers = {key: expand_env(value, self._environ) for key, value in connection.headers.items()}
                url = expand_env(connection.url, self._environ)
                self._measured = _MeasuredTransport(httpx2.URL(url))
                client = httpx2.AsyncClient(
                    headers=headers,
                    timeout=httpx2.Timeout(30.0, read=max(300.0, self.source.timeout)),
                    transport=self._measured,
                    follow_redirects=False,
                )
                return _http_transport(url, client)

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.flush()
            self._stderr.seek(0)
            text = self._stderr.read().strip()
            self._stderr.seek(0, os.SEEK_END)
        except (OSError, ValueError):
            return ""
        if not text:
            return ""
        tail = text[-_STDERR_TAIL:]
        return f"\nThe server's last stderr output:\n{tail}"


@contextlib.asynccontextmanager
async def _http_transport(url: str, client: httpx2.AsyncClient) -> Any:
    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams


def _over_limit(exc: MCPError) -> int | None:
    """The byte limit an answer was over, when `exc` is the SDK giving up on an SSE event that large."""
    found = _OVER_LIMIT.search(exc.message) if exc.code == mcp_types.CONNECTION_CLOSED else None
    return int(found.group(1)) if found else None


def _called_tool(request: httpx2.Request) -> str | None:
    """The tool a POSTed JSON-RPC message calls, if it is a `tools/call`."""
    if request.method != "POST":
        return None
    try:
        message = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return None
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    name = (message.get("params") or {}).get("name")
    return name if isinstance(name, str) else None


class _MeasuredTransport(httpx2.AsyncBaseTransport):
    """The HTTP transport under the MCP client, measuring the answer to each tool call.

    The SDK stops reading an event over its limit and says only that the stream failed; the rest of
    that answer is read here when the SDK closes it (and dropped, up to `_MEASURE_CAP`), so the error
    can say how large the answer was. Keyed by tool name: the newest call of each.
    """

    def __init__(self, declared: httpx2.URL) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._sizes: dict[str, asyncio.Future[int]] = {}
        self._origin = (declared.scheme, declared.host, declared.port)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if (request.url.scheme, request.url.host, request.url.port) != self._origin:
            # the headers carry the user's secrets: they go to the host the source declares, nowhere else
            raise httpx2.UnsupportedProtocol(f"refused a request to {request.url}: not the source's own server")
        response = await self._inner.handle_async_request(request)
        name = _called_tool(request)
        if name is None or not isinstance(response.stream, httpx2.AsyncByteStream):
            return response
        measured = asyncio.get_running_loop().create_future()
        self._sizes[name] = measured
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_CountedStream(response.stream, measured),
            request=request,
            extensions=response.extensions,
        )

    async def size(self, name: str, timeout: float) -> int | None:
        """Bytes of the newest answer to a call of `name`, once it is read to its end (None: unknown)."""
        measured = self._sizes.get(name)
        if measured is None:
            return None
        try:
            return await asyncio.wait_for(asyncio.shield(measured), timeout)
        except TimeoutError:
            return None

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CountedStream(httpx2.AsyncByteStream):
    """A response body that counts its bytes, and reads the rest when closed before its end."""

    def __init__(self, inner: httpx2.AsyncByteStream, measured: asyncio.Future[int]) -> None:
        self._inner = inner
        self._chunks = aiter(inner)  # one iterator: what the reader left is drained from the same place
        self._measured = measured
        self._read = 0
        self._ended = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            try:
                chunk = await anext(self._chunks)
            except StopAsyncIteration:
                self._ended = True
                return
            self._read += len(chunk)
            yield chunk

    async def aclose(self) -> None:
        try:
            while not self._ended and self._read <= _MEASURE_CAP:
                try:
                    self._read += len(await anext(self._chunks))
                except StopAsyncIteration:
                    self._ended = True
        except Exception:  # a broken stream: the count so far is a lower bound, said as "too large"
            self._read = _MEASURE_CAP + 1
        finally:
            if not self._measured.done():
                self._measured.set_result(self._read)
            await self._inner.aclose()


async def _list_tools(session: ClientSession) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    while True:
        params = None if cursor is None else mcp_types.PaginatedRequestParams(cursor=cursor)
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


def render_result(result: mcp_types.CallToolResult, tool: str) -> ToolOutput:
    """What the model receives for a result of an MCP tool.

    Args:
        result: The server's result.
        tool: The tool's name.

    Returns:
        Its text, and its image content as images for the pipeline to store (each named
        `<tool> image <n>.<ext>` and marked where it came in the text).
    """
    parts: list[str] = []
    images: list[NamedBytes] = []
    for block in result.content:
        match block:
            case mcp_types.TextContent():
                parts.append(block.text)
            case mcp_types.ImageContent():
                name = f"{tool} image {len(images) + 1}{mimetypes.guess_extension(block.mime_type) or ''}"
                try:
                    data = base64.b64decode(block.data, validate=True)
                except (binascii.Error, ValueError):
                    parts.append(f"[image not shown: {name} ({block.mime_type}): its data is not valid base64]")
                    continue
                images.append(NamedBytes(name, data))
                parts.append(f"[image: {name} ({block.mime_type})]")
            case mcp_types.AudioContent():
                parts.append(f"[{block.type} content, {block.mime_type}, not shown]")
            case mcp_types.ResourceLink():
                parts.append(f"[resource link: {block.uri}]")
            case mcp_types.EmbeddedResource():
                resource = block.resource
                text = getattr(resource, "text", None)
                parts.append(text if isinstance(text, str) else f"[embedded resource: {resource.uri}]")
            case _:
                parts.append(f"[{getattr(block, 'type', 'unknown')} content, not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, indent=2, ensure_ascii=False))
    text = "\n".join(parts) if parts else "(no output)"
    return ToolOutput(text, is_error=result.is_error, images=tuple(images))


class McpTool(SourceTool):
    """One tool of an MCP server, as a Lamina tool."""

    def __init__(self, connection: McpConnection, remote: mcp_types.Tool) -> None:
        """The Lamina tool for one tool a server lists.

        Args:
            connection: The started connection, which makes the calls.
            remote: The tool as the server lists it.
        """
        source = connection.source
        super().__init__(
            source=source.slug,
            name=tool_name(source.slug, remote.name),
            remote_name=remote.name,
            description=short_description(remote.description or source.description, source.slug),
            schema=_input_schema(remote.input_schema),
            guide=guide_path(source),
        )
        self._connection = connection
        self._read_only = remote.name in source.read_only_tools

    @property
    def read_only(self) -> bool:
        """Whether the tool only reads: it is among the source's `read_only_tools`."""
        return self._read_only

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """Call the tool on the server with `input`; a failure comes back as an error result, never raised."""
        return await self._connection.call(self.remote_name, input)


def _input_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    # The generated title ("addArguments") says nothing the tool name does not.
    return {key: value for key, value in schema.items() if key != "title"}


def mcp_tools(
    connection: McpConnection, remote: Sequence[mcp_types.Tool]
) -> tuple[list[McpTool], list[ToolDefinitionError]]:
    """The Lamina tools for a started connection, and the tools refused.

    Args:
        connection: The started connection.
        remote: The tools the server lists.

    Returns:
        The tools, filtered by the source's `enabled_tools`, and the tools refused because their
        definition cannot go in a request (see `checked_definition`).
    """
    return make_tools(connection.source.enabled_tools, remote, lambda tool: McpTool(connection, tool))
