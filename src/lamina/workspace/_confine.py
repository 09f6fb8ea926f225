"""Whether a workspace file really lies inside the working directory (I/O: disk).

A cloned repository can ship a link such as `AGENTS.md -> ../secret.txt` or
`CLAUDE.md -> /proc/self/status`; discovery (context files, memory, skills, sources, guides)
reads a file only when its real path, links resolved, is inside the working directory or another
allowed root, and otherwise skips it with the reason `outside_roots` gives.
"""

from __future__ import annotations

import os
from collections.abc import Iterable


def outside_roots(path: str | os.PathLike[str], roots: Iterable[str | os.PathLike[str]]) -> str | None:
    """Why `path` may not be read (its real path lies outside every root), or None when it is inside one."""
    real = os.path.realpath(path)
    for root in roots:
        top = os.path.realpath(root)
        if real == top or real.startswith(top.rstrip(os.sep) + os.sep):
            return None
    try:
        shown = os.readlink(path) if os.path.islink(path) else real
    except OSError:
        shown = real
    return f"resolves outside the working directory (to {shown})"
