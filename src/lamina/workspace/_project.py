"""The project manifest: `.lamina/project.toml`, a short description and the important paths (I/O: disk).

A workspace that has the file gets one stable part, `project.manifest` (design chapter
§10.1–10.2), wrapped by `defang` as project text. A file that cannot be used is a
`ProjectFileError` naming the file and the field. The format and its limits: docs/workspace.md,
"The project manifest".
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated, Final, TypeAlias

import msgspec

from lamina._typed_toml import TomlProblem, read_toml
from lamina.context import Authority, Part, Stability, Tier
from lamina.defang import defang, join, render_block, trusted
from lamina.errors import UsageError
from lamina.workspace._confine import outside_roots

__all__ = [
    "PROJECT_FILE",
    "ProjectFileError",
    "ProjectManifest",
    "load_project",
    "parse_project",
    "project_part",
]

PROJECT_FILE: Final = PurePosixPath(".lamina/project.toml")
"""Where the manifest lives, relative to the workspace."""

_MAX_BYTES: Final = 262_144
_MAX_DESCRIPTION: Final = 2_000
_MAX_PATHS: Final = 100
_MAX_ITEM: Final = 300
_INTRO: Final = (
    "The project's description and its important paths, from its manifest (.lamina/project.toml). Paths are "
    "relative to the working directory; Read what the task needs."
)


class ProjectFileError(UsageError):
    """A project manifest that cannot be used; names the file and the field at fault."""

    def __init__(self, path: str, field: str | None, problem: str) -> None:
        self.path = path
        self.field = field
        """The field at fault, e.g. `description` or `paths[2]`; None for the file as a whole."""
        self.problem = problem
        where = f"{path}: {field}" if field is not None else path  # a field may be named "" in TOML
        super().__init__(f"project file {where}: {problem}")


_Fail: TypeAlias = Callable[[str | None, str], ProjectFileError]


class _ProjectFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The file as written; `parse_project` checks the lengths and the paths on top."""

    description: str = ""
    paths: Annotated[
        list[Annotated[str, msgspec.Meta(description="a path (a string)")]]
        | dict[str, Annotated[str, msgspec.Meta(description="a note (a string)")]],
        msgspec.Meta(description="a list of paths or a table of paths to notes"),
    ] = msgspec.field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ProjectManifest:
    """What `.lamina/project.toml` says about the project."""

    path: Path
    description: str
    paths: tuple[tuple[str, str], ...]
    """`(path, note)` pairs in file order; the note is empty when the file gives none."""


def load_project(root: str | os.PathLike[str], *, allowed_roots: tuple[Path, ...] = ()) -> ProjectManifest | None:
    """The manifest of the workspace `root`, or None when it has no `.lamina/project.toml`.

    Raises:
        ProjectFileError: The file exists but cannot be used; the message names it and the field.
    """
    path = Path(root) / PROJECT_FILE
    shown = str(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise ProjectFileError(shown, None, "a broken symlink") from None
        return None
    except OSError as exc:
        raise ProjectFileError(shown, None, f"cannot read: {(exc.strerror or 'error').lower()}") from None
    outside = outside_roots(path, (root, *allowed_roots))
    if outside is not None:
        raise ProjectFileError(shown, None, outside)
    if not stat.S_ISREG(st.st_mode):
        raise ProjectFileError(shown, None, "not a regular file")
    if st.st_size > _MAX_BYTES:
        raise ProjectFileError(shown, None, f"too large ({st.st_size:,} bytes; at most {_MAX_BYTES:,})")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ProjectFileError(shown, None, f"cannot read: {(exc.strerror or 'error').lower()}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ProjectFileError(shown, None, f"not UTF-8 (invalid byte at offset {exc.start})") from None
    return parse_project(text, path=path)


def parse_project(text: str, *, path: Path) -> ProjectManifest:
    """The manifest in the TOML `text` (see the module docstring for the format).

    Raises:
        ProjectFileError: Not TOML, an unknown field, a value of the wrong type, too long, or a bad path.
    """

    def fail(field: str | None, problem: str) -> ProjectFileError:
        return ProjectFileError(str(path), field, problem)

    try:
        raw = read_toml(text, _ProjectFile)
    except TomlProblem as exc:
        raise fail(exc.key, exc.problem) from None
    description = raw.description.strip()
    if len(description) > _MAX_DESCRIPTION:
        raise fail("description", f"is {len(description):,} characters; at most {_MAX_DESCRIPTION:,}")
    paths = _parse_paths(raw.paths, fail)
    if not description and not paths:
        raise fail(None, "empty: give a description, paths or both (or remove the file)")
    return ProjectManifest(path=path, description=description, paths=paths)


def _parse_paths(value: list[str] | dict[str, str], fail: _Fail) -> tuple[tuple[str, str], ...]:
    if isinstance(value, list):
        items = [(f"paths[{i}]", item, "") for i, item in enumerate(value)]  # (field, path, note)
    else:
        items = [(f"paths.{key}", key, note.strip()) for key, note in value.items()]
    if len(items) > _MAX_PATHS:
        raise fail("paths", f"lists {len(items)} paths; at most {_MAX_PATHS}")
    paths: list[tuple[str, str]] = []
    seen: set[str] = set()
    for field, given, note in items:
        problem = _path_problem(given)
        if problem is not None:
            raise fail(field, problem)
        if len(note) > _MAX_ITEM:
            raise fail(field, f"the note is {len(note):,} characters; at most {_MAX_ITEM}")
        if given in seen:
            raise fail(field, f"{given!r} is listed twice")
        seen.add(given)
        paths.append((given, note))
    return tuple(paths)


def _path_problem(path: str) -> str | None:
    if not path.strip():
        return "an empty path"
    if len(path) > _MAX_ITEM:
        return f"a path of {len(path):,} characters; at most {_MAX_ITEM}"
    if "\\" in path or any(ord(c) < 32 for c in path):
        return f"{path!r}: use `/` separators and no control characters"
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts:
        return f"{path!r} must be relative to the workspace and inside it (no leading `/`, no `..`)"
    return None


def project_part(manifest: ProjectManifest) -> Part:
    """The stable `project.manifest` part: the description and the path list, defanged as project text."""
    lines: list[str] = []
    if manifest.description:
        lines += [manifest.description, ""]
    if manifest.paths:
        lines.append("Important paths:")
        lines += [f"- {path}: {note}" if note else f"- {path}" for path, note in manifest.paths]
    body = "\n".join(lines).strip()
    source = str(PROJECT_FILE)
    wrapped = defang(body, source=source, authority=Authority.PROJECT_FILE, max_chars=20 * len(body) + 16)
    text = render_block("project_manifest", join("\n", [trusted(_INTRO), wrapped]), source=source)
    return Part("project.manifest", text, source, Authority.PROJECT_FILE, Stability.STABLE, Tier.CATALOGUE)
