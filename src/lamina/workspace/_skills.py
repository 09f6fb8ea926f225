"""Skills: the `SKILL.md` files of the workspace and the user, found and checked (I/O: disk, environment).

A skill is a folder holding a `SKILL.md` whose YAML front matter names and describes it (design
chapter §10.9, SPEC F8). `find_skills` looks in `<root>/.lamina/skills/` and the user's folder;
a file that cannot be used is a `SkillProblem`, never an error. The catalogue part is in
`_skill_catalogue`, `[skill:name]` mentions in `_skill_mentions`. See docs/workspace.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import platformdirs

from lamina.workspace._confine import outside_roots

__all__ = [
    "SKILLS_ENV_VAR",
    "SKILL_FILE_NAME",
    "WORKSPACE_SKILLS_DIR",
    "Skill",
    "SkillProblem",
    "SkillScan",
    "default_user_skills_dir",
    "find_skills",
    "skill_stamps",
]

SKILL_FILE_NAME: Final = "SKILL.md"
WORKSPACE_SKILLS_DIR: Final = Path(".lamina", "skills")
"""Where a workspace keeps its skills, relative to its root."""
SKILLS_ENV_VAR: Final = "LAMINA_SKILLS_DIR"
"""Environment variable naming the user-level skills folder."""

_NAME_RE: Final = re.compile(r"[a-z0-9][a-z0-9_-]*")
_MAX_NAME_CHARS: Final = 64
_MAX_FILE_BYTES: Final = 1_048_576
_FIELDS: Final = ("name", "description", "required_sources", "allowed_tools")

Scope = Literal["workspace", "user"]


@dataclass(frozen=True, slots=True)
class Skill:
    """One usable skill: its front matter and where its `SKILL.md` is."""

    name: str
    """Unique identity, as written in `[skill:name]`."""
    description: str
    """What the skill is for, stripped; shown (bounded) in the catalogue."""
    path: Path
    """Absolute path of the `SKILL.md` file."""
    required_sources: tuple[str, ...] = ()
    """Sources to enable before a turn that uses the skill."""
    allowed_tools: tuple[str, ...] | None = None
    """The tools the skill may use; None when it does not say."""
    scope: Scope = "workspace"
    """Whether the skill came from the workspace or the user's folder."""


@dataclass(frozen=True, slots=True)
class SkillProblem:
    """A `SKILL.md` (or skills folder) that could not be used, and why; the skill is skipped."""

    path: Path
    field: str | None
    """The front matter field at fault, or None when the file as a whole is."""
    reason: str

    def __str__(self) -> str:
        where = f"{self.path}: {self.field}" if self.field else str(self.path)
        return f"{where}: {self.reason}"


@dataclass(frozen=True, slots=True)
class SkillScan:
    """The skills found for a workspace."""

    skills: tuple[Skill, ...]
    """The usable skills, sorted by name, names unique."""
    shadowed: tuple[Skill, ...] = ()
    """User-level skills hidden by a workspace skill of the same name."""
    problems: tuple[SkillProblem, ...] = ()

    def get(self, name: str) -> Skill | None:
        """The skill called `name`, or None."""
        return next((s for s in self.skills if s.name == name), None)


# --- discovery ------------------------------------------------------------------------------------


def default_user_skills_dir(*, environ: Mapping[str, str] | None = None) -> tuple[Path, bool]:
    """The user-level skills folder when none is given, and whether it was named explicitly.

    `$LAMINA_SKILLS_DIR` when set (explicit), else `skills` in the user's configuration directory.
    """
    env = os.environ if environ is None else environ
    named = env.get(SKILLS_ENV_VAR, "").strip()
    if named:
        return Path(named).expanduser(), True
    return platformdirs.user_config_path("lamina") / "skills", False


