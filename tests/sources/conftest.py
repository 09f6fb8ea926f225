"""Fixtures for the sources tests: a workspace with source folders, and a pipeline over source tools."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from lamina.tools import PermissionMode, Tool, ToolContext, ToolPipeline

SERVER = Path(__file__).with_name("mcp_server.py")
GUIDE = "# Guide\n\nCall the tools with care.\n"


def write_source(root: Path, slug: str, config: str, *, guide: str | None = GUIDE) -> Path:
    """`root/sources/<slug>/` with `config` as its source.toml and (unless None) a guide."""
    folder = root / "sources" / slug
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "source.toml").write_text(textwrap.dedent(config), encoding="utf-8")
    if guide is not None:
        (folder / "guide.md").write_text(guide, encoding="utf-8")
    return folder


def stdio_config(*args: str, description: str = "A test MCP server.", extra: str = "") -> str:
    """A source.toml for the test MCP server (or another Python script) over stdio."""
    argv = ", ".join(f'"{arg}"' for arg in (args or (str(SERVER),)))
    return f'kind = "mcp"\ndescription = "{description}"\ncommand = "{sys.executable}"\nargs = [{argv}]\n{extra}'


def pipeline(tools: Iterable[Tool[Any]], root: Path) -> ToolPipeline:
    """A pipeline in execute mode over `tools`, working in `root`."""
    context = ToolContext(cwd=root, data_dir=root / ".data", mode=PermissionMode.EXECUTE)
    return ToolPipeline(tools, context)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    return root
