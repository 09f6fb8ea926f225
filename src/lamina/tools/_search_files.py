"""Files under a folder as Glob and Grep see them (I/O: disk); their patterns are `lamina.workspace`'s globs.

`walk_files(base)` lists every regular file below `base` that a project search should see, through
`lamina.workspace.walk_folders`: git's ignore rules, version-control folders never entered,
dependency folders and virtual environments only where git tracks files. See docs/tools.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from lamina.workspace import WalkedFile, WalkPolicy, walk_folders

UNTRACKED_SKIPPED_DIR_NAMES: Final = frozenset(
    {"node_modules", "bower_components", "jspm_packages", "__pycache__", "site-packages"}
)
"""Folders skipped unless git tracks a file in them."""
_SEARCH: Final = WalkPolicy(regular_files_only=True, held_names=UNTRACKED_SKIPPED_DIR_NAMES)


def walk_files(base: str, *, root_key: tuple[int, int] | None = None) -> Iterator[WalkedFile]:
    """Every file below the folder `base` that a project search should see, depth first (I/O: disk, git).

    With `root_key` (the `(st_dev, st_ino)` the caller found at `base`), nothing is walked if `base`
    is another folder by then; a sub-folder is entered only while it is the one its parent listed.
    """
    # unreadable folders, changed folders and rule files are passed over
    for folder in walk_folders(base, _SEARCH, skipped=[], root_key=root_key):
        yield from folder.files