def find_skills(
    root: str | os.PathLike[str],
    *,
    user_dir: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    allowed_roots: Sequence[str | os.PathLike[str]] = (),
) -> SkillScan:
    """The skills of the workspace at `root` and of the user's skills folder.

    Args:
        root: The workspace root; its skills are in `.lamina/skills/<folder>/SKILL.md`.
        user_dir: The user-level skills folder; else `$LAMINA_SKILLS_DIR`, else the default one.
            A folder named explicitly (here or in the environment) that does not exist is a problem;
            a missing default folder just means no user-level skills.
        environ: The environment to read (default `os.environ`).
        allowed_roots: Folders besides `root` that a workspace skill (its folder or `SKILL.md`)
            may resolve into through a link; one resolving elsewhere is a problem, skipped. The
            user's own folder is the user's choice and is not confined.
    """
    workspace_dir = Path(root).absolute() / WORKSPACE_SKILLS_DIR
    if user_dir is not None:
        user, explicit = Path(user_dir).expanduser(), True
    else:
        user, explicit = default_user_skills_dir(environ=environ)
    user = user.absolute()
    problems: list[SkillProblem] = []
    workspace = _scan_dir(workspace_dir, "workspace", problems, confine=(Path(root), *allowed_roots))
    if explicit and not user.is_dir():
        problems.append(SkillProblem(user, None, "skills folder not found"))
        users: dict[str, Skill] = {}
    elif _same_dir(user, workspace_dir):
        users = {}
    else:
        users = _scan_dir(user, "user", problems)
    shadowed = tuple(users.pop(name) for name in sorted(users.keys() & workspace.keys()))
    merged = {**users, **workspace}
    return SkillScan(
        skills=tuple(merged[name] for name in sorted(merged)),
        shadowed=shadowed,
        problems=tuple(problems),
    )


SkillStamps = tuple[tuple[str, int, int, int, int], ...]
"""What `skill_stamps` returns: `(path, mtime, ctime, size, inode)` per folder and `SKILL.md`."""


def skill_stamps(
    root: str | os.PathLike[str],
    *,
    user_dir: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> SkillStamps:
    """A cheap fingerprint of everything `find_skills` reads: equal stamps, equal scan.

    One `stat` per skills folder, skill folder and `SKILL.md` (links followed), no file read. A
    new, removed or renamed skill changes its folder's stamp; an edit, even one that puts the
    modification time back, changes the file's change time.
    """
    folders = [Path(root).absolute() / WORKSPACE_SKILLS_DIR]
    folders.append(Path(user_dir).expanduser() if user_dir is not None else default_user_skills_dir(environ=environ)[0])
    stamps: list[tuple[str, int, int, int, int]] = []

    def add(path: str) -> bool:
        try:
            st = os.stat(path)
        except OSError:
            return False
        stamps.append((path, st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino))
        return True

    for folder in folders:
        if not add(str(folder)):
            continue
        try:
            names = sorted(entry.name for entry in os.scandir(folder))
        except OSError:
            continue
        for name in names:
            if add(os.path.join(folder, name)):
                add(os.path.join(folder, name, SKILL_FILE_NAME))
    return tuple(stamps)


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.is_dir() and b.is_dir() and a.samefile(b)
    except OSError:
        return False


def _scan_dir(
    folder: Path,
    scope: Scope,
    problems: list[SkillProblem],
    *,
    confine: Sequence[str | os.PathLike[str]] | None = None,
) -> dict[str, Skill]:
    """The skills in the direct sub-folders of `folder`, by name; problems appended to `problems`.

    With `confine`, the folder, each skill folder and each `SKILL.md` must resolve inside one of
    those roots; one that does not is reported and skipped.
    """
    if confine is not None and folder.exists():
        outside = outside_roots(folder, confine)
        if outside is not None:
            problems.append(SkillProblem(folder, None, f"skills folder {outside}"))
            return {}
    try:
        entries = sorted(folder.iterdir(), key=lambda p: p.name)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        if folder.exists():
            problems.append(SkillProblem(folder, None, f"cannot list skills folder: {_os_reason(exc)}"))
        return {}
    found: dict[str, Skill] = {}
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        path = entry / SKILL_FILE_NAME
        if not path.is_file():
            continue
        outside = outside_roots(path, confine) if confine is not None else None
        if outside is not None:
            problems.append(SkillProblem(path, None, outside))
            continue
        skill = _load_skill(path, scope, problems)
        if skill is None:
            continue
        if skill.name in found:
            first = found[skill.name].path
            problems.append(SkillProblem(path, "name", f"skill {skill.name!r} is already defined in {first}"))
            continue
        found[skill.name] = skill
    return found


def _os_reason(exc: OSError) -> str:
    return (exc.strerror or type(exc).__name__).lower()


def _load_skill(path: Path, scope: Scope, problems: list[SkillProblem]) -> Skill | None:
    try:
        with path.open("rb") as handle:
            data = handle.read(_MAX_FILE_BYTES + 1)
    except OSError as exc:
        problems.append(SkillProblem(path, None, f"cannot read: {_os_reason(exc)}"))
        return None
    if len(data) > _MAX_FILE_BYTES:
        problems.append(SkillProblem(path, None, f"file is larger than {_MAX_FILE_BYTES} bytes"))
        return None
    if b"\x00" in data:
        problems.append(SkillProblem(path, None, "binary file (contains NUL bytes)"))
        return None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        problems.append(SkillProblem(path, None, f"not UTF-8 (invalid byte at offset {exc.start})"))
        return None
    try:
        fields = _front_matter(text)
        return _skill_from(fields, path.absolute(), scope)
    except _FieldError as exc:
        problems.append(SkillProblem(path, exc.field, exc.reason))
        return None


class _FieldError(Exception):
    def __init__(self, field: str | None, reason: str) -> None:
        super().__init__(reason)
        self.field = field
        self.reason = reason


_FENCE_RE: Final = re.compile(r"---[ \t]*")
_END_RE: Final = re.compile(r"(?:---|\.\.\.)[ \t]*")


def _front_matter(text: str) -> dict[str, object]:
    """The front matter mapping at the top of `text`, between a `---` line and a `---` (or `...`) line."""
    lines = text.splitlines()
    if not lines or not _FENCE_RE.fullmatch(lines[0]):
        raise _FieldError(None, "no front matter (the file must start with a '---' line)")
    end = next((i for i, line in enumerate(lines[1:], 1) if _END_RE.fullmatch(line)), None)
    if end is None:
        raise _FieldError(None, "front matter is not closed by a '---' line")
    import yaml  # here, not at the top: a workspace without skills never needs it

    try:
        loaded = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise _FieldError(None, f"front matter is not valid YAML{where}: {problem}") from None
    except (ValueError, TypeError, RecursionError) as exc:  # e.g. a date such as 2024-02-30
        raise _FieldError(None, f"front matter is not valid YAML: {exc}") from None
    if loaded is None:
        raise _FieldError(None, "front matter is empty")
    if not isinstance(loaded, dict):
        raise _FieldError(None, f"front matter must be a mapping of fields, not {_type_name(loaded)}")
    fields: dict[str, object] = {}
    for key, value in loaded.items():
        if not isinstance(key, str):
            raise _FieldError(str(key), f"field names must be text, not {_type_name(key)}")
        fields[key] = value
    return fields


def _type_name(value: object) -> str:
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        list: "a list",
        dict: "a mapping",
        str: "text",
    }.get(type(value), f"a {type(value).__name__}")


