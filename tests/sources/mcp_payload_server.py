"""An MCP server whose one tool's definition carries given text, for the untrusted-slot tests (stdio).

Run as `python mcp_payload_server.py FILE`, FILE a JSON object: `description` (the tool's
description; null for a tool with none, so the source's own description stands in) and `field`
(the description and title of the tool's one input field). The tool `probe` echoes its `text`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field

_TEXTS = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
_FIELD: str = _TEXTS["field"]

server = MCPServer("lamina-payload")


def probe(text: Annotated[str, Field(description=_FIELD, title=_FIELD)]) -> str:
    return text


server.add_tool(probe, description=_TEXTS["description"])

if __name__ == "__main__":
    server.run()
