"""The built-in tool sets: `mini_tools()` and `default_tools()`, fresh instances on each call (pure)."""

from __future__ import annotations

from typing import Any, Final

from lamina.context import ToolSpec
from lamina.tools._base import Tool
from lamina.tools._bash import BashTool
from lamina.tools._edit import EditTool
from lamina.tools._glob import GlobTool
from lamina.tools._grep import GrepTool
from lamina.tools._read import ReadTool
from lamina.tools._sandbox import SandboxSettings
from lamina.tools._submit_plan import SubmitPlanTool
from lamina.tools._write import WriteTool

MINI_TOOL_NAMES: Final = ("Read", "Edit", "Write", "Glob", "Grep", "Bash")
"""The tools of the mini preset (summaries, small tasks), in the order they are offered."""


def mini_tools(*, sandbox: SandboxSettings | None = None) -> tuple[Tool[Any], ...]:
    """Read, Edit, Write, Glob, Grep and Bash, with default settings (Bash's sandbox: `sandbox`, else the default)."""
    return (ReadTool(), EditTool(), WriteTool(), GlobTool(), GrepTool(), BashTool(sandbox=sandbox))


def default_tools(*, sandbox: SandboxSettings | None = None) -> tuple[Tool[Any], ...]:
    """The tools of the default preset: the mini set and SubmitPlan (plan approval, `lamina.engine`)."""
    return (*mini_tools(sandbox=sandbox), SubmitPlanTool())


def default_tool_specs() -> tuple[ToolSpec, ...]:
    """The specs of `default_tools()`: what `WorkspaceContext(tools=...)` takes for a default session."""
    return tuple(tool.spec for tool in default_tools())
