"""Keeping the workspace's personal config file out of git: its repository's `info/exclude` names it (I/O)."""

from __future__ import annotations

import errno
import os
from pathlib import Path


def exclude_from_git(path: Path) -> Path | None:
    """Name `path` in the exclude file of the git repository that holds it (once); that file, None outside git.

    A symbolic link as the exclude file or its `info` folder is not followed (the workspace may not
    be trusted yet: a link could point the line at a file outside the repository).

    Raises:
        OSError: The exclude file cannot be read or written, or it or its folder is a symbolic link.
    """
    path = path.absolute()
    for folder in path.parents:
        dot_git = folder / ".git"
        if dot_git.exists():
            break
    else:
        return None
    exclude = _common_dir(dot_git) / "info" / "exclude"
    pattern = "/" + path.relative_to(folder).as_posix()
    for link in (exclude.parent, exclude):
        if link.is_symlink():
            raise OSError(errno.ELOOP, "a symbolic link, not followed", str(link))
    existing = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
    if pattern in existing.splitlines():
        return exclude
    exclude.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(exclude, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with open(descriptor, "a", encoding="utf-8") as file:
        file.write(("\n" if existing and not existing.endswith("\n") else "") + pattern + "\n")
    return exclude


def _common_dir(dot_git: Path) -> Path:
    """The repository's own folder: `.git`, or for a linked worktree (a `.git` file) the main one's."""
    if dot_git.is_dir():
        return dot_git
    text = dot_git.read_text(encoding="utf-8").strip()
    git_dir = (dot_git.parent / text.removeprefix("gitdir:").strip()).resolve()
    common = git_dir / "commondir"
    return (git_dir / common.read_text(encoding="utf-8").strip()).resolve() if common.exists() else git_dir
