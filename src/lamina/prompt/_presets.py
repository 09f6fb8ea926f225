"""System prompt presets: `default`, `mini` and `custom`, and the stable parts they compose (pure).

A `Preset` is an ordered choice of sections, an optional narrowing of the tools, texts that
replace or add sections, and how much of the root context file to inline. `compose_sections`
turns a preset and the `PromptInputs` into one stable `Part` per section; `system_prompt` joins
them; `parse_custom_preset` reads a custom preset's TOML (its format: `docs/prompt.md`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Final, Literal, TypeAlias

import msgspec

from lamina._typed_toml import TomlProblem, did_you_mean, read_toml
from lamina.context import Authority, Part, Stability, Tier, ToolSpec
from lamina.defang import trusted
from lamina.errors import UnknownPresetError, UsageError
from lamina.prompt._sections import SECTIONS, PromptInputs

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "DEFAULT_PRESET",
    "MINI_PRESET",
    "PRESET_NAMES",
    "Preset",
    "PresetFileError",
    "compose_sections",
    "get_preset",
    "parse_custom_preset",
    "system_prompt",
]

PRESET_NAMES: Final = ("default", "mini", "custom")
"""Every preset name `get_preset` and the workspace layer accept."""

BUILTIN_TOOL_NAMES: Final = ("Read", "Edit", "Write", "Glob", "Grep", "Bash")
"""The built-in tools (SPEC F18): with SubmitPlan, the whole tool set of the mini preset."""

_SECTION_NAME_RE: Final = re.compile(r"[a-z][a-z0-9_]{0,47}")
_GENERATED_ONLY: Final = frozenset({"context_files"})


class _PresetFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A custom preset file as written; the checks across fields (sections defined, names) are made after."""

    base: Literal["default", "mini"] = "default"
    sections: list[str] | None = None
    tools: list[str] | None = None
    inline_root_tokens: Annotated[int, msgspec.Meta(ge=0)] | msgspec.UnsetType | None = msgspec.UNSET
    """Tokens of the root context files inlined; unset: the base preset's."""
    memory: bool | msgspec.UnsetType = msgspec.UNSET
    text: dict[str, str] = msgspec.field(default_factory=dict)


class PresetFileError(UsageError):
    """A custom preset file that cannot be used; names the file and the field at fault."""

    def __init__(self, path: str, field: str | None, problem: str) -> None:
        """Name the file, the field and the problem.

        Args:
            path: The custom preset file.
            field: The field at fault; None for the file as a whole.
            problem: What is wrong.
        """
        self.path = path
        self.field = field
        """The field at fault, e.g. `sections[2]` or `text.house_rules`; None for the file as a whole."""
        self.problem = problem
        where = f"{path}: {field}" if field else path
        super().__init__(f"custom preset {where}: {problem}")


_Fail: TypeAlias = Callable[[str | None, str], PresetFileError]


@dataclass(frozen=True, slots=True)
class Preset:
    """A system prompt recipe: which sections, in which order, with which tools."""

    name: str
    sections: tuple[str, ...]
    """Section names in prompt order: built-in ones (docs/prompt.md, "Sections") or ones defined in `texts`."""
    tool_names: tuple[str, ...] | None = None
    """Only these tools are given to the model; None keeps every tool the session has."""
    texts: tuple[tuple[str, str], ...] = ()
    """`(section, text)` pairs that replace a built-in section's text or define a new section."""
    inline_root_tokens: int | None = None
    """Most tokens of root context files shown in full; None leaves it to the caller."""
    memory: bool = True
    """Whether the project's `MEMORY.md` is shown (the workspace layer adds it)."""
    source: str = "lamina"
    """Where the preset came from: `lamina` for a built-in one, else the custom file's path."""

    def __post_init__(self) -> None:
        defined = dict(self.texts)
        for name in self.sections:
            if name not in SECTIONS and name not in defined:
                raise UsageError(f"preset {self.name!r}: section {name!r} is neither built in nor given a text")
        if self.inline_root_tokens is not None and self.inline_root_tokens < 0:
            raise UsageError(f"preset {self.name!r}: inline_root_tokens must be 0 or more")

    def text_of(self, section: str) -> str | None:
        """The text this preset gives `section`, or None when the built-in text applies."""
        return dict(self.texts).get(section)

    def select_tools(self, tools: Sequence[ToolSpec]) -> tuple[ToolSpec, ...]:
        """The tools of `tools` this preset keeps, in their given order."""
        if self.tool_names is None:
            return tuple(tools)
        keep = frozenset(self.tool_names)
        return tuple(t for t in tools if t.name in keep)


DEFAULT_PRESET: Final = Preset(
    name="default",
    sections=("tools", "permissions", "platform", "project", "context_files"),
)
"""Every tool, and the sections every session needs. Sections most likely to change (the project's)
come last, so an edit invalidates as little of the cached prefix as possible. The skill and source
rules (`sources_skills`) are left to the parts that need them: the skill catalogue states the
`[skill:name]` rule, a source's activation notice says to read its guide first, and the pipeline
blocks calls until a required file was read; a custom preset can still list the section."""

MINI_PRESET: Final = Preset(
    name="mini",
    sections=("tools_mini", "permissions_mini", "platform", "project", "context_files"),
    tool_names=(*BUILTIN_TOOL_NAMES, "SubmitPlan"),
    inline_root_tokens=0,
    memory=False,
)
"""For summaries and small tasks: a short prompt, only Read, Edit, Write, Glob, Grep and Bash, and
SubmitPlan as the default preset has it (offered in every mode, so the tools, first in the cached
prefix, stay the same when the mode changes; plan mode is where it is used); the root context file
is listed rather than inlined, and MEMORY.md is left for the agent to Read."""

