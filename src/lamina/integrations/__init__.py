"""Lamina inside the agent frameworks people already use (each an optional extra, imported on its own).

- `lamina.integrations.openai_agents` (`lamina[openai-agents]`): a `Session` for the OpenAI Agents
  SDK on Lamina's store, and Lamina's placement as the runner's model-input filter.
- `lamina.integrations.pydantic_ai` (`lamina[pydantic-ai]`): a history processor and an
  instructions function for a pydantic-ai `Agent`, on a durable Lamina session.
- `lamina.integrations.langgraph` (`lamina[langgraph]`): a LangGraph checkpointer on Lamina's store
  and the model input of a graph's model node, placed and compacted by Lamina.

Nothing here is imported by `import lamina`; each module imports its framework when it is imported.
"""

from lamina.integrations._options import CompactionPolicy, ThreadOptions
from lamina.integrations._thread import LaminaThread, project_parts

__all__ = ["CompactionPolicy", "LaminaThread", "ThreadOptions", "project_parts"]
