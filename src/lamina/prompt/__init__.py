"""System prompt composition: named sections and the presets that order them (pure).

```python
from lamina.prompt import DEFAULT_PRESET, PromptInputs, system_prompt

text = system_prompt(DEFAULT_PRESET, PromptInputs(working_dir="/src/app", tools=session_tools))
```

`lamina.workspace.WorkspaceContext` fills `PromptInputs` from the disk; presets: `docs/prompt.md`.
"""

from lamina.prompt._presets import (
    DEFAULT_PRESET,
    Preset,
    PresetFileError,
    compose_sections,
    get_preset,
    parse_custom_preset,
    system_prompt,
)
from lamina.prompt._sections import Platform, PromptInputs, escape_path

__all__ = [
    "DEFAULT_PRESET",
    "Platform",
    "Preset",
    "PresetFileError",
    "PromptInputs",
    "compose_sections",
    "escape_path",
    "get_preset",
    "parse_custom_preset",
    "system_prompt",
]
