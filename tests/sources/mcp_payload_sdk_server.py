"""The plain server `mcp_payload_server.py` stands in for, on the official SDK (`test_payload_server.py` compares them).

Run as `python mcp_payload_sdk_server.py FILE` (the tool `probe`, defined by FILE as for the plain
server) or with no FILE (the tool `shout`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field

server = MCPServer("lamina-payload")

if len(sys.argv) > 1:
    _TEXTS = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    _FIELD: str = _TEXTS["field"]

    def probe(text: Annotated[str, Field(description=_FIELD, title=_FIELD)]) -> str:
        return text

    server.add_tool(probe, description=_TEXTS["description"])
else:

    @server.tool()
    def shout(text: str) -> str:
        """Return the text in capitals."""
        return text.upper()


if __name__ == "__main__":
    server.run()
