"""Git ignore rules for walks over a working directory: load, chain and apply them (I/O: disk).

Shared by the context-file scan (`context_files.py`) and the Glob and Grep tools, so that every
walk over a project ignores the same paths. A walk keeps a *chain* of `IgnoreRules`, shallowest
first: `rules_above(root)` gives the rules of the enclosing git work tree that apply below the
root (`.git/info/exclude` and the `.gitignore` files between the work tree's top and the root),
and the walk appends each folder's own `.gitignore` (`load_ignore`) as it enters the folder.
`is_ignored(chain, relative)` then answers as git does: a deeper file's verdict overrides a
shallower one's and `!` re-includes. Folder paths are given with a trailing `/`.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pathspec

_NAMED_GROUP: Final = re.compile(r"\(\?P<[^>]+>")


@dataclass(frozen=True, slots=True)
class SkippedPath:
    """A file or folder the scan could not use, and why."""

    path: Path
    relative: str
    """POSIX path relative to the scan root (`.` for the root itself)."""
    reason: str
    """Human-readable, e.g. `binary (contains a NUL byte)` or `cannot list folder: permission denied`."""


@dataclass(frozen=True, slots=True)
class IgnoreRules:
    """The rules of one `.gitignore` (or `info/exclude`) and how a scan path maps into its folder."""

    spec: pathspec.GitIgnoreSpec
    any_rule: re.Pattern[str] | None
    """All rules in one regex: most paths match none, and one C-level match is far cheaper."""
    strip: int
    """Characters to drop from a root-relative path: the rule file's folder below the root."""
    prefix: str
    """Text to put in front of a root-relative path: the root's folder below the rule file's."""

    def verdict(self, relative: str) -> bool | None:
        """True if ignored, False if re-included (`!`), None if no rule matches."""
        local = self.prefix + relative[self.strip :]
        if self.any_rule is not None and self.any_rule.match(local) is None:
            return None
        include: bool | None = self.spec.check_file(local).include
        return include


def is_ignored(chain: tuple[IgnoreRules, ...], relative: str) -> bool:
    """Whether the root-relative POSIX path `relative` (a folder ends in `/`) is ignored by `chain`."""
    # Shallowest rules first, so a deeper file's verdict (the last non-None) wins, as in git.
    ignored = False
    for rules in chain:
        verdict = rules.verdict(relative)
        if verdict is not None:
            ignored = verdict
    return ignored


def load_ignore(path: str, *, strip: int, prefix: str, relative: str, skipped: list[SkippedPath]) -> IgnoreRules | None:
    """The rules in the ignore file at `path`, or None when it has none (or cannot be read: see `skipped`)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        skipped.append(SkippedPath(Path(path), relative, f"cannot read .gitignore: {describe_os_error(exc)}"))
        return None
    spec = pathspec.GitIgnoreSpec.from_lines(data.decode("utf-8", errors="replace").splitlines())
    regexes = [p.regex for p in spec.patterns if p.include is not None and isinstance(p, pathspec.RegexPattern)]
    if not regexes:
        return None
    any_rule: re.Pattern[str] | None
    try:
        any_rule = re.compile("|".join(f"(?:{_NAMED_GROUP.sub('(?:', r.pattern)})" for r in regexes if r is not None))
    except (re.error, TypeError):
        any_rule = None  # fall back to checking every rule; slower, same answer
    return IgnoreRules(spec=spec, any_rule=any_rule, strip=strip, prefix=prefix)


def rules_above(root: str, skipped: list[SkippedPath]) -> tuple[IgnoreRules, ...]:
    """Rules from the enclosing git work tree that apply below `root` (empty outside a work tree)."""
    top = root
    while not os.path.lexists(os.path.join(top, ".git")):
        parent = os.path.dirname(top)
        if parent == top:
            return ()
        top = parent
    below = os.path.relpath(root, top).replace(os.sep, "/")
    below = "" if below == "." else below + "/"
    chain: list[IgnoreRules] = []
    exclude = os.path.join(top, ".git", "info", "exclude")
    if os.path.isfile(exclude):
        rules = load_ignore(exclude, strip=0, prefix=below, relative=os.path.relpath(exclude, root), skipped=skipped)
        if rules is not None:
            chain.append(rules)
    folder = top
    for part in below.split("/")[:-1]:  # the work tree's top, then each folder down to the root's parent
        _append_gitignore(chain, folder, root, skipped)
        folder = os.path.join(folder, part)
    if chain and is_ignored(tuple(chain), ""):
        return ()  # the root lies in an ignored folder: the user chose to work there, so look anyway
    return tuple(chain)


def _append_gitignore(chain: list[IgnoreRules], folder: str, root: str, skipped: list[SkippedPath]) -> None:
    path = os.path.join(folder, ".gitignore")
    if not os.path.isfile(path):
        return
    prefix = os.path.relpath(root, folder).replace(os.sep, "/") + "/"
    rules = load_ignore(path, strip=0, prefix=prefix, relative=os.path.relpath(path, root), skipped=skipped)
    if rules is not None:
        chain.append(rules)


def describe_os_error(exc: OSError) -> str:
    """A short lower-case reason for `exc`, e.g. `permission denied` or `symlink loop`."""
    if isinstance(exc, PermissionError):
        return "permission denied"
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    return (exc.strerror or type(exc).__name__).lower()
