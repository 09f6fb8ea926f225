"""Files under a folder as Glob and Grep see them, and glob patterns (I/O: disk).

`walk_files(base)` lists every file below `base`, skipping what a project search should skip:

- whatever the project's `.gitignore` files (and `.git/info/exclude`) ignore, with the same rules
  as the context-file scan (`lamina.workspace._ignore`): nested files, `!` re-includes, and the
  enclosing work tree's rules above `base`;
- version-control folders (`.git`, `.hg`, `.svn`, …);
- dependency folders (`node_modules`, …), `__pycache__` and virtual environments (any folder
  holding a `pyvenv.cfg`), unless git tracks a file in them (inside a git work tree, one
  `git ls-files` over those folders once the rest is walked).

Other dot-files and dot-folders are listed (`.github/workflows/ci.yml` is worth finding). `base`
itself is always walked, even if it is ignored: naming it was a choice. Symlinked folders are
not followed (no loops, no escape); symlinked files are listed, flagged, and the caller decides.
Only regular files are listed: pipes, sockets and devices never are.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from lamina.workspace import SkippedPath
from lamina.workspace._ignore import IgnoreRules, is_ignored, load_ignore, rules_above, tracked_folders, work_tree_top

VCS_DIR_NAMES: Final = frozenset({".git", ".hg", ".svn", ".bzr", ".jj", "_darcs", "CVS"})
UNTRACKED_SKIPPED_DIR_NAMES: Final = frozenset(
    {"node_modules", "bower_components", "jspm_packages", "__pycache__", "site-packages"}
)
"""Folders skipped unless git tracks a file in them."""
SKIPPED_DIR_NAMES: Final = VCS_DIR_NAMES | UNTRACKED_SKIPPED_DIR_NAMES
GLOB_CHARS: Final = frozenset("*?[{\\")
_MAX_BRACE_EXPANSIONS: Final = 256


@dataclass(frozen=True, slots=True)
class FoundFile:
    """One file found by `walk_files`."""

    relative: str
    """POSIX path relative to the walk's base."""
    path: str
    """Absolute path (through the base as given: symlinks not resolved)."""
    symlink: bool


def walk_files(base: str) -> Iterator[FoundFile]:
    """Every file below the folder `base` that a project search should see, depth first."""
    skipped: list[SkippedPath] = []  # unreadable folders and rule files are simply passed over
    visited: set[tuple[int, int]] = set()
    stack: list[_Queued] = [(base, "", rules_above(base, skipped))]
    held: list[_Queued] = []
    entered: set[str] = set()  # held folders git tracks files in
    while True:
        while stack:
            yield from _visit(stack, held, visited, skipped, entered)
        if not held or work_tree_top(base) is None:
            return
        tracked = tracked_folders(base, [relative for _, relative, _ in held])
        stack = [item for item in reversed(held) if item[1] in tracked]
        entered.update(item[0] for item in stack)
        held = []


_Queued = tuple[str, str, tuple[IgnoreRules, ...]]


