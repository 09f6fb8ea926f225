"""Tools the model can call, and the pre-tool-use pipeline every call passes (see `pipeline`)."""

from lamina.tools._base import (
    PermissionMode,
    PlanSink,
    StructTool,
    Tool,
    ToolContext,
    ToolInputError,
    ToolOutput,
)
from lamina.tools._bash import BashTool
from lamina.tools._builtin import default_tool_specs, default_tools
from lamina.tools._edit import EditTool
from lamina.tools._glob import GlobTool
from lamina.tools._grep import GrepTool
from lamina.tools._offload import OffloadPolicy
from lamina.tools._pipeline import ToolExecution, ToolPipeline
from lamina.tools._prerequisites import NearestContextFileRule, PrerequisiteManager, PrerequisiteNotice, Requirement
from lamina.tools._read import ReadTool
from lamina.tools._rules import Allow, Ask, AskCallback, BoundCall, Deny, PermissionRequest, Rewrite, Rule, Verdict
from lamina.tools._sandbox import SandboxSettings
from lamina.tools._search_files import walk_files
from lamina.tools._submit_plan import SubmitPlanTool
from lamina.tools._write import WriteTool

ToolCall = BoundCall
"""The old name of `BoundCall`, kept one release (deprecated): `lamina.session.ToolCall` is the log's entry."""

__all__ = [
    "Allow",
    "Ask",
    "AskCallback",
    "BashTool",
    "BoundCall",
    "Deny",
    "EditTool",
    "GlobTool",
    "GrepTool",
    "NearestContextFileRule",
    "OffloadPolicy",
    "PermissionMode",
    "PermissionRequest",
    "PlanSink",
    "PrerequisiteManager",
    "PrerequisiteNotice",
    "ReadTool",
    "Requirement",
    "Rewrite",
    "Rule",
    "SandboxSettings",
    "StructTool",
    "SubmitPlanTool",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolExecution",
    "ToolInputError",
    "ToolOutput",
    "ToolPipeline",
    "Verdict",
    "WriteTool",
    "default_tool_specs",
    "default_tools",
    "walk_files",
]
