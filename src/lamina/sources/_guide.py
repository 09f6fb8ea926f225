"""Where a source's guide lives, and which tool calls it gates (pure).

The guide (`sources/<slug>/guide.md`) is a workspace file the model reads on demand before it
first uses the source; tool specs only point at it, so editing a guide changes no tool
definition and only sessions that use a source pay for its guide. The pre-tool-use pipeline
enforces the order with a prerequisite per source, gated by `calls_to_source(slug)`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from lamina.sources._source_config import GUIDE_FILE, ApiSource, McpSource

if TYPE_CHECKING:
    from lamina.tools import BoundCall


def guide_path(source: McpSource | ApiSource) -> Path:
    """The source's `guide.md` (absolute when the workspace root given to `find_sources` was)."""
    return source.directory / GUIDE_FILE


def source_of(tool: object) -> str | None:
    """The slug of the source `tool` belongs to, or None for a tool that is not a source tool."""
    slug = getattr(tool, "source", None)
    return slug if isinstance(slug, str) else None


def calls_to_source(slug: str) -> Callable[[BoundCall], bool]:
    """A predicate true for calls of the tools of source `slug`: the `applies_to` of its guide prerequisite."""

    def applies(call: BoundCall) -> bool:
        return source_of(call.tool) == slug

    applies.__qualname__ = f"calls_to_source({slug!r})"
    return applies
