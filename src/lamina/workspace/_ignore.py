"""Git ignore rules for walks over a working directory: load, chain and apply them (I/O: disk, environment).

A walk keeps a chain of `IgnoreRules`, shallowest first: `rules_above(root)` for the enclosing
work tree, then each folder's `.gitignore` (`load_ignore`); `is_ignored` answers as git does.
Patterns go through dulwich's reader and `wildmatch`, with git's own behaviour fixed at the edges;
a line git cannot use is a `SkippedPath`, never an error. See docs/workspace.md, "Ignore rules".
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from dulwich.config import ConfigFile, StackedConfig
from dulwich.ignore import Pattern, read_ignore_patterns, translate
from dulwich.wildmatch import MalformedPattern

_BOM: Final = b"\xef\xbb\xbf"
_GIT_TIMEOUT_SECONDS: Final = 10.0
_STAR_RUN: Final = re.compile(rb"(\\.)|\*{3,}")


@dataclass(frozen=True, slots=True)
class SkippedPath:
    """A file or folder the scan could not use (or a line of a rule file it left out), and why."""

    path: Path
    relative: str
    """POSIX path relative to the scan root (`.` for the root itself)."""
    reason: str
    """Human-readable, e.g. `binary (contains a NUL byte)` or `cannot list folder: permission denied`."""
    line: int | None = None
    """The line of an ignore file that was left out, counted from 1; None for a whole path."""


@dataclass(frozen=True, slots=True)
class IgnoreRules:
    """The rules of one ignore file (`.gitignore`, `info/exclude`, the global excludes file)."""

    patterns: tuple[Pattern, ...]
    """The usable lines, in file order."""
    for_files: re.Pattern[bytes] | None
    """One regex over every pattern that can match a file, last line first: the first alternative
    that matches is the line that decides (group `p<index>`). None when no line can match a file."""
    for_folders: re.Pattern[bytes] | None
    """The same over every pattern (folder-only lines included), for folders."""
    strip: int
    """Characters to drop from a root-relative path: the rule file's folder below the root."""
    prefix: str
    """Text to put in front of a root-relative path: the root's folder below the rule file's."""

    def verdict(self, relative: str) -> bool | None:
        """True if ignored, False if re-included (`!`), None if no line matches.

        `relative` is root-relative; a folder ends in `/`.
        """
        is_folder = relative.endswith("/")
        local = self.prefix + (relative[self.strip : -1] if is_folder else relative[self.strip :])
        return self.local_verdict(local, is_folder=is_folder)

    def local_verdict(self, local: str, *, is_folder: bool) -> bool | None:
        """`verdict` for a path relative to the rule file's own folder (no trailing `/`)."""
        regex = self.for_folders if is_folder else self.for_files
        if regex is None:
            return None
        match = regex.match(os.fsencode(local))
        if match is None or match.lastgroup is None:
            return None
        return self.patterns[int(match.lastgroup[1:])].is_exclude


def is_ignored(chain: tuple[IgnoreRules, ...], relative: str) -> bool:
    """Whether the root-relative POSIX path `relative` (a folder ends in `/`) is ignored by `chain`.

    The folders above `relative` are taken as not ignored: a walk never enters an ignored one.
    """
    for rules in reversed(chain):  # the deepest file with a matching line decides, as in git
        verdict = rules.verdict(relative)
        if verdict is not None:
            return verdict
    return False


def parse_ignore(
    data: bytes, *, path: str | os.PathLike[str], relative: str, skipped: list[SkippedPath]
) -> list[Pattern]:
    """The usable patterns in the text of an ignore file; each line left out is added to `skipped`."""
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    patterns: list[Pattern] = []
    for number, raw in enumerate(data.split(b"\n"), 1):
        for line in read_ignore_patterns(io.BytesIO(raw)):  # comments, blank lines, trailing spaces, CR
            reason = _unusable(line)
            if reason is None:
                try:
                    patterns.append(Pattern(_STAR_RUN.sub(_collapse_stars, line)))
                    continue
                except MalformedPattern:
                    reason = "git cannot use this pattern (a malformed bracket expression)"
            text = line.decode("utf-8", errors="replace")
            shown = f'"{text}"' if text.isprintable() else repr(text)
            skipped.append(SkippedPath(Path(path), relative, f"line {number} left out ({shown}): {reason}", number))
    return patterns


