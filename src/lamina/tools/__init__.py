"""Tools the model can call, and the pre-tool-use pipeline every call passes (see `pipeline`)."""

from lamina.tools.base import (
    PermissionMode,
    PlanSink,
    StructTool,
    Tool,
    ToolContext,
    ToolInputError,
    ToolOutput,
)
from lamina.tools.bash import BashTool
from lamina.tools.builtin import MINI_TOOL_NAMES, default_tool_specs, default_tools, mini_tools
from lamina.tools.edit import EditTool
from lamina.tools.glob import GlobTool
from lamina.tools.grep import GrepTool
from lamina.tools.offload import OffloadedResult, OffloadPolicy, offload_result, offload_threshold, result_path
from lamina.tools.pipeline import ToolExecution, ToolPipeline
from lamina.tools.prerequisites import NearestContextFileRule, PrerequisiteManager, PrerequisiteNotice, Requirement
from lamina.tools.read import ReadTool
from lamina.tools.rules import Allow, Ask, AskCallback, Deny, PermissionRequest, Rewrite, Rule, ToolCall, Verdict
from lamina.tools.submit_plan import SubmitPlanTool
from lamina.tools.write import WriteTool

__all__ = [
    "MINI_TOOL_NAMES",
    "Allow",
    "Ask",
    "AskCallback",
    "BashTool",
    "Deny",
    "EditTool",
    "GlobTool",
    "GrepTool",
    "NearestContextFileRule",
    "OffloadPolicy",
    "OffloadedResult",
    "PermissionMode",
    "PermissionRequest",
    "PlanSink",
    "PrerequisiteManager",
    "PrerequisiteNotice",
    "ReadTool",
    "Requirement",
    "Rewrite",
    "Rule",
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
    "mini_tools",
    "offload_result",
    "offload_threshold",
    "result_path",
]
