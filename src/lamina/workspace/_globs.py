r"""Lamina's one glob dialect, from wcmatch (pure): the Glob tool, Grep's filter and path rules.

Bash's globs with `**` (`GLOBSTAR | BRACE | DOTMATCH`): `*` and `?` stay within one name and
match dot files, `**` spans any number of folders (`**/x` matches `x` too), `[abc]`, `[!abc]`,
`[]a]` and `[[:alpha:]]` are character classes, `{a,b}` and `{1..3}` expand (at most
`BRACE_LIMIT` alternatives), `\` escapes. A pattern that cannot be used raises `GlobError`,
whose message the tools hand to the model. See docs/tools.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from wcmatch import glob

from lamina.errors import UsageError

FLAGS: Final = glob.GLOBSTAR | glob.BRACE | glob.DOTMATCH
"""wcmatch's flags for every glob Lamina reads."""
BRACE_LIMIT: Final = 1000
"""Most alternatives one pattern's braces may expand to (wcmatch's own limit)."""
GLOB_CHARS: Final = frozenset("*?[{\\")
"""The characters that make a path segment a pattern rather than a literal name."""


class GlobError(UsageError, ValueError):
    """A glob pattern that cannot be used: the message says why, for the model or the user."""

    def __init__(self, pattern: str, reason: str) -> None:
        self.pattern = pattern
        self.reason = reason
        super().__init__(f"not a usable glob {pattern!r}: {reason}")


@dataclass(frozen=True, slots=True)
class PathGlob:
    """A compiled glob over POSIX paths (relative, or absolute for a pattern that is)."""

    pattern: str
    _matcher: glob.WcMatcher[str] = field(repr=False, compare=False)

    def matches(self, path: str) -> bool:
        """Whether the whole of `path` matches (no file system is read)."""
        return bool(self._matcher.match(path))


def compile_glob(pattern: str) -> PathGlob:
    """The glob `pattern` in Lamina's dialect.

    Raises:
        GlobError: The pattern expands to more than `BRACE_LIMIT` alternatives, or wcmatch
            refuses it.
    """
    try:
        matcher = glob.compile(pattern, flags=FLAGS, limit=BRACE_LIMIT)
    except Exception as exc:  # wcmatch's errors have no common base; every one is the pattern's
        raise GlobError(pattern, _reason(exc)) from None
    return PathGlob(pattern, matcher)


def _reason(exc: Exception) -> str:
    if type(exc).__name__ == "PatternLimitException":
        return f"its braces expand to more than {BRACE_LIMIT:,} alternatives"
    return str(exc) or type(exc).__name__


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
