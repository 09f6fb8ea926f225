"""An MCP server over stdio whose tool schemas are large, for the deferred-tools tests; in plain JSON-RPC.

Run as `python mcp_wide_server.py COUNT WIDTH`: it serves COUNT tools, `record_0` to `record_{COUNT-1}`,
each with WIDTH documented string fields (a schema about as large as a real server's); a call answers
with the tool's name and the fields it was given. Plain JSON-RPC, as `mcp_payload_server.py` is, so it
starts in milliseconds.
"""

from __future__ import annotations

import json
import sys
from typing import Any

PROTOCOL_VERSION = "2025-11-25"
COUNT, WIDTH = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) > 2 else (60, 25)
_KINDS = ("invoice", "customer", "shipment", "ticket", "payment", "refund", "contract", "meeting", "report", "alert")


def _description(n: int) -> str:
    return f"Update one {_KINDS[n % len(_KINDS)]} record of batch {n // len(_KINDS)} in the ledger."


def _tool(n: int) -> dict[str, Any]:
    fields = {
        f"field_{i}": {"type": "string", "description": f"The new value of column {i} of the record, as text."}
        for i in range(WIDTH)
    }
    schema = {"type": "object", "properties": fields, "title": f"record_{n}Arguments"}
    return {"name": f"record_{n}", "description": _description(n), "inputSchema": schema}


def _call(params: dict[str, Any]) -> dict[str, Any]:
    name = str(params.get("name"))
    if name not in {f"record_{n}" for n in range(COUNT)}:
        return {"content": [{"type": "text", "text": f"Unknown tool: {name}"}], "isError": True}
    text = f"{name} updated: {', '.join(sorted(params.get('arguments') or {}))}"
    return {"content": [{"type": "text", "text": text}], "isError": False}


def _result(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """The result of one request (None: the method is not served)."""
    match method:
        case "initialize":
            info = {"name": "lamina-wide", "version": ""}
            return {
                "capabilities": {"tools": {"listChanged": False}},
                "protocolVersion": PROTOCOL_VERSION,
                "serverInfo": info,
            }
        case "tools/list":
            return {"tools": [_tool(n) for n in range(COUNT)]}
        case "tools/call":
            return _call(params)
        case "ping":
            return {}
    return None


if __name__ == "__main__":
    for line in sys.stdin.buffer:
        request = json.loads(line)
        if "id" in request:  # a notification gets no answer
            result = _result(request.get("method", ""), request.get("params") or {})
            error = {"code": -32601, "message": "Method not found", "data": request.get("method")}
            reply = {
                "jsonrpc": "2.0",
                "id": request["id"],
                **({"error": error} if result is None else {"result": result}),
            }
            sys.stdout.buffer.write(json.dumps(reply).encode() + b"\n")
            sys.stdout.buffer.flush()