def _visit(
    stack: list[_Queued],
    held: list[_Queued],
    visited: set[tuple[int, int]],
    skipped: list[SkippedPath],
    entered: set[str],
) -> list[FoundFile]:
    item = stack.pop()
    folder, relative, chain = item
    try:
        st = os.stat(folder)
        with os.scandir(folder) as listing:
            entries = sorted(listing, key=lambda entry: entry.name, reverse=True)
    except OSError:
        return []
    names = {entry.name for entry in entries}
    if relative and "pyvenv.cfg" in names and folder not in entered:
        held.append(item)  # a virtual environment: entered only if git tracks files in it
        return []
    if st.st_ino:
        if (st.st_dev, st.st_ino) in visited:
            return []  # a bind mount inside itself
        visited.add((st.st_dev, st.st_ino))
    prefix = relative + "/" if relative else ""
    if ".gitignore" in names:
        rules = load_ignore(
            os.path.join(folder, ".gitignore"),
            strip=len(prefix),
            prefix="",
            relative=prefix + ".gitignore",
            skipped=skipped,
        )
        if rules is not None:
            chain = (*chain, rules)
    files: list[FoundFile] = []
    for entry in entries:
        child = prefix + entry.name
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
            symlink = entry.is_symlink()
            # Regular files only (through a link too): a FIFO would block a reader forever.
            is_file = not is_dir and entry.is_file()
        except OSError:
            continue
        if is_dir:
            if entry.name not in VCS_DIR_NAMES and not (chain and is_ignored(chain, child + "/")):
                queued = (entry.path, child, chain)
                (held if entry.name in UNTRACKED_SKIPPED_DIR_NAMES else stack).append(queued)
        elif is_file and not (chain and is_ignored(chain, child)):
            files.append(FoundFile(relative=child, path=entry.path, symlink=symlink))
    files.reverse()
    return files


def split_glob(pattern: str) -> tuple[str, str]:
    """Split `pattern` into its literal leading folders and the rest: `src/**/*.py` → (`src`, `**/*.py`).

    A pattern without wildcards splits before its last segment (`a/b.py` → (`a`, `b.py`)).
    """
    segments = pattern.split("/")
    magic = (i for i, segment in enumerate(segments) if any(char in GLOB_CHARS for char in segment))
    index = next(magic, len(segments) - 1)
    prefix = "/".join(segments[:index])
    if not prefix and pattern.startswith("/"):
        prefix = "/"
    return prefix, "/".join(segments[index:])


def compile_glob(pattern: str) -> re.Pattern[str]:
    """A regex that fully matches the POSIX paths `pattern` matches.

    `*` and `?` stay within one path segment, `**` spans any number of folders (`**/x` also
    matches `x`), `[abc]` / `[!abc]` are character classes and `{a,b}` alternatives. `*` also
    matches names starting with a dot.

    Raises:
        ValueError: The pattern expands to too many alternatives.
    """
    alternatives = _expand_braces(pattern)
    if len(alternatives) > _MAX_BRACE_EXPANSIONS:
        raise ValueError(f"the pattern expands to more than {_MAX_BRACE_EXPANSIONS} alternatives")
    return re.compile("|".join(f"(?:{_translate(alternative)})" for alternative in alternatives), re.DOTALL)


def _expand_braces(pattern: str) -> list[str]:
    start = pattern.find("{")
    while start != -1:
        depth, options, mark = 0, [], start + 1
        for index in range(start, len(pattern)):
            char = pattern[index]
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    options.append(pattern[mark:index])
                    head, tail = pattern[:start], pattern[index + 1 :]
                    if len(options) == 1:
                        break  # `{x}` is literal, as in bash
                    expanded: list[str] = []
                    for option in options:
                        expanded.extend(_expand_braces(head + option + tail))
                        if len(expanded) > _MAX_BRACE_EXPANSIONS:
                            break
                    return expanded
            elif char == "," and depth == 1:
                options.append(pattern[mark:index])
                mark = index + 1
        start = pattern.find("{", start + 1)
    return [pattern]


def _translate(pattern: str) -> str:
    segments = pattern.split("/")
    out: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
        else:
            out.append(_translate_segment(segment) + ("" if last else "/"))
    return "".join(out)


def _translate_segment(segment: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(segment):
        char = segment[index]
        index += 1
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "\\" and index < len(segment):
            out.append(re.escape(segment[index]))
            index += 1
        elif char == "[":
            end = segment.find("]", index + 1 if segment[index : index + 1] in ("!", "^") else index)
            if end == -1:
                out.append(re.escape(char))
                continue
            body = segment[index:end]
            index = end + 1
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            out.append(("[^/" if negate else "[") + body.replace("\\", "\\\\").replace("[", "\\[") + "]")
        else:
            out.append(re.escape(char))
    return "".join(out)
