"""Context-file discovery on a large tree: Lamina's walk (cold and cached) against a recursive glob and `git ls-files`.

The tree is generated in a temporary folder (kept for the rest of the run, keyed by size): source
folders holding 200,000 empty files (quick: 20,000) with 40 context files at depths 0 to about 9
in mixed letter case, plus a `node_modules` of 50,000 files (quick: 5,000), a `dist` folder and a
`.venv`, each hiding decoy context files. The root `.gitignore` ignores `node_modules/` and `.venv/`.

- `discovery_cold_ms`: `find_context_files` with no cache (the OS caches are warm, as they are
  for an agent working in the tree). Its `ratio_vs` is the recursive glob.
- `discovery_cold_vs_git_ms`: the same number, with `ratio_vs` against `git ls-files`.
- `discovery_cold_watched_ms`: `ContextFileFinder.refresh`, the same walk plus a folder watch
  (inotify) added before each folder is listed, as the agent's finder does on Linux.
- `discovery_fresh_check_ms`: the check every `prepare_turn` makes, `ContextFileFinder.is_fresh`
  on an unchanged tree: the queued watch events read without blocking, one `stat` per file read
  or looked for, no walk.
- `discovery_fresh_check_stamps_ms`: the same check without watches (`watch=False`, or where
  inotify is missing): one `stat` per folder listed as well.
- `discovery_warm_ms`: `ContextFileFinder.find` on an unchanged tree (the check, then the cached scan).
- `discovery_after_edit_ms`: `ContextFileFinder.find` right after one context file was rewritten
  (the check finds only context files changed: they are read again, no walk).
- `peer_recursive_glob_ms`: `glob.glob("**/*.[mM][dD]", recursive=True)` filtered by name, the
  way a naive harness looks; it skips dot-folders but walks `node_modules` and `dist`.
- `peer_git_ls_files_ms`: `git ls-files -z` filtered by name, in the tree committed to a fresh
  repository; it sees only tracked files and reads none. Skipped, with a note, without git.

Each time is the median of several runs, interleaved so that no contender gets a warmer cache.
"""

from __future__ import annotations

import glob
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import Figure, ratio
from lamina.workspace import CONTEXT_FILE_NAMES, ContextFileFinder, find_context_files

_FILES_PER_DIR = 20
_CONTEXT_FILES = 40
_NAME_VARIANTS = ("AGENTS.md", "CLAUDE.md", "agents.md", "Claude.md", "Agents.MD", "claude.MD")

# Generated trees, keyed by (source files, node_modules files); removed when the process exits.
_TREES: dict[tuple[int, int], tuple[tempfile.TemporaryDirectory[str], bool]] = {}


