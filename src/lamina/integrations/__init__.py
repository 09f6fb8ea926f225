"""Lamina inside the agent frameworks people already use (each an optional extra, imported on its own).

`lamina.integrations.openai_agents`, `.pydantic_ai` and `.langgraph` each import their framework;
this package holds what they share: `ThreadOptions`, `CompactionPolicy`, `LaminaThread` and
`project_parts`. Nothing here is imported by `import lamina`. See docs/integrations.md.
"""

from lamina.integrations._options import CompactionPolicy, ThreadOptions
from lamina.integrations._thread import LaminaThread, project_parts

__all__ = ["CompactionPolicy", "LaminaThread", "ThreadOptions", "project_parts"]