def _unusable(line: bytes) -> str | None:
    body = line.rstrip(b"\\")
    if (len(line) - len(body)) % 2:
        return "it ends in a lone backslash, so git matches nothing with it"
    return None


def _collapse_stars(match: re.Match[bytes]) -> bytes:
    escaped = match.group(1)
    return escaped if escaped is not None else b"**"


def compile_rules(patterns: list[Pattern], *, strip: int, prefix: str) -> IgnoreRules | None:
    """The chain link for `patterns` (see `IgnoreRules`), or None when no line can match anything."""
    usable = [(i, p) for i, p in enumerate(patterns) if not p.is_empty]
    if not usable:
        return None
    return IgnoreRules(
        patterns=tuple(patterns),
        for_files=_combined([(i, p) for i, p in usable if not p.is_directory_only]),
        for_folders=_combined(usable),
        strip=strip,
        prefix=prefix,
    )


def _combined(indexed: list[tuple[int, Pattern]]) -> re.Pattern[bytes] | None:
    if not indexed:
        return None
    # Last line first: `re.match` takes the first alternative that matches the whole path, so the
    # named group that matched is the line git would pick (the last matching one).
    alternatives = [b"(?P<p%d>%s)" % (i, _name_regex(p)) for i, p in reversed(indexed)]
    return re.compile(b"(?ms)(?:" + b"|".join(alternatives) + b")")


def _name_regex(pattern: Pattern) -> bytes:
    """The regex dulwich's `Pattern.matches` uses for the pattern, without its leading flags."""
    body = pattern.pattern
    if not pattern.is_exclude or (body[:1] == b"\\" and body[1:2] in (b"!", b"#")):
        body = body[1:]  # the `!`, or the backslash that keeps a leading `!` or `#` literal
    # Git drops one trailing slash (the folder-only mark); dulwich drops them all, so `a//` would match `a`.
    regex = translate(body[:-1] if body.endswith(b"/") else body)
    return regex[len(b"(?ms)") :] if regex.startswith(b"(?ms)") else regex