def run(*, quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    files, node_modules = (20_000, 5_000) if quick else (200_000, 50_000)
    root, has_git = _tree(files, node_modules, progress)
    if not has_git:
        progress("git not found: the git ls-files peer is skipped")
    repeats = 5 if quick else 3

    progress(f"measuring ({repeats} interleaved runs each)")
    scan = find_context_files(root)  # untimed: settles the OS caches for every contender alike
    cold: list[float] = []
    globbed: list[float] = []
    git: list[float] = []
    for _ in range(repeats):
        cold.append(_timed(lambda: find_context_files(root)))
        globbed.append(_timed(lambda: _glob_peer(root)))
        if has_git:
            git.append(_timed(lambda: _git_peer(root)))
    watched_cold: list[float] = []
    for _ in range(repeats):
        finder = ContextFileFinder()
        watched_cold.append(_timed(lambda: finder.refresh(root)))  # noqa: B023 (called at once)
        finder.close()
    time.sleep(0.1)  # past the racy window of anything written while the tree was set up
    fresh_ms, stamps_note = _fresh_check(root, watch=True)
    stamped_ms, _ = _fresh_check(root, watch=False)
    finder = ContextFileFinder()
    finder.refresh(root)
    warm_ms = statistics.median(_timed(lambda: finder.find(root)) for _ in range(50))
    edited = root / "AGENTS.md"
    original = edited.read_text()
    after_edit: list[float] = []
    walks = finder.walks
    for i in range(repeats):
        edited.write_text(original + f"\n- edit {i}\n")
        after_edit.append(_timed(lambda: finder.find(root)))
    edit_note = "one context file rewritten: read again" + (", no walk" if finder.walks == walks else ", walked")
    edited.write_text(original)
    finder.close()

    cold_ms = statistics.median(cold)
    glob_ms = statistics.median(globbed)
    found = len(scan.files) + scan.omitted_over_cap
    cold_note = (
        f"{scan.scanned_dirs:,} folders listed; {found} found, {len(scan.files)} read, "
        f"{scan.omitted_over_cap} over the cap" + ("" if has_git else "; git peer skipped: git not found")
    )
    figures = [Figure("discovery_cold_ms", cold_ms, "ms", ratio(cold_ms, glob_ms, "peer_recursive_glob_ms"), cold_note)]
    if has_git:
        git_ms = statistics.median(git)
        figures.append(
            Figure("discovery_cold_vs_git_ms", cold_ms, "ms", ratio(cold_ms, git_ms, "peer_git_ls_files_ms"))
        )
    figures.append(
        Figure("discovery_cold_watched_ms", statistics.median(watched_cold), "ms", note="the walk plus folder watches")
    )
    figures.append(Figure("discovery_fresh_check_ms", fresh_ms, "ms", note=f"goal < 15 ms; {stamps_note}"))
    stamped_note = "without watches: a stat per folder"
    figures.append(Figure("discovery_fresh_check_stamps_ms", stamped_ms, "ms", note=stamped_note))
    figures.append(Figure("discovery_warm_ms", warm_ms, "ms", note="unchanged tree: the check, then the cached scan"))
    figures.append(Figure("discovery_after_edit_ms", statistics.median(after_edit), "ms", note=edit_note))
    glob_note = f"found {len(_glob_peer(root))}, decoys in node_modules and dist included"
    figures.append(Figure("peer_recursive_glob_ms", glob_ms, "ms", note=glob_note))
    if has_git:
        git_note = f"found {len(_git_peer(root))} tracked, the decoy in dist included"
        figures.append(Figure("peer_git_ls_files_ms", git_ms, "ms", note=git_note))
    figures.append(Figure("tree_files", float(files + node_modules), "files"))
    return figures


def _fresh_check(root: Path, *, watch: bool) -> tuple[float, str]:
    """The median `is_fresh` on an unchanged tree, and what the check looked at."""
    finder = ContextFileFinder(watch=watch)
    finder.refresh(root)
    time.sleep(0.1)
    finder.refresh(root)
    if not finder.is_fresh(root):
        raise RuntimeError("the scan of an unchanged tree is not fresh")
    median = statistics.median(_timed(lambda: finder.is_fresh(root)) for _ in range(50))
    stamps = finder._cache[root.resolve()][1]
    files = len(stamps.walk_files) + len(stamps.read_files)
    if stamps.watch is not None:
        note = f"{len(stamps.folders):,} folders watched, {files} files stat'ed, no walk"
    else:
        note = f"{len(stamps.folders):,} folders and {files} files stat'ed, no walk"
    finder.close()
    return median, note


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def _glob_peer(root: Path) -> list[str]:
    hits = glob.glob("**/*.[mM][dD]", root_dir=root, recursive=True)
    return [h for h in hits if os.path.basename(h).lower() in CONTEXT_FILE_NAMES]


def _git_peer(root: Path) -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    names = listed.decode("utf-8", errors="surrogateescape").split("\0")
    return [n for n in names if n.rpartition("/")[2].lower() in CONTEXT_FILE_NAMES]


# --- the generated tree ---------------------------------------------------------------------------


def _tree(files: int, node_modules: int, progress: Callable[[str], None]) -> tuple[Path, bool]:
    key = (files, node_modules)
    if key not in _TREES:
        holder = tempfile.TemporaryDirectory(prefix="lamina-bench-discovery-")
        root = Path(holder.name)
        progress(f"generating {files + node_modules:,} files in {root}")
        started = time.perf_counter()
        _generate(root, files, node_modules)
        progress(f"generated in {time.perf_counter() - started:.1f} s")
        has_git = shutil.which("git") is not None
        if has_git:
            progress("committing the tree to a fresh git repository")
            started = time.perf_counter()
            _commit(root)
            progress(f"committed in {time.perf_counter() - started:.1f} s")
        _TREES[key] = (holder, has_git)
    holder, has_git = _TREES[key]
    return Path(holder.name), has_git


def _generate(root: Path, files: int, node_modules: int) -> None:
    rng = random.Random(4)
    source = _folders(rng, root, ["packages", "services", "libs", "tools"], files // _FILES_PER_DIR, max_depth=9)
    _fill(source, files, ".py")

    by_depth: dict[int, list[Path]] = {}
    for folder in source:
        by_depth.setdefault(len(folder.relative_to(root).parts), []).append(folder)
    (root / "AGENTS.md").write_text("# Project rules\n\n- Run the tests.\n")
    (root / "CLAUDE.md").write_text("# Project rules for Claude\n\n- See AGENTS.md.\n")
    depths = sorted(d for d in by_depth if d > 0)
    chosen: set[Path] = set()
    while len(chosen) < _CONTEXT_FILES - 2:  # spread over every depth, one file per folder
        chosen.add(rng.choice(by_depth[depths[len(chosen) % len(depths)]]))
    for i, folder in enumerate(sorted(chosen)):
        text = f"# Rules for {folder.relative_to(root).as_posix()}\n\n- Keep it small.\n"
        (folder / _NAME_VARIANTS[i % len(_NAME_VARIANTS)]).write_text(text)

    modules = _folders(rng, root / "node_modules", ["react", "lodash", "@types", "typescript"], node_modules // 10)
    _fill(modules, node_modules, ".js")
    for folder in modules[:: max(1, len(modules) // 8)]:
        (folder / "CLAUDE.md").write_text("# A dependency's own rules\n")
    for decoy in ("dist/app", ".venv/lib/python3.11/site-packages/pkg"):
        (root / decoy).mkdir(parents=True, exist_ok=True)
        (root / decoy / "AGENTS.md").write_text("# not the project's\n")
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (root / ".gitignore").write_text("node_modules/\n.venv/\n*.log\n__pycache__/\n")


def _folders(rng: random.Random, top: Path, seeds: list[str], count: int, max_depth: int = 6) -> list[Path]:
    """`count` folders under `top` (plus `top`), grown by attaching each new one to a random earlier one."""
    folders = [top] + [top / s for s in seeds]
    depth = {f: len(f.relative_to(top).parts) for f in folders}
    while len(folders) < count:
        parent = rng.choice(folders)
        if depth[parent] >= max_depth:
            continue
        child = parent / f"m{len(folders)}"
        folders.append(child)
        depth[child] = depth[parent] + 1
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    return folders


def _fill(folders: list[Path], files: int, suffix: str) -> None:
    """Create `files` empty files spread over `folders`: one open per folder, then names relative to it."""
    flags = os.O_CREAT | os.O_WRONLY | os.O_EXCL
    for index, folder in enumerate(folders):
        handle = os.open(folder, os.O_RDONLY)
        try:
            for i in range(index, files, len(folders)):
                os.close(os.open(f"f{i}{suffix}", flags, 0o644, dir_fd=handle))
        finally:
            os.close(handle)


def _commit(root: Path) -> None:
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "--no-verify", "-m", "tree"]):
        subprocess.run([*git, *args], cwd=root, check=True, capture_output=True)
