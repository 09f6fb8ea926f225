"""Files under a folder as Glob and Grep see them, and glob patterns (I/O: disk).

`walk_files(base)` lists every regular file below `base` that a project search should see, through
`lamina.workspace.walk_folders`: git's ignore rules, version-control folders never entered,
dependency folders and virtual environments only where git tracks files. See docs/tools.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from lamina.workspace import WalkedFile, WalkPolicy, walk_folders

UNTRACKED_SKIPPED_DIR_NAMES: Final = frozenset(
    {"node_modules", "bower_components", "jspm_packages", "__pycache__", "site-packages"}
)
"""Folders skipped unless git tracks a file in them."""
GLOB_CHARS: Final = frozenset("*?[{\\")
_MAX_BRACE_EXPANSIONS: Final = 256
_SEARCH: Final = WalkPolicy(regular_files_only=True, held_names=UNTRACKED_SKIPPED_DIR_NAMES)


def walk_files(base: str, *, root_key: tuple[int, int] | None = None) -> Iterator[WalkedFile]:
    """Every file below the folder `base` that a project search should see, depth first (I/O: disk, git).

    With `root_key` (the `(st_dev, st_ino)` the caller found at `base`), nothing is walked if `base`
    is another folder by then; a sub-folder is entered only while it is the one its parent listed.
    """
    # unreadable folders, changed folders and rule files are passed over
    for folder in walk_folders(base, _SEARCH, skipped=[], root_key=root_key):
        yield from folder.files


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
