"""Skills and sources in a session: mentions become required reads, sources need their guides (I/O: reads the skills).

A `[skill:name]` in the new user text, or a skill the turn's task names, registers a required
read of that `SKILL.md`; a source's tools are gated by its guide; an active skill's
`allowed_tools` is enforced by `SkillToolsRule`. The rules in full: `docs/agent.md`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from lamina.context import Part
from lamina.engine import ContextEngine
from lamina.session import CompactionBoundary
from lamina.sources import calls_to_source, slug_problem
from lamina.tools import Allow, BoundCall, Deny, PrerequisiteManager, Rule, ToolOutput, ToolPipeline, Verdict
from lamina.workspace import (
    ContextFileFinder,
    Skill,
    SkillScan,
    SkillStamps,
    find_skills,
    parse_skill_mentions,
    resolve_mentions,
    skill_catalogue_part,
    skill_stamps,
)

__all__ = [
    "Activation",
    "SkillCatalogue",
    "SkillToolsRule",
    "SkillWarning",
    "nearest_context_paths",
]

_TOOL_NAME_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
"""A tool name as shown to the model; other text from a skill's front matter is not shown."""


@dataclass(frozen=True, slots=True)
class SkillWarning:
    """Something the user should know about skills, prerequisites and workspace files.

    An unknown skill mention (noted for the model too, never a failed turn), an agent stuck on a
    required read, a `.lamina/project.toml` skipped at start (`name` is then the file), or Bash
    running without its sandbox (`name` is `sandbox`; said once, as its first command runs).
    """

    name: str
    message: str


class SkillCatalogue:
    """The workspace's skills and their catalogue part, rescanned only when a skill file changed."""

    def __init__(self, root: Path, *, user_dir: Path | None = None) -> None:
        """Set up the catalogue; nothing is scanned until it is first asked for.

        Args:
            root: The workspace root whose skills are scanned.
            user_dir: The user-level skills folder; else `$LAMINA_SKILLS_DIR`, else the default one.
        """
        self.root = root
        self.user_dir = user_dir
        self._signature: SkillStamps | None = None
        self._scan = SkillScan(skills=())
        self._part: Part | None = None

    def _current_signature(self) -> SkillStamps:
        return skill_stamps(self.root, user_dir=self.user_dir)

    @property
    def scan(self) -> SkillScan:
        """The skills found, rescanned first when a skill file changed."""
        self._refresh()
        return self._scan

    def parts(self) -> tuple[Part, ...]:
        """The catalogue as stable parts (empty without skills)."""
        self._refresh()
        return (self._part,) if self._part is not None else ()

    def _refresh(self) -> None:
        signature = self._current_signature()
        if signature != self._signature:
            self._signature = signature
            self._scan = find_skills(self.root, user_dir=self.user_dir)
            self._part = skill_catalogue_part(self._scan)


