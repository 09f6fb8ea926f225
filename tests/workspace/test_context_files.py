"""Project context files: discovery rules, caps, bad files, the cache and `nearest_context_files`."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lamina.errors import UsageError
from lamina.workspace import (
    TRUNCATION_MARK,
    ContextFileFinder,
    ContextFileScan,
    _watch,
    find_context_files,
    nearest_context_files,
)
from lamina.workspace import _context_files as module
from lamina.workspace import _context_finder as finder_module
from tests.conftest import examples
from tests.support.encoded_texts import ENCODED

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def put(root: Path, relative: str, content: str | bytes = "rules\n") -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def found(scan: ContextFileScan) -> list[str]:
    return [f.relative for f in scan.files]


def reasons(scan: ContextFileScan) -> dict[str, str]:
    return {s.relative: s.reason for s in scan.skipped}


# --- names and folders ----------------------------------------------------------------------------


def test_names_match_in_any_letter_case(tmp_path: Path) -> None:
    for name in ("AGENTS.md", "a/agents.md", "b/Claude.MD", "c/CLAUDE.md", "d/aGeNtS.Md"):
        put(tmp_path, name)
    for name in ("AGENTS.md.bak", "MY_AGENTS.md", "agents.txt", "claude.markdown", "e/README.md"):
        put(tmp_path, name)
    assert found(find_context_files(tmp_path)) == [
        "AGENTS.md",
        "a/agents.md",
        "b/Claude.MD",
        "c/CLAUDE.md",
        "d/aGeNtS.Md",
    ]


def test_file_fields_are_absolute_path_posix_relative_depth_size_and_mtime(tmp_path: Path) -> None:
    path = put(tmp_path, "pkg/sub/AGENTS.md", "hello\n")
    (file,) = find_context_files(tmp_path).files
    assert file.path == tmp_path.resolve() / "pkg" / "sub" / "AGENTS.md"
    assert file.path.is_absolute()
    assert (file.relative, file.depth, file.text, file.size, file.truncated) == (
        "pkg/sub/AGENTS.md",
        2,
        "hello\n",
        6,
        False,
    )
    assert file.mtime_ns == path.stat().st_mtime_ns


@pytest.mark.parametrize(
    "folder",
    [
        "node_modules",
        "pkg/node_modules/dep",
        "build",
        "dist",
        "out",
        "target",
        ".next",
        "__pycache__",
        ".cache",
        ".mypy_cache",
        ".pytest_cache",
        ".venv",
        "venv",
        "lib/python3.11/site-packages/dep",
        ".git",
        ".hg",
        ".svn",
        ".hidden",
        "src/.idea",
    ],
)
def test_skipped_folders_are_never_entered(tmp_path: Path, folder: str) -> None:
    put(tmp_path, "AGENTS.md")
    put(tmp_path, f"{folder}/AGENTS.md")
    put(tmp_path, f"{folder}/deeper/CLAUDE.md")
    scan = find_context_files(tmp_path)
    assert found(scan) == ["AGENTS.md"]
    assert scan.skipped == ()


def test_a_folder_holding_pyvenv_cfg_is_a_virtual_environment_whatever_its_name(tmp_path: Path) -> None:
    put(tmp_path, "env/pyvenv.cfg", "home = /usr/bin\n")
    put(tmp_path, "env/lib/AGENTS.md")
    put(tmp_path, "env/AGENTS.md")
    put(tmp_path, "py-env/pyvenv.cfg", "home = /usr/bin\n")
    put(tmp_path, "py-env/CLAUDE.md")
    put(tmp_path, "environment/AGENTS.md")  # no pyvenv.cfg: an ordinary folder
    assert found(find_context_files(tmp_path)) == ["environment/AGENTS.md"]


def test_the_root_is_scanned_whatever_its_name(tmp_path: Path) -> None:
    root = tmp_path / ".config" / "build"
    put(root, "AGENTS.md")
    put(root, "pyvenv.cfg", "")
    assert found(find_context_files(root)) == ["AGENTS.md"]


# --- .gitignore -----------------------------------------------------------------------------------


def test_root_gitignore_ignores_folders_and_files(tmp_path: Path) -> None:
    put(tmp_path, ".gitignore", "generated/\n/only-at-top/\nscratch*\n# a comment\n\n")
    for name in ("AGENTS.md", "generated/AGENTS.md", "a/generated/AGENTS.md", "only-at-top/AGENTS.md"):
        put(tmp_path, name)
    put(tmp_path, "a/only-at-top/AGENTS.md")  # anchored pattern: only the root's folder is ignored
    put(tmp_path, "scratch-1/CLAUDE.md")
    put(tmp_path, "b/scratchpad/CLAUDE.md")
    assert found(find_context_files(tmp_path)) == ["AGENTS.md", "a/only-at-top/AGENTS.md"]


def test_gitignore_ignores_context_files_by_name_and_negation_re_includes(tmp_path: Path) -> None:
    put(tmp_path, ".gitignore", "*.md\n!AGENTS.md\n")
    for name in ("AGENTS.md", "CLAUDE.md", "a/AGENTS.md", "a/CLAUDE.md"):
        put(tmp_path, name)
    assert found(find_context_files(tmp_path)) == ["AGENTS.md", "a/AGENTS.md"]


def test_nested_gitignore_applies_to_its_subtree_only(tmp_path: Path) -> None:
    put(tmp_path, "pkg/.gitignore", "docs/\n")
    put(tmp_path, "pkg/docs/AGENTS.md")
    put(tmp_path, "pkg/sub/docs/AGENTS.md")
    put(tmp_path, "other/docs/AGENTS.md")
    assert found(find_context_files(tmp_path)) == ["other/docs/AGENTS.md"]


def test_nested_gitignore_overrides_the_root_one(tmp_path: Path) -> None:
    put(tmp_path, ".gitignore", "CLAUDE.md\n")
    put(tmp_path, "pkg/.gitignore", "!CLAUDE.md\n")
    for name in ("CLAUDE.md", "other/CLAUDE.md", "pkg/CLAUDE.md", "pkg/deep/CLAUDE.md"):
        put(tmp_path, name)
    assert found(find_context_files(tmp_path)) == ["pkg/CLAUDE.md", "pkg/deep/CLAUDE.md"]


def test_gitignore_patterns_with_a_slash_are_relative_to_their_own_folder(tmp_path: Path) -> None:
    put(tmp_path, "pkg/.gitignore", "/gen/\nlib/out-*/\n")
    put(tmp_path, "pkg/gen/AGENTS.md")
    put(tmp_path, "pkg/x/gen/AGENTS.md")
    put(tmp_path, "pkg/lib/out-1/AGENTS.md")
    put(tmp_path, "gen/AGENTS.md")
    assert found(find_context_files(tmp_path)) == ["gen/AGENTS.md", "pkg/x/gen/AGENTS.md"]


def test_gitignore_files_above_the_root_apply_inside_a_git_work_tree(tmp_path: Path) -> None:
    (tmp_path / ".git" / "info").mkdir(parents=True)
    put(tmp_path, ".git/info/exclude", "local-only/\n")
    put(tmp_path, ".gitignore", "generated/\n")
    put(tmp_path, "services/.gitignore", "api/fixtures/\n")
    root = tmp_path / "services" / "api"
    for name in ("AGENTS.md", "generated/AGENTS.md", "fixtures/AGENTS.md", "local-only/AGENTS.md", "src/AGENTS.md"):
        put(root, name)
    assert found(find_context_files(root)) == ["AGENTS.md", "src/AGENTS.md"]


def test_a_root_inside_an_ignored_folder_is_still_searched(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    put(tmp_path, ".gitignore", "scratch/\n*.tmp/\n")
    root = tmp_path / "scratch" / "experiment"
    put(root, "AGENTS.md")
    put(root, "sub/CLAUDE.md")
    put(root, "sub/x.tmp/CLAUDE.md")  # the root's own .gitignore files would still apply below it
    put(root, ".gitignore", "*.tmp/\n")
    assert found(find_context_files(root)) == ["AGENTS.md", "sub/CLAUDE.md"]


def test_gitignore_files_above_the_root_do_not_apply_outside_a_git_work_tree(tmp_path: Path) -> None:
    put(tmp_path, ".gitignore", "generated/\n")
    put(tmp_path, "root/generated/AGENTS.md")
    assert found(find_context_files(tmp_path / "root")) == ["generated/AGENTS.md"]


# --- caps and order -------------------------------------------------------------------------------


def test_each_file_is_capped_with_a_visible_truncation_mark(tmp_path: Path) -> None:
    put(tmp_path, "AGENTS.md", "x" * 25_000)
    (file,) = find_context_files(tmp_path).files
    assert file.truncated
    assert file.size == 25_000
    body, _, mark = file.text.partition("\n\n" + TRUNCATION_MARK)
    assert body == "x" * 10_240
    assert "10,240 of 25,000 bytes" in mark


def test_a_file_exactly_at_the_cap_is_not_truncated(tmp_path: Path) -> None:
    put(tmp_path, "AGENTS.md", "y" * 10_240)
    (file,) = find_context_files(tmp_path).files
    assert not file.truncated
    assert file.text == "y" * 10_240


def test_truncation_never_splits_a_character(tmp_path: Path) -> None:
    put(tmp_path, "AGENTS.md", "é" * 1000)  # 2 bytes each; a cap of 101 bytes falls inside one
    (file,) = find_context_files(tmp_path, max_bytes=101).files
    assert file.truncated
    assert file.text.startswith("é" * 50 + "\n\n" + TRUNCATION_MARK)


def test_at_most_max_files_are_read_shallowest_first_and_the_rest_counted(tmp_path: Path) -> None:
    for name in ("z/y/x/AGENTS.md", "b/AGENTS.md", "a/CLAUDE.md", "CLAUDE.md", "AGENTS.md", "a/b/AGENTS.md"):
        put(tmp_path, name)
    scan = find_context_files(tmp_path, max_files=4)
    assert found(scan) == ["AGENTS.md", "CLAUDE.md", "a/CLAUDE.md", "b/AGENTS.md"]
    assert [f.depth for f in scan.files] == [0, 0, 1, 1]
    assert scan.omitted_over_cap == 2
    assert find_context_files(tmp_path).omitted_over_cap == 0


def test_the_default_cap_is_thirty_files(tmp_path: Path) -> None:
    for i in range(35):
        put(tmp_path, f"p{i:02}/AGENTS.md")
    scan = find_context_files(tmp_path)
    assert len(scan.files) == 30
    assert scan.omitted_over_cap == 5


def test_a_skipped_file_does_not_use_up_the_cap(tmp_path: Path) -> None:
    put(tmp_path, "AGENTS.md", b"\x00binary")
    put(tmp_path, "a/AGENTS.md")
    put(tmp_path, "b/AGENTS.md")
    scan = find_context_files(tmp_path, max_files=2)
    assert found(scan) == ["a/AGENTS.md", "b/AGENTS.md"]
    assert scan.omitted_over_cap == 0


class _Caps(TypedDict, total=False):
    max_files: int
    max_bytes: int
    huge_bytes: int


@pytest.mark.parametrize("caps", [_Caps(max_files=-1), _Caps(max_bytes=0), _Caps(huge_bytes=0)])
def test_out_of_range_caps_are_usage_errors(tmp_path: Path, caps: _Caps) -> None:
    with pytest.raises(UsageError):
        find_context_files(tmp_path, **caps)
    with pytest.raises(UsageError):
        ContextFileFinder(**caps)


# --- bad files and folders ------------------------------------------------------------------------


def test_binary_and_huge_files_are_skipped_with_a_reason(tmp_path: Path) -> None:
    put(tmp_path, "a/AGENTS.md", b"# rules\x00\x01\x02")
    put(tmp_path, "c/AGENTS.md", b"z" * 2_000_000)
    put(tmp_path, "d/AGENTS.md", "ok\n")
    scan = find_context_files(tmp_path)
    assert found(scan) == ["d/AGENTS.md"]
    assert reasons(scan) == {
        "a/AGENTS.md": "binary (contains a NUL byte)",
        "c/AGENTS.md": "too large (2,000,000 bytes; the limit is 1,048,576)",
    }


@pytest.mark.parametrize("encoding", sorted(ENCODED))
def test_a_context_file_in_any_encoding_is_read_in_it(tmp_path: Path, encoding: str) -> None:
    put(tmp_path, "AGENTS.md", ENCODED[encoding].encode(encoding))
    assert find_context_files(tmp_path).files[0].text == ENCODED[encoding]


def test_a_utf16_context_file_saved_by_windows_is_read(tmp_path: Path) -> None:
    put(tmp_path, "AGENTS.md", "# Rules\nAnswer briefly.\n".encode("utf-16"))
    assert find_context_files(tmp_path).files[0].text == "# Rules\nAnswer briefly.\n"


def test_a_utf8_byte_order_mark_is_dropped(tmp_path: Path) -> None:
    put(tmp_path, "AGENTS.md", b"\xef\xbb\xbfhello")
    assert find_context_files(tmp_path).files[0].text == "hello"


def test_an_empty_file_is_listed(tmp_path: Path) -> None:
    put(tmp_path, "AGENTS.md", "")
    (file,) = find_context_files(tmp_path).files
    assert (file.text, file.size) == ("", 0)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_a_symlinked_context_file_is_read_through_the_link(tmp_path: Path) -> None:
    put(tmp_path, "AGENTS.md", "shared rules\n")
    (tmp_path / "CLAUDE.md").symlink_to("AGENTS.md")
    scan = find_context_files(tmp_path)
    assert [(f.relative, f.text) for f in scan.files] == [
        ("AGENTS.md", "shared rules\n"),
        ("CLAUDE.md", "shared rules\n"),
    ]
    assert scan.files[1].path == tmp_path.resolve() / "CLAUDE.md"


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_broken_and_looping_file_symlinks_are_skipped_with_a_reason(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "AGENTS.md").symlink_to("missing.md")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "AGENTS.md").symlink_to("CLAUDE.md")
    (tmp_path / "b" / "CLAUDE.md").symlink_to("AGENTS.md")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "CLAUDE.md").symlink_to(tmp_path / "c")  # a link to a folder
    scan = find_context_files(tmp_path)
    assert scan.files == ()
    assert reasons(scan) == {
        "a/AGENTS.md": "broken symlink",
        "b/AGENTS.md": "symlink loop",
        "b/CLAUDE.md": "symlink loop",
        "c/CLAUDE.md": "not a regular file",
    }


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_a_folder_symlink_loop_terminates_and_is_not_followed(tmp_path: Path) -> None:
    put(tmp_path, "AGENTS.md")
    put(tmp_path, "a/b/CLAUDE.md")
    (tmp_path / "a" / "b" / "up").symlink_to(tmp_path)  # a/b/up/a/b/up/… would never end
    (tmp_path / "a" / "self").symlink_to(".")
    (tmp_path / "outside").symlink_to(tmp_path / "a" / "b")  # a second way into a/b
    scan = find_context_files(tmp_path)
    assert found(scan) == ["AGENTS.md", "a/b/CLAUDE.md"]
    assert scan.skipped == ()
    assert scan.scanned_dirs == 3


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_named_like_a_context_file_is_skipped_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "AGENTS.md")
    put(tmp_path, "a/AGENTS.md")
    scan = find_context_files(tmp_path)
    assert found(scan) == ["a/AGENTS.md"]
    assert reasons(scan) == {"AGENTS.md": "not a regular file"}


@pytest.mark.skipif(IS_ROOT, reason="root reads files whatever their mode; see the os.open test below")
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_an_unreadable_file_is_skipped_with_a_reason(tmp_path: Path) -> None:
    path = put(tmp_path, "AGENTS.md")
    path.chmod(0)
    try:
        scan = find_context_files(tmp_path)
    finally:
        path.chmod(0o644)
    assert reasons(scan) == {"AGENTS.md": "cannot open: permission denied"}


def test_a_file_that_cannot_be_opened_is_skipped_with_a_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Works as root too, where chmod 000 does not stop a read: the open itself is refused.
    denied = put(tmp_path, "AGENTS.md")
    put(tmp_path, "a/AGENTS.md")
    real_open = os.open

    def refusing_open(path: str | os.PathLike[str], flags: int, *args: int, **kwargs: int) -> int:
        if Path(path) == denied.resolve():
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing_open)  # the module's os is this one
    scan = find_context_files(tmp_path)
    assert found(scan) == ["a/AGENTS.md"]
    assert reasons(scan) == {"AGENTS.md": "cannot open: permission denied"}


@pytest.mark.skipif(IS_ROOT, reason="root lists folders whatever their mode; see the long-path test below")
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_an_unreadable_folder_is_skipped_with_a_reason(tmp_path: Path) -> None:
    put(tmp_path, "AGENTS.md")
    put(tmp_path, "locked/AGENTS.md")
    (tmp_path / "locked").chmod(0)
    try:
        scan = find_context_files(tmp_path)
    finally:
        (tmp_path / "locked").chmod(0o755)
    assert found(scan) == ["AGENTS.md"]
    assert reasons(scan) == {"locked": "cannot list folder: permission denied"}


@pytest.mark.skipif(sys.platform != "linux", reason="relies on Linux's PATH_MAX of 4096 bytes")
def test_a_folder_that_cannot_be_listed_is_skipped_with_a_reason(tmp_path: Path) -> None:
    # A folder whose absolute path is longer than PATH_MAX exists but cannot be opened by path:
    # a real listing failure that holds as root too.
    put(tmp_path, "AGENTS.md")
    fd = os.open(tmp_path, os.O_RDONLY)
    segment = "d" * 200
    try:
        for _ in range(22):
            os.mkdir(segment, dir_fd=fd)
            deeper = os.open(segment, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = deeper
    finally:
        os.close(fd)
    scan = find_context_files(tmp_path)
    assert found(scan) == ["AGENTS.md"]
    ((relative, reason),) = reasons(scan).items()
    assert reason.startswith("cannot list folder: ")
    assert relative.startswith(segment + "/")


def test_a_missing_root_is_reported_not_raised(tmp_path: Path) -> None:
    scan = find_context_files(tmp_path / "nowhere")
    assert scan.files == ()
    assert scan.scanned_dirs == 0
    assert reasons(scan) == {".": "cannot list folder: no such file or directory"}


def test_progress_reports_folders_scanned_every_thousand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert module.PROGRESS_EVERY_DIRS == 1000
    monkeypatch.setattr(module, "PROGRESS_EVERY_DIRS", 10)  # the same code path on a small tree
    for i in range(24):
        (tmp_path / f"d{i}").mkdir()
    seen: list[int] = []
    scan = find_context_files(tmp_path, progress=seen.append)
    assert scan.scanned_dirs == 25
    assert seen == [10, 20]


# --- the cache and freshness ---------------------------------------------------------------------


@pytest.fixture(params=[True, False], ids=["watched", "stamped"])
def watch(request: pytest.FixtureRequest) -> bool:
    """Folders checked by inotify watches (where available) or by their stamps: both must see every change."""
    value: bool = request.param
    return value


def test_the_watched_mode_is_used_where_inotify_is(tmp_path: Path) -> None:
    if _watch._inotify is not None and _watch._the_hub() is None:
        pytest.skip("no inotify instance left on this machine: the finder checks stamps instead")
    finder = ContextFileFinder()
    finder.find(tmp_path)
    stamps = finder._cache[tmp_path.resolve()][1]
    assert (stamps.watch is not None) == (sys.platform == "linux" and _watch._inotify is not None)
    finder.close()
    assert not finder.is_fresh(tmp_path)


def test_two_finders_share_the_watches_and_one_closing_leaves_the_other_watching(tmp_path: Path) -> None:
    put(tmp_path, "a/b/AGENTS.md")
    one, two = ContextFileFinder(), ContextFileFinder()
    settled(one, tmp_path)
    settled(two, tmp_path)
    assert one.is_fresh(tmp_path) and two.is_fresh(tmp_path)
    one.close()
    put(tmp_path, "a/b/c/CLAUDE.md")
    assert not two.is_fresh(tmp_path)
    assert found(two.find(tmp_path)) == ["a/b/AGENTS.md", "a/b/c/CLAUDE.md"]


def test_a_watch_collected_while_the_hub_is_locked_never_deadlocks_and_is_released_later(tmp_path: Path) -> None:
    hub = _watch._the_hub()
    if hub is None:
        pytest.skip("no inotify here")
    watch = _watch.FolderWatch(hub, lambda name, is_folder: True)
    watch.add(str(tmp_path))
    wd = watch._wds[0]
    with hub.lock:  # the garbage collector may run a finaliser inside the hub's own locked code
        del watch  # the old finaliser waited for the lock its own thread held: a hang
        assert wd in hub.orphans
    hub.drain()
    assert wd not in hub.subscribers and not hub.orphans


def settled(finder: ContextFileFinder, root: Path) -> ContextFileScan:
    """A scan whose stamps are old enough to be trusted (files written just before a scan are not)."""
    time.sleep(finder_module.RACY_NS / 1e9 + 0.02)
    return finder.refresh(root)


def test_a_fresh_cache_returns_the_same_scan_without_walking(tmp_path: Path, watch: bool) -> None:
    put(tmp_path, "AGENTS.md")
    put(tmp_path, "a/b/c/CLAUDE.md")
    finder = ContextFileFinder(watch=watch)
    first = settled(finder, tmp_path)
    walks = finder.walks
    assert finder.find(tmp_path) is first
    assert finder.find(str(tmp_path / "." / "")) is first  # keyed by the resolved path
    assert finder.is_fresh(tmp_path)
    assert finder.walks == walks


def test_a_racy_scan_is_redone_and_an_identical_result_keeps_its_identity(tmp_path: Path, watch: bool) -> None:
    put(tmp_path, "AGENTS.md")
    finder = ContextFileFinder(watch=watch)
    first = finder.find(tmp_path)  # the file was written within the racy window: not trusted
    assert not finder.is_fresh(tmp_path)
    assert finder.find(tmp_path) is first  # looked at again, found the same, kept the object
    assert finder.walks + finder.reads == 2


def test_editing_a_listed_file_is_seen_by_reading_the_files_again_without_a_walk(tmp_path: Path, watch: bool) -> None:
    path = put(tmp_path, "AGENTS.md", "old\n")
    put(tmp_path, "a/b/CLAUDE.md", "deep\n")
    finder = ContextFileFinder(watch=watch)
    assert settled(finder, tmp_path).files[0].text == "old\n"
    walks = finder.walks
    path.write_text("new rules\n")
    assert finder.find(tmp_path).files[0].text == "new rules\n"
    assert (finder.walks, finder.reads) == (walks, 1)
    path.write_bytes(b"\x00binary")  # read again, now skipped with its reason
    assert [s.relative for s in finder.find(tmp_path).skipped] == ["AGENTS.md"]
    assert finder.walks == walks


def test_a_rewrite_that_restores_the_mtime_and_size_is_seen(tmp_path: Path, watch: bool) -> None:
    path = put(tmp_path, "AGENTS.md", "aaa\n")
    finder = ContextFileFinder(watch=watch)
    before = settled(finder, tmp_path).files[0]
    path.write_text("bbb\n")
    os.utime(path, ns=(before.mtime_ns, before.mtime_ns))
    assert os.stat(path).st_mtime_ns == before.mtime_ns
    assert finder.find(tmp_path).files[0].text == "bbb\n"


def test_deleting_a_listed_file_is_seen(tmp_path: Path, watch: bool) -> None:
    put(tmp_path, "AGENTS.md")
    gone = put(tmp_path, "a/AGENTS.md")
    finder = ContextFileFinder(watch=watch)
    assert found(settled(finder, tmp_path)) == ["AGENTS.md", "a/AGENTS.md"]
    gone.unlink()
    assert found(finder.find(tmp_path)) == ["AGENTS.md"]


def test_a_new_context_file_anywhere_is_seen_on_the_next_find(tmp_path: Path, watch: bool) -> None:
    put(tmp_path, "AGENTS.md")
    put(tmp_path, "pkg/deep/er/x.py", "")
    finder = ContextFileFinder(watch=watch)
    settled(finder, tmp_path)
    put(tmp_path, "pkg/deep/er/CLAUDE.md")
    assert found(finder.find(tmp_path)) == ["AGENTS.md", "pkg/deep/er/CLAUDE.md"]
    put(tmp_path, "new/folder/AGENTS.md")
    assert "new/folder/AGENTS.md" in found(finder.find(tmp_path))


def test_a_changed_ignore_rule_is_seen_on_the_next_find(tmp_path: Path, watch: bool) -> None:
    put(tmp_path, "AGENTS.md")
    put(tmp_path, "gen/AGENTS.md")
    rules = put(tmp_path, ".gitignore", "*.log\n")
    finder = ContextFileFinder(watch=watch)
    assert found(settled(finder, tmp_path)) == ["AGENTS.md", "gen/AGENTS.md"]
    mtime = rules.stat().st_mtime_ns
    rules.write_text("gen/*\n")  # the same size, and the mtime put back
    os.utime(rules, ns=(mtime, mtime))
    assert found(finder.find(tmp_path)) == ["AGENTS.md"]
    rules.unlink()
    assert found(finder.find(tmp_path)) == ["AGENTS.md", "gen/AGENTS.md"]


def test_a_new_gitignore_above_the_root_is_seen(tmp_path: Path, watch: bool) -> None:
    (tmp_path / ".git").mkdir()
    root = tmp_path / "pkg"
    put(root, "AGENTS.md")
    put(root, "gen/AGENTS.md")
    finder = ContextFileFinder(watch=watch)
    assert found(settled(finder, root)) == ["AGENTS.md", "gen/AGENTS.md"]
    put(tmp_path, ".gitignore", "pkg/gen/\n")
    assert found(finder.find(root)) == ["AGENTS.md"]


@pytest.mark.slow
def test_a_fixed_skipped_file_is_seen_on_the_next_find(tmp_path: Path, watch: bool) -> None:
    binary = put(tmp_path, "AGENTS.md", b"\x00\x01")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "CLAUDE.md").symlink_to("target.md")
    finder = ContextFileFinder(watch=watch)
    scan = settled(finder, tmp_path)
    assert found(scan) == []
    assert reasons(scan) == {"AGENTS.md": "binary (contains a NUL byte)", "a/CLAUDE.md": "broken symlink"}
    binary.write_text("rules\n")
    assert found(finder.find(tmp_path)) == ["AGENTS.md"]
    settled(finder, tmp_path)
    put(tmp_path, "a/target.md")
    assert found(finder.find(tmp_path)) == ["AGENTS.md", "a/CLAUDE.md"]


@pytest.mark.slow
def test_a_new_plain_file_costs_one_listing_not_a_walk(tmp_path: Path, watch: bool) -> None:
    put(tmp_path, "AGENTS.md")
    put(tmp_path, "src/app/main.py", "")
    finder = ContextFileFinder(watch=watch)
    first = settled(finder, tmp_path)
    walks = finder.walks
    time.sleep(finder_module.RACY_NS / 1e9 + 0.02)
    put(tmp_path, "src/app/helper.py", "")  # the folder's change time moves; nothing the walk uses changes
    (tmp_path / "src" / "app" / "main.py").rename(tmp_path / "src" / "app" / "entry.py")
    time.sleep(finder_module.RACY_NS / 1e9 + 0.02)
    assert finder.find(tmp_path) is first
    assert finder.walks == walks
    assert finder.is_fresh(tmp_path)
    (tmp_path / "src" / "app" / "sub").mkdir()  # a new folder could hold context files: walk again
    finder.find(tmp_path)
    assert finder.walks == walks + 1


def test_a_different_working_directory_gets_its_own_scan(tmp_path: Path) -> None:
    put(tmp_path, "one/AGENTS.md", "one\n")
    put(tmp_path, "two/CLAUDE.md", "two\n")
    finder = ContextFileFinder()
    assert [f.text for f in finder.find(tmp_path / "one").files] == ["one\n"]
    assert [f.text for f in finder.find(tmp_path / "two").files] == ["two\n"]
    assert finder.find(tmp_path / "two").root == (tmp_path / "two").resolve()


def test_clear_forgets_every_scan(tmp_path: Path) -> None:
    finder = ContextFileFinder()
    finder.find(tmp_path)
    finder.clear()
    assert not finder.is_fresh(tmp_path)
    walks = finder.walks
    finder.find(tmp_path)
    assert finder.walks == walks + 1


def test_only_the_most_recently_used_roots_stay_cached(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
    finder = ContextFileFinder(max_roots=2)
    time.sleep(finder_module.RACY_NS / 1e9 + 0.02)
    finder.find(tmp_path / "a")
    finder.find(tmp_path / "b")
    assert finder.is_fresh(tmp_path / "a") and finder.is_fresh(tmp_path / "b")
    finder.find(tmp_path / "a")  # a is now the most recent; b goes next
    finder.find(tmp_path / "c")
    assert finder.is_fresh(tmp_path / "a") and not finder.is_fresh(tmp_path / "b")


def test_the_finder_passes_its_caps_on(tmp_path: Path) -> None:
    put(tmp_path, "AGENTS.md", "x" * 50)
    put(tmp_path, "a/AGENTS.md")
    scan = ContextFileFinder(max_files=1, max_bytes=10).find(tmp_path)
    assert found(scan) == ["AGENTS.md"]
    assert scan.files[0].truncated
    assert scan.omitted_over_cap == 1


# --- nearest_context_files ------------------------------------------------------------------------


@pytest.fixture
def monorepo(tmp_path: Path) -> Path:
    put(tmp_path, "AGENTS.md", "root\n")
    put(tmp_path, "packages/a/AGENTS.md", "a\n")
    put(tmp_path, "packages/a/CLAUDE.md", "a for claude\n")
    put(tmp_path, "packages/b/AGENTS.md", "b\n")
    put(tmp_path, "packages/a/src/x.py", "")
    put(tmp_path, "packages/a/src/deep/CLAUDE.md", "deep\n")
    return tmp_path


def test_nearest_files_are_the_ancestors_shallowest_first(monorepo: Path) -> None:
    scan = find_context_files(monorepo)
    governing = nearest_context_files(scan, monorepo / "packages" / "a" / "src" / "x.py")
    assert [f.relative for f in governing] == ["AGENTS.md", "packages/a/AGENTS.md", "packages/a/CLAUDE.md"]


def test_nearest_accepts_relative_paths_folders_and_paths_that_do_not_exist(monorepo: Path) -> None:
    scan = find_context_files(monorepo)
    assert [f.relative for f in nearest_context_files(scan, "packages/a/src/deep")] == [
        "AGENTS.md",
        "packages/a/AGENTS.md",
        "packages/a/CLAUDE.md",
        "packages/a/src/deep/CLAUDE.md",
    ]
    assert [f.relative for f in nearest_context_files(scan, "packages/b/new_file.py")] == [
        "AGENTS.md",
        "packages/b/AGENTS.md",
    ]
    assert [f.relative for f in nearest_context_files(scan, "README.md")] == ["AGENTS.md"]
    assert [f.relative for f in nearest_context_files(scan, ".")] == ["AGENTS.md"]


def test_nearest_is_empty_outside_the_root(monorepo: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    scan = find_context_files(monorepo / "packages")
    assert nearest_context_files(scan, monorepo / "AGENTS.md") == ()
    assert nearest_context_files(scan, tmp_path_factory.mktemp("elsewhere") / "x.py") == ()
    assert nearest_context_files(scan, "../AGENTS.md") == ()


def test_the_finder_answers_nearest_from_its_cache(monorepo: Path) -> None:
    finder = ContextFileFinder()
    governing = finder.nearest(monorepo, "packages/b/src/y.py")
    assert [f.text for f in governing] == ["root\n", "b\n"]


# --- a property: the walk finds exactly what a plain os.walk with the same rules finds ------------

_NAMES = st.sampled_from(["AGENTS.md", "claude.MD", "src", "node_modules", ".git", "build", "lib", "x.md", "docs"])


def _oracle(root: Path) -> list[str]:
    out: list[tuple[int, str]] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in module.SKIPPED_DIR_NAMES]
        rel = Path(folder).relative_to(root)
        for name in files:
            if name.lower() in module.CONTEXT_FILE_NAMES:
                out.append((len(rel.parts), (rel / name).as_posix()))
    return [r for _, r in sorted(out)]


@pytest.mark.slow
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(_NAMES, min_size=1, max_size=5), max_size=12))
def test_the_walk_agrees_with_a_plain_os_walk(paths: list[list[str]]) -> None:
    with tempfile.TemporaryDirectory() as holder:
        root = Path(holder)
        for parts in paths:
            target = root.joinpath(*parts)
            if any(p.is_file() for p in target.parents if p != root and p.is_relative_to(root)):
                continue  # a file already stands where a folder would go
            if target.exists():
                continue
            if parts[-1].lower() in module.CONTEXT_FILE_NAMES or parts[-1] == "x.md":
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text("r")
            else:
                target.mkdir(parents=True, exist_ok=True)
        scan = find_context_files(root, max_files=1000)
        assert found(scan) == _oracle(root)
        assert scan.skipped == ()
