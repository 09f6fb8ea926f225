"""The open connections of a workspace's sources and the tools they provide (I/O: via the connections).

`SourceConnections` connects the sources concurrently. A source that cannot start is reported in
`problems` and provides no tools; the others are unaffected. Tool names are unique across sources
because each starts with its source's slug. An example: `docs/sources.md`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Self, assert_never

from lamina.errors import MissingExtraError, SourceConnectionError, ToolDefinitionError
from lamina.sources._source_config import UNTRUSTED_REASON, ApiSource, McpSource, Source
from lamina.sources._tool import SourceTool

if TYPE_CHECKING:
    from lamina.sources._api import ApiConnection
    from lamina.sources._mcp import McpConnection


@dataclass(frozen=True, slots=True)
class ConnectionProblem:
    """A source that could not be connected, and why."""

    slug: str
    reason: str

    def __str__(self) -> str:
        return f"source {self.slug}: {self.reason}"


class SourceConnections:
    """The tools of a set of sources, with their connections held open until `aclose()`.

    Only trusted sources connect (`Source.trust`): one from an untrusted workspace is a problem
    and provides no tools; its command never runs and its `${VAR}`s are never expanded.
    """

    def __init__(self, sources: Iterable[Source], *, environ: Mapping[str, str] | None = None) -> None:
        """Connections for these sources, not yet opened (`async with`, or `open`).

        Args:
            sources: The sources to connect.
            environ: The environment `${VAR}` references are expanded from; `os.environ` unless given.
        """
        self.sources: tuple[Source, ...] = tuple(sources)
        self._environ = dict(os.environ) if environ is None else environ
        self._connections: list[McpConnection | ApiConnection] = []
        self._tools: list[SourceTool] = []
        self._problems: list[ConnectionProblem] = []
        self._opened = False

    @property
    def tools(self) -> tuple[SourceTool, ...]:
        """Every connected source's tools, in source order."""
        return tuple(self._tools)

    @property
    def problems(self) -> tuple[ConnectionProblem, ...]:
        """The sources that could not be connected."""
        return tuple(self._problems)

    @property
    def tool_sources(self) -> Mapping[str, str]:
        """Tool name → slug of its source."""
        return {tool.spec.name: tool.source for tool in self._tools}

    def source_of_tool(self, name: str) -> str | None:
        """The slug of the source that provides tool `name`, or None if no source does."""
        return self.tool_sources.get(name)

    async def open(self) -> None:
        """Connect every source (concurrently) and collect their tools."""
        if self._opened:
            return
        self._opened = True
        for tools, problems in await asyncio.gather(*(self._connect(source) for source in self.sources)):
            self._tools.extend(tools)
            self._problems.extend(problems)

    async def aclose(self) -> None:
        """Close every connection (stopping stdio servers); safe to call twice."""
        connections, self._connections = self._connections, []
        await asyncio.gather(*(connection.aclose() for connection in connections))

    async def __aenter__(self) -> Self:
        try:
            await self.open()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _connect(self, source: Source) -> tuple[Sequence[SourceTool], Sequence[ConnectionProblem]]:
        if not source.trust.trusted:  # nothing of it runs: no process, no request, no `${VAR}` expanded
            return (), (ConnectionProblem(source.slug, UNTRUSTED_REASON),)
        try:
            return await self._connected(source)
        except MissingExtraError as exc:  # the `mcp` or `http` extra: this source gives no tools, the others do
            return (), (ConnectionProblem(source.slug, str(exc)),)

    async def _connected(self, source: Source) -> tuple[Sequence[SourceTool], Sequence[ConnectionProblem]]:
        match source:
            case McpSource():
                # imported here: the MCP SDK is slow to import and only MCP sources need it
                from lamina.sources._mcp import McpConnection, mcp_tools

                connection = McpConnection(source, environ=self._environ)
                self._connections.append(connection)
                try:
                    remote = await connection.start()
                except SourceConnectionError as exc:
                    return (), (ConnectionProblem(source.slug, exc.reason),)
                tools, refused = mcp_tools(connection, remote)
                problems = [_refused(source.slug, e) for e in refused]
                offered = {tool.name for tool in remote}
                missing = [name for name in source.enabled_tools or () if name not in offered]
                if missing:
                    reason = f"enabled_tools names tools the server does not offer: {', '.join(missing)}"
                    problems.append(ConnectionProblem(source.slug, reason))
                return tools, tuple(problems)
            case ApiSource():
                from lamina.sources._api import ApiConnection, api_tools

                api = ApiConnection(source, environ=self._environ)
                self._connections.append(api)
                endpoints, bad = api_tools(api)
                return endpoints, tuple(_refused(source.slug, e) for e in bad)
            case _:
                assert_never(source)


def _refused(slug: str, error: ToolDefinitionError) -> ConnectionProblem:
    return ConnectionProblem(slug, f"tool {error.tool!r} refused: {error.reason}")


async def connect_sources(sources: Iterable[Source], *, environ: Mapping[str, str] | None = None) -> SourceConnections:
    """Connected `SourceConnections` for `sources`; the caller must `await aclose()` it."""
    connections = SourceConnections(sources, environ=environ)
    await connections.open()
    return connections
