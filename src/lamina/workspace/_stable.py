"""A workspace's stable context: preferences, preset sections, manifest, context files, memory (I/O: disk, environment).

`WorkspaceContext(root, tools=...)` is the engine's `stable_source`: each call returns the stable
parts in a fixed order, seeing the workspace as it is, cheaply (cached scans, stamped files); when
nothing changed, the very same tuple. See docs/workspace.md, "The stable context".
"""

from __future__ import annotations

import itertools
import os
import platform as _platform
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from lamina.context import Authority, Part, SafeText, Stability, StableContext, Tier, ToolSpec
from lamina.defang import defang, join
from lamina.errors import UsageError
from lamina.prompt import (
    Platform,
    Preset,
    PresetFileError,
    PromptInputs,
    compose_sections,
    get_preset,
    parse_custom_preset,
)
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator
from lamina.workspace._context_files import ContextFile, ContextFileScan, SkippedPath
from lamina.workspace._context_finder import ContextFileFinder
from lamina.workspace._preferences import (
    Preferences,
    default_preferences_path,
    load_preferences,
    preferences_part,
)
from lamina.workspace._project import PROJECT_FILE, ProjectFileError, ProjectManifest, load_project, project_part
from lamina.workspace._project_memory import (
    DEFAULT_MEMORY_MAX_TOKENS,
    MEMORY_FILE_NAME,
    ProjectMemory,
    load_memory,
    memory_part,
)

__all__ = [
    "DEFAULT_INLINE_ROOT_TOKENS",
    "WorkspaceContext",
    "WorkspaceSnapshot",
    "assemble_stable_parts",
    "build_stable_parts",
    "detect_platform",
    "load_preset",
    "root_context_part",
]

DEFAULT_INLINE_ROOT_TOKENS: Final = 2_000
"""Tokens of root context files shown in full in the prompt by default; a longer file is only listed."""

_Stamp = tuple[int, int, int, int]


def detect_platform(*, interactive: bool = True, environ: Mapping[str, str] | None = None) -> Platform:
    """This machine's operating system and shell, as the prompt's platform section shows them."""
    env = os.environ if environ is None else environ
    system = _platform.system() or "unknown"
    system = {"Darwin": "macOS"}.get(system, system)
    if system == "Windows":
        shell = "PowerShell" if env.get("PSModulePath") else "cmd"
    else:
        shell = os.path.basename(env.get("SHELL", "")) or "sh"
    return Platform(system=system, shell=shell, interactive=interactive)