def _normalise_key(key: str) -> str:
    return key.strip().casefold().replace("-", "_").replace(" ", "_")


def _skill_from(fields: dict[str, object], path: Path, scope: Scope) -> Skill:
    for key in fields:
        if key not in _FIELDS and _normalise_key(key) in _FIELDS:
            raise _FieldError(key, f"unknown field; did you mean {_normalise_key(key)!r}?")
    name = _text_field(fields, "name")
    if len(name) > _MAX_NAME_CHARS:
        raise _FieldError("name", f"name is longer than {_MAX_NAME_CHARS} characters")
    if not _NAME_RE.fullmatch(name):
        raise _FieldError(
            "name",
            f"{name!r} is not a valid name: lower-case letters, digits, '-' and '_', starting with a letter or digit",
        )
    description = _text_field(fields, "description")
    sources = _list_field(fields, "required_sources")
    tools = _list_field(fields, "allowed_tools")
    return Skill(
        name=name,
        description=description,
        path=path,
        required_sources=sources or (),
        allowed_tools=tools,
        scope=scope,
    )


def _text_field(fields: Mapping[str, object], field: str) -> str:
    if field not in fields or fields[field] is None:
        raise _FieldError(field, "missing")
    value = fields[field]
    if not isinstance(value, str):
        raise _FieldError(field, f"must be text, not {_type_name(value)}")
    if not value.strip():
        raise _FieldError(field, "empty")
    return value.strip()


def _list_field(fields: Mapping[str, object], field: str) -> tuple[str, ...] | None:
    value = fields.get(field)
    if value is None:
        return None
    if not isinstance(value, list):
        raise _FieldError(field, f"must be a list of names, not {_type_name(value)}")
    items: list[str] = []
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            what = "empty text" if isinstance(item, str) else _type_name(item)
            raise _FieldError(field, f"item {i + 1} must be a non-empty name, not {what}")
        if item.strip() not in items:
            items.append(item.strip())
    return tuple(items)