class Activation:
    """Turns skill mentions and sources into prerequisites for one session."""

    def __init__(
        self,
        engine: ContextEngine,
        manager: PrerequisiteManager,
        catalogue: SkillCatalogue,
        *,
        cwd: Path,
    ) -> None:
        """Activation for one session.

        Args:
            engine: The session's context engine (it queues the one-shot reminders).
            manager: The tool pipeline's required reads.
            catalogue: The workspace's skills.
            cwd: The working directory tool paths are resolved against.
        """
        self.engine = engine
        self.manager = manager
        self.catalogue = catalogue
        self.cwd = cwd
        self._in_use: dict[str, Skill] = {}
        self._active: tuple[Skill, ...] = ()
        self._guides: dict[str, Path] = {}
        self.turn_hooks: list[Callable[[], None]] = []
        """Called at the end of `before_turn` (the deferred tools choose the turn's tool set)."""
        engine.compactor.hooks.append(self.after_compaction)
        engine.provider_sessions.reset_hooks.append(self.after_compaction)  # the provider compacted its own context
        for name in engine.settings.skills_in_use:  # a resumed session: the skills invoked before it
            skill = catalogue.scan.get(name)
            if skill is not None:
                self._in_use[name] = skill

    @property
    def skills_in_use(self) -> tuple[Skill, ...]:
        """The skills mentioned or invoked in this session, in order of first use."""
        return tuple(self._in_use.values())

    @property
    def active_skills(self) -> tuple[Skill, ...]:
        """The skills the current turn invoked: its task (see `docs/agent.md`)."""
        return self._active

    def allowed_tools(self) -> frozenset[str] | None:
        """The tools the active skills allow, or None when nothing restricts the calls."""
        if not self._active or any(s.allowed_tools is None for s in self._active):
            return None
        return frozenset(name for s in self._active for name in s.allowed_tools or ())

    def rule(self) -> Rule:
        """The pipeline rule that enforces the active skills' `allowed_tools`."""
        return SkillToolsRule(self)

    def add_source(self, slug: str, guide: Path) -> None:
        """Gate the tools of source `slug`: its guide must be read first in each context window."""
        self._guides[slug] = guide
        self.manager.require(
            guide,
            cwd=self.cwd,
            reason=f"source '{slug}' needs its guide",
            key=f"guide:{slug}",
            applies_to=calls_to_source(slug),
        )

    def before_turn(self, user_text: str, skills: Sequence[str] = ()) -> tuple[SkillWarning, ...]:
        """Register what the user's new text and the turn's task ask for.

        Call once per turn, before `prepare_turn`.

        Args:
            user_text: The user's new text, whose `[skill:name]` mentions become required reads.
            skills: Skills the turn's task names, each handled as a mention.

        Returns:
            Warnings for the user (an unknown skill mentioned).
        """
        names = (*parse_skill_mentions(user_text), *skills)
        resolution = resolve_mentions(names, self.catalogue.scan)
        self._active = resolution.found
        warnings = tuple(
            SkillWarning(name, f"unknown skill [skill:{name}]; known skills: {self._known()}")
            for name in resolution.unknown
        )
        for warning in warnings:
            self.engine.queue_one_shot(
                "note", f"The user mentioned [skill:{warning.name}], but there is no such skill ({self._known()})."
            )
        needed_sources: list[str] = []
        if resolution.found:
            self.engine.settings.add_skills([s.name for s in resolution.found])
        for skill in resolution.found:
            self._in_use[skill.name] = skill
            self._require(skill)
            only = ""
            if skill.allowed_tools is not None:
                shown = [t for t in skill.allowed_tools if _TOOL_NAME_RE.fullmatch(t)]  # front matter is untrusted
                only = f" While it is the task, only these tools run: {', '.join(shown) or 'none'}."
            self.engine.queue_one_shot(
                "note",
                f"The user invoked the skill '{skill.name}': read {skill.path} before doing anything else.{only}",
            )
            # only names that can be a source's slug: a SKILL.md field is untrusted text
            needed = (s for s in skill.required_sources if slug_problem(s) is None)
            needed_sources += [s for s in needed if s not in self.engine.settings.active_sources]
        if needed_sources:  # the skill's sources are ready before its turn starts (a recorded state change)
            self.engine.settings.set_sources([*self.engine.settings.active_sources, *dict.fromkeys(needed_sources)])
        self._run_hooks()
        return warnings

    def _run_hooks(self) -> None:
        for hook in self.turn_hooks:
            hook()

    def _require(self, skill: Skill) -> None:
        self.manager.require(
            skill.path, cwd=self.cwd, reason=f"the skill '{skill.name}' was invoked", key=f"skill:{skill.name}"
        )

    def _known(self) -> str:
        names = [s.name for s in self.catalogue.scan.skills]
        return ", ".join(names[:20]) + (" …" if len(names) > 20 else "") if names else "none"

    def after_branch(self, reads: Iterable[tuple[BoundCall, ToolOutput]]) -> None:
        """The session moved to another branch (or was reopened): the skills in use and the reads met become its path's.

        `reads` are the calls of the branch's current context window with their outputs, in order
        (`ContextEngine.window_calls`, bound by the pipeline). A skill invoked only on the path
        left is dropped; every skill in use on the branch is required again and is met only if the
        branch's window read it. The active sources' guides stay (sources are the user's setting).
        """
        in_use: dict[str, Skill] = {}
        for name in self.engine.settings.skills_in_use:
            skill = self.catalogue.scan.get(name)
            if skill is not None:
                in_use[name] = skill
        for name in self._in_use.keys() - in_use.keys():
            self.manager.forget(f"skill:{name}")
        self._in_use, self._active = in_use, ()
        self.manager.reset()
        for call, output in reads:
            self.manager.hear(call, output)
        for skill in in_use.values():
            self._require(skill)

    def after_compaction(self, boundary: CompactionBoundary | None = None) -> None:
        """Forget every read; the skills still in use must be read again (guides gate again by themselves).

        The model is told once which SKILL.md files to read again before its next tool call, instead
        of finding out from a denied call.
        """
        self.manager.reset()
        for skill in self._in_use.values():
            self._require(skill)
        if self._in_use:
            files = ", ".join(str(s.path) for s in self._in_use.values())
            self.engine.queue_one_shot(
                "skills_reread",
                f"The conversation was compacted. Skills in use: {', '.join(self._in_use)}. "
                f"Read these SKILL.md files again before your next tool call: {files}.",
            )


class SkillToolsRule(Rule):
    """Denies a call to a tool the active skills do not allow (their `allowed_tools`)."""

    def __init__(self, activation: Activation) -> None:
        """The rule for one session's activation.

        Args:
            activation: Which skills are active, and the tools they allow.
        """
        self._activation = activation

    @property
    def name(self) -> str:
        """Shown in decisions as `rule:skill_allowed_tools`."""
        return "skill_allowed_tools"

    async def check(self, call: BoundCall) -> Verdict:
        """Allow the call when the active skills allow its tool, or it reads an active skill's `SKILL.md`.

        Args:
            call: The tool call about to run.

        Returns:
            `Allow`, or `Deny` naming the tools the active skills allow.
        """
        allowed = self._activation.allowed_tools()
        if allowed is None or call.name in allowed:
            return Allow()
        active = self._activation.active_skills
        if call.name == "Read" and call.paths and set(call.paths) <= {s.path.resolve() for s in active}:
            return Allow()  # the required read of the skill itself
        names = ", ".join(f"'{s.name}'" for s in active)
        shown = ", ".join(sorted(t for t in allowed if _TOOL_NAME_RE.fullmatch(t))) or "none"
        return Deny(
            f"{call.name} is not allowed while the skill {names} is the task: it allows only {shown}. "
            "Use those tools, or finish and tell the user what else is needed."
        )


def nearest_context_paths(finder: ContextFileFinder, cwd: Path) -> Callable[[Path], list[Path]]:
    """`finder.nearest(cwd, path)` as the list of paths the nearest-context-file rule wants."""

    def nearest(path: Path) -> list[Path]:
        return [f.path for f in finder.nearest(cwd, path)]

    return nearest


def window_reads(engine: ContextEngine, pipeline: ToolPipeline) -> Iterator[tuple[BoundCall, ToolOutput]]:
    """The logged calls of the current context window as the pipeline's rules heard them."""
    for call, result in engine.window_calls():
        bound = pipeline.bind(call.call_id, call.name, call.input)
        if bound is not None:
            yield bound, ToolOutput(result.content, is_error=result.is_error)