def load_preset(name: str | Preset = "default", *, custom_path: str | os.PathLike[str] | None = None) -> Preset:
    """The preset called `name`; `custom` reads and checks the TOML file at `custom_path`.

    Raises:
        UnknownPresetError: `name` is not `default`, `mini` or `custom`.
        UsageError: `custom` without a file, or a file given with another preset.
        PresetFileError: The custom preset file is missing, unreadable or invalid.
    """
    if isinstance(name, Preset):
        return name
    if name != "custom":
        if custom_path is not None:
            raise UsageError(f"a custom preset file was given, but the preset is {name!r}, not 'custom'")
        return get_preset(name)
    if custom_path is None:
        raise UsageError("the custom preset needs a preset file")
    path = Path(custom_path).expanduser()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise PresetFileError(str(path), None, "file not found") from None
    except OSError as exc:
        raise PresetFileError(str(path), None, f"cannot read: {(exc.strerror or 'error').lower()}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PresetFileError(str(path), None, f"not UTF-8 (invalid byte at offset {exc.start})") from None
    return parse_custom_preset(text, path=str(path))


def root_context_part(
    scan: ContextFileScan, *, max_tokens: int, estimator: TokenEstimator = DEFAULT_ESTIMATOR
) -> tuple[Part | None, tuple[str, ...]]:
    """The root context files shown in full (key `context.root`), and their relative paths.

    Each root file (depth 0) is shown whole, wrapped by `defang`, while the running total stays
    within `max_tokens`; a file that does not fit, or was truncated by discovery, is only listed
    (half a rules file could mislead). A file with the same text as one already shown (`CLAUDE.md`
    linked to `AGENTS.md`) counts as shown without being repeated.
    """
    blocks: list[SafeText] = []
    shown: list[str] = []
    seen: dict[str, str] = {}
    used = 0
    for file in _root_files(scan):
        if file.text in seen:
            shown.append(file.relative)
            continue
        if file.truncated or not file.text.strip():
            continue
        # Never cut by defang (escapes may lengthen the text): the token budget decides, all or nothing.
        limit = 20 * len(file.text) + 16
        block = defang(file.text, source=file.relative, authority=Authority.PROJECT_FILE, max_chars=limit)
        cost = estimator.count(block)
        if used + cost > max_tokens:
            continue
        used += cost
        seen[file.text] = file.relative
        blocks.append(block)
        shown.append(file.relative)
    if not blocks:
        return None, ()
    provenance = ", ".join(seen.values())
    text = join("\n\n", blocks)
    part = Part("context.root", text, provenance, Authority.PROJECT_FILE, Stability.STABLE, Tier.ON_DEMAND)
    return part, tuple(shown)


def _root_files(scan: ContextFileScan) -> list[ContextFile]:
    return [f for f in scan.files if f.depth == 0]


def assemble_stable_parts(
    preset: Preset,
    inputs: PromptInputs,
    *,
    preferences: Preferences,
    root_part: Part | None = None,
    memory: ProjectMemory | SkippedPath | None = None,
    project: ProjectManifest | None = None,
) -> tuple[Part, ...]:
    """The stable parts in their fixed order (pure).

    Preferences, preset sections, project manifest, root context file, memory.
    """
    parts: list[Part] = []
    pinned = preferences_part(preferences)
    if pinned is not None:
        parts.append(pinned)
    parts += compose_sections(preset, inputs)
    if project is not None:
        parts.append(project_part(project))
    if root_part is not None and "context_files" in preset.sections:
        parts.append(root_part)
    if preset.memory and isinstance(memory, ProjectMemory):
        parts.append(memory_part(memory))
    return tuple(parts)


@dataclass(frozen=True, slots=True)
class WorkspaceSnapshot:
    """The stable parts of a workspace and everything they were built from."""

    root: Path
    preset: Preset
    scan: ContextFileScan
    inlined: tuple[str, ...]
    """Relative paths of the context files shown in full."""
    preferences: Preferences
    memory: ProjectMemory | SkippedPath | None
    """The loaded memory, why `MEMORY.md` was skipped, or None when there is none."""
    parts: tuple[Part, ...]
    project: ProjectManifest | None = None
    """The project manifest (`.lamina/project.toml`), or None when the workspace has none or it was skipped."""
    project_problem: ProjectFileError | None = None
    """Why `.lamina/project.toml` was skipped (it names the file and the field), or None when it was not."""


class WorkspaceContext:
    """The stable context of one working directory, rebuilt only when a stable input changed.

    Call it (or `stable_parts()`) for the parts; pass it as `ContextEngine(stable_source=...)`,
    with `tools` and `time_zone` for the engine's other arguments. Safe to share between threads.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        preset: str | Preset = "default",
        custom_preset: str | os.PathLike[str] | None = None,
        tools: Sequence[ToolSpec],
        finder: ContextFileFinder | None = None,
        allowed_roots: Sequence[str | os.PathLike[str]] = (),
        preferences: Preferences | None = None,
        preferences_path: str | os.PathLike[str] | None = None,
        environ: Mapping[str, str] | None = None,
        platform: Platform | None = None,
        inline_root_tokens: int | None = None,
        memory_max_tokens: int = DEFAULT_MEMORY_MAX_TOKENS,
        estimator: TokenEstimator = DEFAULT_ESTIMATOR,
    ) -> None:
        """Set up the workspace; nothing is scanned or read until the first call.

        Args:
            root: The working directory.
            preset: A preset name (`default`, `mini`, `custom`) or a `Preset`.
            custom_preset: The TOML file of the `custom` preset.
            tools: Every tool the session has; the preset may narrow them (see `tools`). A
                parameter, not a default, so this package never imports the tools package (which
                uses its ignore rules).
            finder: A shared context-file finder (its cache is reused); a new one by default.
            allowed_roots: Folders besides `root` that a linked context file or `MEMORY.md` may
                point into (a shared finder keeps its own).
            preferences: Fixed preferences; when None they are read from the preferences file.
            preferences_path: The preferences file (default: `$LAMINA_PREFERENCES`, else the user's
                configuration directory).
            environ: The environment to read `LAMINA_PREFERENCES` and `SHELL` from (default: the process's).
            platform: The platform to describe (default: this machine, interactive).
            inline_root_tokens: Most tokens of root context files shown in full (default: the
                preset's choice, else 2,000); 0 only lists them.
            memory_max_tokens: Most tokens of `MEMORY.md` kept (its top).
            estimator: Counts tokens for both budgets.

        Raises:
            UnknownPresetError, PresetFileError, UsageError: The preset cannot be used.
        """
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise UsageError(f"working directory {self.root} is not a folder")
        self.preset = load_preset(preset, custom_path=custom_preset)
        all_tools = tuple(tools)
        self.tools = self.preset.select_tools(all_tools)
        """The tools to give the model: the session's tools, narrowed by the preset."""
        self._all_tools = all_tools
        if inline_root_tokens is None:
            inline_root_tokens = self.preset.inline_root_tokens
        self.inline_root_tokens = DEFAULT_INLINE_ROOT_TOKENS if inline_root_tokens is None else inline_root_tokens
        if self.inline_root_tokens < 0 or memory_max_tokens < 0:
            raise UsageError("inline_root_tokens and memory_max_tokens must be 0 or more")
        self.memory_max_tokens = memory_max_tokens
        self._allowed_roots = tuple(allowed_roots)
        self._finder = finder if finder is not None else ContextFileFinder(allowed_roots=self._allowed_roots)
        self._estimator = estimator
        self._platform = platform if platform is not None else detect_platform(environ=environ)
        self._fixed_preferences = preferences
        self._preferences_file: Path | None = None
        self._preferences_explicit = False
        if preferences is None:
            if preferences_path is not None:
                self._preferences_file, self._preferences_explicit = Path(preferences_path).expanduser(), True
            else:
                self._preferences_file, self._preferences_explicit = default_preferences_path(environ=environ)
        self._lock = threading.Lock()
        self._snapshot: WorkspaceSnapshot | None = None
        self._memory_stamp: _Stamp | None = None
        self._memory: ProjectMemory | SkippedPath | None = None
        self._preferences_stamp: _Stamp | None = None
        self._preferences: Preferences | None = preferences
        self._project_stamp: _Stamp | None = None
        self._project: ProjectManifest | None = None
        self._project_problem: ProjectFileError | None = None

    @property
    def preferences_file(self) -> Path | None:
        """The preferences file read, or None when fixed preferences were given."""
        return self._preferences_file

    def __call__(self) -> tuple[Part, ...]:
        """The current stable parts (the engine's `stable_source`)."""
        return self.snapshot().parts

    def stable_parts(self) -> tuple[Part, ...]:
        """The current stable parts: the same tuple object as last time when no input changed."""
        return self.snapshot().parts

    @property
    def time_zone(self) -> str:
        """The user's time zone from the preferences, else `UTC` (the engine's `time_zone`)."""
        return self.snapshot().preferences.time_zone or "UTC"

    def snapshot(self, *, progress: Callable[[int], None] | None = None) -> WorkspaceSnapshot:
        """The stable parts and their inputs, rebuilt only where an input changed.

        A project manifest (`.lamina/project.toml`) that cannot be used is skipped, like a bad `SKILL.md`:
        no `project.manifest` part, and the reason in the snapshot's `project_problem`.

        Args:
            progress: Passed to the context-file scan when one is needed (folders listed so far).

        Raises:
            PreferencesError: The preferences file cannot be used.
        """
        with self._lock:
            scan = self._finder.find(self.root, progress=progress)
            memory_stamp = _stamp(self.root / MEMORY_FILE_NAME)
            project_stamp = _stamp(self.root / PROJECT_FILE)
            preferences_stamp = _stamp(self._preferences_file) if self._preferences_file is not None else None
            previous = self._snapshot
            if (
                previous is not None
                and previous.scan is scan
                and memory_stamp == self._memory_stamp
                and project_stamp == self._project_stamp
                and preferences_stamp == self._preferences_stamp
            ):
                return previous
            preferences = self._load_preferences(preferences_stamp)
            if previous is None or project_stamp != self._project_stamp:
                try:
                    self._project = load_project(self.root, allowed_roots=tuple(map(Path, self._allowed_roots)))
                    self._project_problem = None
                except ProjectFileError as exc:  # skipped with its reason; read again once the file changes
                    self._project, self._project_problem = None, exc
                self._project_stamp = project_stamp
            if previous is None or memory_stamp != self._memory_stamp:
                self._memory = load_memory(
                    self.root,
                    max_tokens=self.memory_max_tokens,
                    estimator=self._estimator,
                    allowed_roots=self._allowed_roots,
                )
                self._memory_stamp = memory_stamp
            root_part: Part | None = None
            inlined: tuple[str, ...] = ()
            if "context_files" in self.preset.sections:  # the root file is shown only below the list
                root_part, inlined = root_context_part(
                    scan, max_tokens=self.inline_root_tokens, estimator=self._estimator
                )
            inputs = PromptInputs(
                working_dir=self.root.as_posix(),
                tools=self._all_tools,
                platform=self._platform,
                context_files=tuple(f.relative for f in scan.files),
                inlined_context_files=inlined,
                context_files_omitted=scan.omitted_over_cap,
            )
            parts = assemble_stable_parts(
                self.preset,
                inputs,
                preferences=preferences,
                root_part=root_part,
                memory=self._memory,
                project=self._project,
            )
            if previous is not None and StableContext.digest_of(parts) == StableContext.digest_of(previous.parts):
                parts = previous.parts  # same bytes: keep the very same object
            self._snapshot = WorkspaceSnapshot(
                root=self.root,
                preset=self.preset,
                scan=scan,
                inlined=inlined,
                preferences=preferences,
                memory=self._memory,
                parts=parts,
                project=self._project,
                project_problem=self._project_problem,
            )
            return self._snapshot

    def _load_preferences(self, stamp: _Stamp | None) -> Preferences:
        if self._fixed_preferences is not None:
            return self._fixed_preferences
        if self._preferences is None or stamp != self._preferences_stamp:
            assert self._preferences_file is not None
            if stamp is None and not self._preferences_explicit:
                preferences = Preferences()  # no file at the default place: no preferences
            else:
                preferences = load_preferences(self._preferences_file)
            # Stamped only after a successful read, so a broken file is read again on the next call.
            self._preferences, self._preferences_stamp = preferences, stamp
        return self._preferences


_RACY_NS: Final = 50_000_000
_racy_stamps = itertools.count(1)


def _stamp(path: Path) -> _Stamp | None:
    """What tells a changed file from an unchanged one without reading it; None when it is missing.

    A file changed so recently that a second change in the same clock tick would keep its stamp
    gets a stamp equal to no other, so it is read again on the next call, until it settles.
    """
    try:
        st = os.stat(path)
    except OSError:
        return None
    if st.st_ctime_ns >= time.time_ns() - _RACY_NS:  # the change time is the kernel's: never set ahead
        return (-1, next(_racy_stamps), 0, 0)
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def build_stable_parts(
    root: str | os.PathLike[str],
    *,
    preset: str | Preset = "default",
    custom_preset: str | os.PathLike[str] | None = None,
    tools: Sequence[ToolSpec],
    finder: ContextFileFinder | None = None,
    preferences: Preferences | None = None,
    preferences_path: str | os.PathLike[str] | None = None,
    platform: Platform | None = None,
    inline_root_tokens: int | None = None,
    memory_max_tokens: int = DEFAULT_MEMORY_MAX_TOKENS,
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
) -> tuple[Part, ...]:
    """The stable parts of `root` once, uncached (see `WorkspaceContext` for the arguments)."""
    return WorkspaceContext(
        root,
        preset=preset,
        custom_preset=custom_preset,
        tools=tools,
        finder=finder,
        preferences=preferences,
        preferences_path=preferences_path,
        platform=platform,
        inline_root_tokens=inline_root_tokens,
        memory_max_tokens=memory_max_tokens,
        estimator=estimator,
    ).stable_parts()
