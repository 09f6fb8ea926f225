"""`locate`: a path walked by descriptor, links read by Lamina, the result inside the roots and where it was checked."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lamina.workspace import PathEscapeError, locate
from lamina.workspace._confine import _located_by_name
from tests.conftest import examples

pytestmark = pytest.mark.skipif(not hasattr(os, "O_NOFOLLOW"), reason="POSIX descriptors")


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace (`ws`, with `a/f.txt`) and a folder beside it (`out`, with `secret.txt`)."""
    ws, out = tmp_path / "ws", tmp_path / "out"
    (ws / "a").mkdir(parents=True)
    out.mkdir()
    (ws / "a" / "f.txt").write_text("inside\n")
    (out / "secret.txt").write_text("secret\n")
    return ws.resolve(), out.resolve()


def read(path: Path | str, roots: tuple[Path, ...], **options: object) -> str:
    with locate(path, roots, **options) as where:  # type: ignore[arg-type]
        fd = where.open()
        try:
            return os.read(fd, 1000).decode()
        finally:
            os.close(fd)


def test_links_inside_the_roots_are_followed(tree: tuple[Path, Path]) -> None:
    ws, _ = tree
    (ws / "alias").symlink_to("a")
    (ws / "absolute").symlink_to(ws / "a" / "f.txt")
    (ws / "a" / "up").symlink_to("../a/f.txt")
    for path in ("alias/f.txt", "absolute", "a/up", "a/../alias/./f.txt"):
        with locate(ws / path, (ws,)) as where:
            assert where.real == str(ws / "a" / "f.txt")
        assert read(ws / path, (ws,)) == "inside\n"


def test_a_link_leading_out_is_refused_and_names_where(tree: tuple[Path, Path]) -> None:
    ws, out = tree
    (ws / "door").symlink_to(out)
    (ws / "innocent.txt").symlink_to(out / "secret.txt")
    (ws / "a" / "up").symlink_to("../../out")
    for path in ("door/secret.txt", "innocent.txt", "a/up/secret.txt", "door"):
        with pytest.raises(PathEscapeError, match=f"outside the allowed folders \\(to {out}"):
            locate(ws / path, (ws,))


def test_dot_dot_after_a_link_goes_up_from_where_the_link_led(tree: tuple[Path, Path]) -> None:
    ws, out = tree
    (out / "deep").mkdir()
    (ws / "down").symlink_to(out / "deep")
    # as the kernel does: `down/..` is `out`, not `ws`
    with pytest.raises(PathEscapeError):
        locate(ws / "down" / ".." / "secret.txt", (ws,))


def test_a_link_loop_is_an_error_not_a_hang(tree: tuple[Path, Path]) -> None:
    ws, _ = tree
    (ws / "loop").symlink_to("loop")
    (ws / "x").symlink_to("y")
    (ws / "y").symlink_to("x/z")
    for path in ("loop", "x", "loop/f"):
        with pytest.raises(OSError) as caught:
            locate(ws / path, (ws,))
        assert caught.value.errno == errno.ELOOP


def test_folders_are_made_inside_the_roots_only(tree: tuple[Path, Path]) -> None:
    ws, out = tree
    (ws / "door").symlink_to(out)
    with pytest.raises(PathEscapeError):
        locate(ws / "door" / "new" / "file.txt", (ws,), make_folders=True)
    assert not (out / "new").exists()
    with locate(ws / "b" / "c" / "file.txt", (ws,), make_folders=True) as where:
        assert where.replace(b"made\n") is None
    assert (ws / "b" / "c" / "file.txt").read_text() == "made\n"


def test_a_path_found_elsewhere_than_where_it_was_checked_is_refused(tree: tuple[Path, Path]) -> None:
    ws, _ = tree
    (ws / "b").mkdir()
    (ws / "b" / "f.txt").write_text("other\n")
    (ws / "link").symlink_to("b")
    with pytest.raises(PathEscapeError, match="changed after it was checked"):
        locate(ws / "link" / "f.txt", (ws,), expect=ws / "a" / "f.txt")
    assert read(ws / "link" / "f.txt", (ws,), expect=ws / "b" / "f.txt") == "other\n"


def test_replace_writes_through_a_final_link_and_keeps_the_mode(tree: tuple[Path, Path]) -> None:
    ws, _ = tree
    target = ws / "a" / "f.txt"
    target.chmod(0o640)
    (ws / "link.txt").symlink_to("a/f.txt")
    with locate(ws / "link.txt", (ws,)) as where:
        assert where.replace(b"new\n") == len("inside\n")
    assert (ws / "link.txt").is_symlink()
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert [p.name for p in (ws / "a").iterdir()] == ["f.txt"]  # no temporary file left


def test_a_name_swapped_for_a_link_after_locating_is_neither_read_nor_written_through(tree: tuple[Path, Path]) -> None:
    ws, out = tree
    with locate(ws / "a" / "f.txt", (ws,)) as where:
        (ws / "a" / "f.txt").unlink()
        (ws / "a" / "f.txt").symlink_to(out / "secret.txt")
        with pytest.raises(PathEscapeError, match="became a link"):
            where.open()
        with pytest.raises(PathEscapeError, match="became a link"):
            where.replace(b"leaked\n")
    assert (out / "secret.txt").read_text() == "secret\n"


