"""System prompt composition: named sections and the presets that order them (pure).

```python
from lamina.prompt import DEFAULT_PRESET, PromptInputs, system_prompt

text = system_prompt(DEFAULT_PRESET, PromptInputs(working_dir="/src/app", tools=session_tools))
```

`lamina.workspace.WorkspaceContext` fills `PromptInputs` from the disk; presets: `docs/prompt.md`.
"""

from lamina.prompt._presets import (
    BUILTIN_TOOL_NAMES,
    DEFAULT_PRESET,
    MINI_PRESET,
    PRESET_NAMES,
    Preset,
    PresetFileError,
    compose_sections,
    get_preset,
    parse_custom_preset,
    system_prompt,
)
from lamina.prompt._sections import SECTIONS, Platform, PromptInputs, Section, escape_path

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "DEFAULT_PRESET",
    "MINI_PRESET",
    "PRESET_NAMES",
    "SECTIONS",
    "Platform",
    "Preset",
    "PresetFileError",
    "PromptInputs",
    "Section",
    "compose_sections",
    "escape_path",
    "get_preset",
    "parse_custom_preset",
    "system_prompt",
]
