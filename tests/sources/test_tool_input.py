"""A source tool's input is checked against its whole JSON schema; what does not fit is the model's error result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lamina.sources import SourceTool
from lamina.tools import ToolContext, ToolOutput
from tests.sources.conftest import pipeline

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1},
        "filters": {
            "type": "object",
            "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 100}},
            "required": ["limit"],
        },
        "tags": {"type": "array", "items": {"enum": ["open", "closed"]}},
    },
    "required": ["query"],
}


class Search(SourceTool):
    """A source tool that echoes its input: what reaches `run` passed the checks."""

    read_only = True

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput(f"ran with {sorted(input)}")


def _tool(tmp_path: Path) -> Search:
    return Search(
        source="docs", name="docs__search", remote_name="search", description="Search.", schema=SCHEMA, guide=tmp_path
    )


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ({"query": "x", "filters": {"limit": 0}}, "filters/limit: 0 is less than the minimum of 1"),
        ({"query": "x", "filters": {"limit": "5"}}, "filters/limit: expected integer, got str"),
        ({"query": "x", "filters": {}}, "filters/limit: required field missing"),
        ({"query": "x", "tags": ["open", "stale"]}, "tags/1: 'stale' is not one of ['open', 'closed']"),
        ({"query": ""}, "query: '' should be non-empty"),
        ({}, "query: required field missing"),
    ],
)
async def test_input_deeper_than_the_top_level_is_checked(tmp_path: Path, raw: dict[str, Any], said: str) -> None:
    result = await pipeline([_tool(tmp_path)], tmp_path).execute("c1", "docs__search", raw)
    assert result.is_error and result.decision.kind == "deny"
    assert result.content == f"Invalid input for docs__search: {said}"


async def test_input_that_fits_runs(tmp_path: Path) -> None:
    raw = {"query": "x", "filters": {"limit": 5}, "tags": ["open"]}
    result = await pipeline([_tool(tmp_path)], tmp_path).execute("c1", "docs__search", raw)
    assert (result.content, result.is_error) == ("ran with ['filters', 'query', 'tags']", False)