def load_ignore(path: str, *, strip: int, prefix: str, relative: str, skipped: list[SkippedPath]) -> IgnoreRules | None:
    """The rules in the ignore file at `path`, or None when it has none (or cannot be read: see `skipped`)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        skipped.append(SkippedPath(Path(path), relative, f"cannot read ignore file: {describe_os_error(exc)}"))
        return None
    patterns = parse_ignore(data, path=path, relative=relative, skipped=skipped)
    return compile_rules(patterns, strip=strip, prefix=prefix)


def rules_above(root: str, skipped: list[SkippedPath], inputs: list[str] | None = None) -> tuple[IgnoreRules, ...]:
    """Rules from the enclosing git work tree that apply below `root` (empty outside a work tree).

    Args:
        root: The walk's root folder (absolute).
        skipped: Unreadable rule files and left-out lines are added here.
        inputs: When given, every path whose change could change the answer is added here (rule
            files, present or not, git's configuration files, each `.git` looked for), for a
            caller that stamps them to notice a change.
    """
    found = work_tree_top(root, inputs)
    if found is None:
        return ()
    top = found
    below = os.path.relpath(root, top).replace(os.sep, "/")
    below = "" if below == "." else below + "/"
    chain: list[IgnoreRules] = []
    for path in (global_excludes_file(top, inputs), os.path.join(top, ".git", "info", "exclude")):
        if path is None:
            continue
        if inputs is not None:
            inputs.append(path)
        if os.path.isfile(path):
            # Named from the root when inside the work tree, else in full (the global excludes file).
            inside = path.startswith(os.path.join(top, ""))
            shown = os.path.relpath(path, root) if inside else path
            rules = load_ignore(path, strip=0, prefix=below, relative=shown, skipped=skipped)
            if rules is not None:
                chain.append(rules)
    folder = top
    for part in below.split("/")[:-1]:  # the work tree's top, then each folder down to the root's parent
        _append_gitignore(chain, folder, root, skipped, inputs)
        folder = os.path.join(folder, part)
    if chain and _root_ignored(tuple(chain), below):
        return ()  # the root lies in an ignored folder: the user chose to work there, so look anyway
    return tuple(chain)


def work_tree_top(root: str, inputs: list[str] | None = None) -> str | None:
    """The top of the git work tree holding the folder `root` (the nearest folder with a `.git`), or None.

    Every `.git` looked for is added to `inputs` when given.
    """
    top = root
    while True:
        marker = os.path.join(top, ".git")
        if inputs is not None:
            inputs.append(marker)
        if os.path.lexists(marker):
            return top
        parent = os.path.dirname(top)
        if parent == top:
            return None
        top = parent


def _root_ignored(chain: tuple[IgnoreRules, ...], below: str) -> bool:
    """Whether the root or a folder between the work tree's top and it is ignored (`below` ends in `/`).

    Git decides top-down and stops at the first ignored folder; a rule file applies to the folders
    below its own. Each link's prefix is the root's path from the link's folder, so the link's
    folder, seen from the top, is `below` less that prefix.
    """
    parts = below.split("/")[:-1]
    homes = [below[: len(below) - len(rules.prefix)] for rules in chain]
    for depth in range(1, len(parts) + 1):
        folder = "/".join(parts[:depth]) + "/"
        for rules, home in zip(reversed(chain), reversed(homes), strict=True):
            if not folder.startswith(home) or folder == home:
                continue
            verdict = rules.local_verdict(folder[len(home) : -1], is_folder=True)
            if verdict is not None:
                if verdict:
                    return True
                break
    return False


def _append_gitignore(
    chain: list[IgnoreRules], folder: str, root: str, skipped: list[SkippedPath], inputs: list[str] | None
) -> None:
    path = os.path.join(folder, ".gitignore")
    if inputs is not None:
        inputs.append(path)
    if not os.path.isfile(path):
        return
    prefix = os.path.relpath(root, folder).replace(os.sep, "/") + "/"
    rules = load_ignore(path, strip=0, prefix=prefix, relative=os.path.relpath(path, root), skipped=skipped)
    if rules is not None:
        chain.append(rules)


def global_excludes_file(top: str, inputs: list[str] | None = None) -> str | None:
    """The excludes file git reads for the work tree at `top`: `core.excludesFile`, else the XDG default.

    The setting is looked up as git does, the repository's `.git/config` first, then the user's and
    the system's configuration; `~` is expanded. None when neither is set nor present.
    """
    repo_config = os.path.join(top, ".git", "config")
    backends: list[ConfigFile] = []
    if inputs is not None:
        inputs.append(repo_config)
    # `.git` may be a file (a worktree, a submodule) or a config unreadable: the user's settings still apply.
    with contextlib.suppress(OSError, ValueError):
        backends.append(ConfigFile.from_path(repo_config))
    with contextlib.suppress(OSError, ValueError):
        backends += StackedConfig.default_backends()
    if inputs is not None:
        inputs += [os.path.expanduser("~/.gitconfig"), _xdg_config("config")]
    try:
        value = StackedConfig(backends).get((b"core",), b"excludesFile")
    except KeyError:
        return _xdg_config("ignore")
    if not isinstance(value, bytes) or not value:
        return _xdg_config("ignore")
    return os.path.expanduser(os.fsdecode(value))


def _xdg_config(name: str) -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return os.path.join(base, "git", name)


def tracked_folders(root: str, folders: list[str]) -> set[str]:
    """Which of `folders` (relative to `root`, inside a git work tree) hold a file git tracks.

    One `git ls-files` for them all; without git, or when it fails, none (the name-based skip holds).
    """
    git = shutil.which("git")
    if git is None or not folders:
        return set()
    try:
        done = subprocess.run(
            [git, "--literal-pathspecs", "-C", root, "ls-files", "-z", "--", *folders],
            capture_output=True,
            timeout=_GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return set()
    if done.returncode != 0:
        return set()
    wanted = set(folders)
    found: set[str] = set()
    for name in os.fsdecode(done.stdout).split("\0"):
        parts = name.split("/")
        for i in range(1, len(parts)):
            folder = "/".join(parts[:i])
            if folder in wanted:
                found.add(folder)
                break
    return found


def describe_os_error(exc: OSError) -> str:
    """A short lower-case reason for `exc`, e.g. `permission denied` or `symlink loop`."""
    if isinstance(exc, PermissionError):
        return "permission denied"
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    return (exc.strerror or type(exc).__name__).lower()
