"""An MCP server over stdio for the untrusted-slot tests, in plain JSON-RPC: it starts in milliseconds.

A server on the official SDK spends over a second of CPU importing it, once per session of those tests;
this one answers as that server does (the same JSON for the initialize answer, the tool definitions and
the results; tests/sources/test_payload_server.py compares them), so the client side, Lamina on the
official SDK client, is what is under test. The MCP protocol itself is tested against the SDK's server,
in tests/sources/.

Run as `python mcp_payload_server.py FILE`, FILE a JSON object: `description` (the description of the
one tool, `probe`; null for a tool with none, sent empty, so the source's own description stands in)
and `field` (the description and title of its one input field, `text`); `probe` echoes its `text`. Run with no FILE,
it serves `shout`, which returns its `text` in capitals.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

PROTOCOL_VERSION = "2025-11-25"
"""The version the SDK's server (mcp 2.x) answers a client that asks for a newer one."""


def _tool(name: str, description: str | None, field: dict[str, str]) -> dict[str, Any]:
    """A tool definition as the SDK's server derives it from `def name(text: str) -> str`."""
    tool: dict[str, Any] = {
        "name": name,
        "description": description or "",  # none: the SDK sends an empty one (the function has no docstring)
        "inputSchema": {
            "properties": {"text": {**field, "type": "string"}},
            "required": ["text"],
            "type": "object",
            "title": f"{name}Arguments",
        },
        "outputSchema": {
            "properties": {"result": {"title": "Result", "type": "string"}},
            "required": ["result"],
            "type": "object",
            "title": f"{name}Output",
        },
    }
    return tool


if len(sys.argv) > 1:
    _TEXTS = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    NAME, TOOL = (
        "probe",
        _tool("probe", _TEXTS["description"], {"description": _TEXTS["field"], "title": _TEXTS["field"]}),
    )
else:
    NAME, TOOL = "shout", _tool("shout", "Return the text in capitals.", {"title": "Text"})


def _result(params: dict[str, Any]) -> dict[str, Any]:
    """The answer to `tools/call`: the text as content and as structured content, as the SDK sends it."""
    if params.get("name") != NAME:
        text = f"Unknown tool: {params.get('name')}"
        return {"content": [{"type": "text", "text": text}], "isError": True}
    text = str(params.get("arguments", {}).get("text", ""))
    text = text.upper() if NAME == "shout" else text
    return {"content": [{"type": "text", "text": text}], "isError": False, "structuredContent": {"result": text}}


def _answer(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """The result of one request (None: the method is not served)."""
    if method == "initialize":
        capabilities = {
            "prompts": {"listChanged": False},
            "resources": {"listChanged": False, "subscribe": False},
            "tools": {"listChanged": False},
        }
        info = {"name": "lamina-payload", "version": ""}
        return {"capabilities": capabilities, "protocolVersion": PROTOCOL_VERSION, "serverInfo": info}
    if method == "tools/list":
        return {"tools": [TOOL]}
    if method == "tools/call":
        return _result(params)
    if method == "ping":
        return {}
    return None


def main() -> None:
    """Answer each request line on stdin with one line on stdout, until stdin closes."""
    for line in sys.stdin.buffer:
        message = json.loads(line)
        if "id" not in message:  # a notification (initialized, cancelled): nothing to answer
            continue
        result = _answer(message.get("method", ""), message.get("params") or {})
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        if result is None:
            reply["error"] = {"code": -32601, "message": "Method not found", "data": message.get("method")}
        else:
            reply["result"] = result
        sys.stdout.buffer.write(json.dumps(reply, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
        sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
