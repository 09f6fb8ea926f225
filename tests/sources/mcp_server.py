"""A small MCP server for the sources tests, on the official SDK: two tools, one that dies mid-call, and
two for the result-size tests (a result of a given size, and which client session a call came on).

Run as `python mcp_server.py` (stdio) or `python mcp_server.py http PORT` (streamable HTTP).
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("lamina-test")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers and return the sum as text. The sum is exact for integers of any size."""
    return str(a + b)


@server.tool()
def shout(text: str) -> str:
    """Return the text in capitals.

    A long second paragraph that must never reach the tool description, because descriptions stay short
    and the details belong in the source's guide.md.
    """
    return text.upper()


@server.tool()
def crash() -> str:
    """Exit the server process in the middle of the call."""
    sys.stdout.flush()
    os._exit(3)


@server.tool()
def blob(size: int) -> str:
    """Return `size` characters of text."""
    return "x" * size


@server.tool()
def which_session(ctx: Context) -> str:
    """Name the client session this call came on: its `Mcp-Session-Id` (streamable HTTP)."""
    return (ctx.headers or {}).get("mcp-session-id", "")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