def test_a_folder_swapped_for_a_link_after_locating_is_still_the_folder_held(tree: tuple[Path, Path]) -> None:
    ws, out = tree
    with locate(ws / "a" / "f.txt", (ws,)) as where:
        (ws / "a").rename(ws / "moved")
        (ws / "a").symlink_to(out)
        where.replace(b"written\n")
    assert (ws / "moved" / "f.txt").read_text() == "written\n"
    assert sorted(p.name for p in out.iterdir()) == ["secret.txt"]


def test_a_start_folder_is_walked_from_and_its_links_checked(tree: tuple[Path, Path]) -> None:
    ws, out = tree
    (ws / "a" / "door").symlink_to(out)
    with locate(ws / "a", (ws,), folder=True) as base:
        assert base.real == str(ws / "a")
        assert read("f.txt", (ws,), start=base) == "inside\n"
        with pytest.raises(PathEscapeError):
            locate("door/secret.txt", (ws,), start=base)
        with pytest.raises(PathEscapeError):
            locate("../../out/secret.txt", (ws,), start=base)
    with pytest.raises(NotADirectoryError):
        locate(ws / "a" / "f.txt", (ws,), folder=True)


def test_no_descriptor_is_left_open(tree: tuple[Path, Path]) -> None:
    ws, out = tree
    (ws / "door").symlink_to(out)
    before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    for _ in range(50):
        read(ws / "a" / "f.txt", (ws,))
        with pytest.raises(PathEscapeError):
            locate(ws / "door" / "secret.txt", (ws,))
        with pytest.raises(FileNotFoundError):
            locate(ws / "missing" / "x", (ws,))
    if before is not None:
        assert len(os.listdir("/proc/self/fd")) == before


# Trees of folders and links, relative and absolute, some leading out of the workspace: whatever the
# tree, `locate` reaches the file the kernel would reach, or refuses it exactly when that lies outside.
NAMES = ("a", "b", "c")
_TARGETS = st.one_of(
    st.lists(st.sampled_from((*NAMES, "..", ".")), min_size=1, max_size=3).map("/".join),
    st.sampled_from(("/ROOT/ws", "/ROOT/ws/a", "/ROOT/out", "/ROOT/out/s", "/ROOT/ws/b/c")),
)
_ENTRIES = st.dictionaries(
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map("/".join),
    st.one_of(st.just(None), st.just("file"), _TARGETS),
    max_size=8,
)


def _build(base: Path, entries: dict[str, str | None]) -> None:
    for where in ("ws", "out"):
        (base / where).mkdir()
    (base / "out" / "s").write_text("outside\n")
    for relative, kind in sorted(entries.items()):
        path = base / "ws" / relative
        if not path.parent.is_dir() or path.parent.is_symlink() or os.path.lexists(path):
            continue
        if kind is None:
            path.mkdir()
        elif kind == "file":
            path.write_text(relative + "\n")
        else:
            path.symlink_to(kind.replace("/ROOT", str(base)))


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=_ENTRIES, paths=st.lists(st.lists(st.sampled_from((*NAMES, "..", "s")), max_size=4), max_size=6))
def test_locate_agrees_with_the_kernel_and_refuses_exactly_what_lies_outside(
    entries: dict[str, str | None], paths: list[list[str]]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder).resolve()
        _build(base, entries)
        ws = base / "ws"
        for parts in [*paths, *([name] for name in entries)]:
            path = os.path.join(ws, *parts)
            try:
                os.stat(path)  # the kernel's own walk decides whether the path leads anywhere
                real = os.path.realpath(path, strict=True)
            except OSError:
                with pytest.raises(OSError):
                    read(path, (ws,))
                continue
            inside = real == str(ws) or real.startswith(str(ws) + "/")
            if not inside:
                with pytest.raises(PathEscapeError):
                    read(path, (ws,))
                continue
            with locate(path, (ws,)) as where:
                assert where.real == real
            if os.path.isfile(real):
                assert read(path, (ws,)) == Path(real).read_text()


def test_where_paths_cannot_be_walked_by_descriptor_the_real_path_is_checked(tree: tuple[Path, Path]) -> None:
    """The fallback for platforms without `*at` calls (Windows): the real path checked, then used by name."""
    ws, out = tree
    (ws / "door").symlink_to(out)
    (ws / "alias").symlink_to("a")
    with _located_by_name(str(ws / "alias" / "f.txt"), (str(ws),), None, False) as where:
        fd = where.open()
        assert os.read(fd, 100) == b"inside\n"
        os.close(fd)
    with pytest.raises(PathEscapeError):
        _located_by_name(str(ws / "door" / "secret.txt"), (str(ws),), None, False)
    with pytest.raises(PathEscapeError, match="changed after it was checked"):
        _located_by_name(str(ws / "alias" / "f.txt"), (str(ws),), str(ws / "b.txt"), False)
    with _located_by_name(str(ws / "new" / "n.txt"), (str(ws),), None, True) as where:
        assert where.replace(b"made\n") is None
    assert (ws / "new" / "n.txt").read_text() == "made\n"