_BUILT_IN: Final[Mapping[str, Preset]] = {"default": DEFAULT_PRESET, "mini": MINI_PRESET}


def get_preset(name: str) -> Preset:
    """The built-in preset called `name`.

    Raises:
        UnknownPresetError: `name` is not a preset name. There is no silent fallback.
        UsageError: `name` is `custom`, which needs a file (`parse_custom_preset`, or the
            workspace layer's `load_preset`).
    """
    preset = _BUILT_IN.get(name)
    if preset is not None:
        return preset
    if name == "custom":
        raise UsageError("the custom preset needs a preset file (a TOML file; see lamina.prompt._presets)")
    raise UnknownPresetError(name, PRESET_NAMES)


def compose_sections(preset: Preset, inputs: PromptInputs) -> tuple[Part, ...]:
    """One stable part per section of `preset`, in order; empty texts are left out.

    The tools in `inputs` are first narrowed to the preset's choice, so the prompt only speaks of
    tools the model has.

    Args:
        preset: The sections, their order and the texts that replace or add them.
        inputs: What the sections are built from.

    Returns:
        The parts, each keyed `system.<section>`.
    """
    inputs = replace(inputs, tools=preset.select_tools(inputs.tools))
    parts = []
    for name in preset.sections:
        custom = preset.text_of(name)
        section = SECTIONS.get(name)
        if custom is not None:
            text, provenance = custom, preset.source
            tier = section.tier if section is not None else Tier.RULES
        else:
            assert section is not None  # checked by Preset.__post_init__
            text, provenance, tier = section.render(inputs), "lamina", section.tier
        if text:
            # Lamina's own sections (names and paths escaped), or the user's own custom preset file
            parts.append(
                Part(f"system.{name}", trusted(text), provenance, Authority.SYSTEM_RULE, Stability.STABLE, tier)
            )
    return tuple(parts)


def system_prompt(preset: Preset, inputs: PromptInputs) -> str:
    """The preset's sections as one text, separated by blank lines."""
    return "\n\n".join(p.text for p in compose_sections(preset, inputs))


# --- custom presets ------------------------------------------------------------------------------------


def parse_custom_preset(data: str, *, path: str) -> Preset:
    """The preset described by the TOML text `data` (its format: `docs/prompt.md`).

    Args:
        data: The file's text.
        path: The file's path, used as the preset's source and in error messages.

    Raises:
        PresetFileError: The text is not TOML, or a field is unknown, of the wrong type or refers
            to something that does not exist; the message names the file and the field.
    """

    def fail(field: str | None, problem: str) -> PresetFileError:
        return PresetFileError(path, field, problem)

    try:
        raw = read_toml(data, _PresetFile)
    except TomlProblem as exc:
        raise fail(exc.key, exc.problem) from None
    base = _BUILT_IN[raw.base]

    texts = _parse_texts(raw.text, fail)
    new_sections = tuple(name for name in texts if name not in SECTIONS)
    if raw.sections is not None:
        sections = _parse_names(raw.sections, "sections", fail)
        for i, name in enumerate(sections):
            if name not in SECTIONS and name not in texts:
                hint = did_you_mean(name, [*SECTIONS, *texts])
                raise fail(
                    f"sections[{i}]",
                    f"unknown section {name!r}{hint}; use a built-in section ({', '.join(SECTIONS)}) "
                    "or define it under [text]",
                )
    else:
        sections = base.sections + new_sections
    for name in texts:
        if name not in sections:
            raise fail(f"text.{name}", "is a section the preset does not list in `sections`, so it would never appear")

    tool_names = base.tool_names
    if raw.tools is not None:
        tool_names = _parse_names(raw.tools, "tools", fail, identifiers=False)
    inline = base.inline_root_tokens if raw.inline_root_tokens is msgspec.UNSET else raw.inline_root_tokens
    memory = base.memory if raw.memory is msgspec.UNSET else raw.memory

    return Preset(
        name="custom",
        sections=sections,
        tool_names=tool_names,
        texts=tuple(texts.items()),
        inline_root_tokens=inline,
        memory=memory,
        source=path,
    )


def _parse_texts(value: dict[str, str], fail: _Fail) -> dict[str, str]:
    texts: dict[str, str] = {}
    for name, text in value.items():
        field = f"text.{name}"
        if not _SECTION_NAME_RE.fullmatch(name):
            raise fail(field, "a section name is lower-case letters, digits and `_`, starting with a letter")
        if name in _GENERATED_ONLY:
            raise fail(field, "is built from the context-file scan and cannot be replaced; leave it out of `sections`")
        if not text.strip():
            raise fail(field, "must be a non-empty string")
        texts[name] = text.strip()
    return texts


def _parse_names(value: list[str], field: str, fail: _Fail, *, identifiers: bool = True) -> tuple[str, ...]:
    names: list[str] = []
    for i, item in enumerate(value):
        if not item.strip():
            raise fail(f"{field}[{i}]", f"must be a non-empty string, not {item!r}")
        if identifiers and not _SECTION_NAME_RE.fullmatch(item):
            raise fail(f"{field}[{i}]", f"{item!r} is not a section name (lower-case letters, digits and `_`)")
        if item in names:
            raise fail(f"{field}[{i}]", f"{item!r} is listed twice")
        names.append(item)
    return tuple(names)
