"""A test double of the store's file layer that can lose power (LazyFS-style).

`SimulatedDisk` performs every operation on the real disk (so reads see what a running system
sees: the page cache) and keeps, beside it, what would survive a power cut: for each file, the
bytes its last fsync covered; for each folder, the entries its last fsync covered. `power_loss()`
rewrites the tree under the root to that durable state: unsynced bytes are dropped (or, when
asked, a random prefix of the unsynced appended bytes survives, as a partly written-back page
would), files created or renamed without an fsync of their folder vanish or come back.

`cut_after(n)` makes the n-th operation from now raise `PowerCut` (the process dies there) and every
later one too, until `power_loss()` runs.
"""

from __future__ import annotations

import errno
import itertools
import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from lamina.session import OsFiles


class PowerCut(BaseException):
    """The power went out during an operation."""


_ids = itertools.count(1)


@dataclass(eq=False)
class _Node:
    is_dir: bool
    path: Path | None
    """Where the node is now (None once replaced over)."""
    id: int = field(default_factory=lambda: next(_ids))


class SimulatedDisk(OsFiles):
    def __init__(self, root: Path, *, seed: int = 0) -> None:
        self.root = root
        self.rng = random.Random(seed)
        self.ops = 0
        self._cut_at: int | None = None
        self._dead = False
        self._paths: dict[Path, _Node] = {}
        self._fds: dict[int, _Node] = {}
        self._data: dict[int, bytes] = {}
        """Durable bytes of each file node."""
        self._dirs: dict[int, dict[str, _Node]] = {}
        """Durable entries of each folder node."""
        self.losses = 0
        self._snapshot()

    # -- bookkeeping ------------------------------------------------------------------------

    def _snapshot(self) -> None:
        """Everything on disk now is durable."""
        self._paths.clear()
        self._data.clear()
        self._dirs.clear()
        self.root.mkdir(parents=True, exist_ok=True)
        self._adopt(self.root)

    def _adopt(self, path: Path) -> _Node:
        node = _Node(path.is_dir(), path)
        self._paths[path] = node
        if node.is_dir:
            entries = {child.name: self._adopt(child) for child in sorted(path.iterdir())}
            self._dirs[node.id] = entries
        else:
            self._data[node.id] = path.read_bytes()
        return node

    def _node(self, path: Path) -> _Node:
        node = self._paths.get(path)
        if node is None:  # made outside the layer (test setup, the store root): take it as durable
            parent = self._node(path.parent) if path != self.root else None
            node = self._adopt(path)
            if parent is not None:
                self._dirs.setdefault(parent.id, {})[path.name] = node
        return node

    def _tick(self) -> None:
        if self._dead:
            raise PowerCut
        self.ops += 1
        if self._cut_at is not None and self.ops >= self._cut_at:
            self._dead = True
            raise PowerCut

    def cut_after(self, n: int) -> None:
        self._cut_at = self.ops + n

    # -- the layer --------------------------------------------------------------------------

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        self._tick()
        existed = path.exists()
        fd = os.open(path, flags, mode)
        if not existed:
            self._node(path.parent)
            node = _Node(False, path)
            self._paths[path] = node
            self._data[node.id] = b""
        else:
            node = self._node(path)
        self._fds[fd] = node
        return fd

    def write(self, fd: int, data: bytes) -> None:
        if self._dead:
            raise PowerCut
        self.ops += 1
        if self._cut_at is not None and self.ops >= self._cut_at:
            os.write(fd, data[: self.rng.randrange(len(data) + 1)])  # the page cache held part of it
            self._dead = True
            raise PowerCut
        super().write(fd, data)

    def fsync(self, fd: int) -> None:
        self._tick()
        os.fsync(fd)
        node = self._fds[fd]
        if node.path is not None and not node.is_dir:
            self._data[node.id] = node.path.read_bytes()

    def close(self, fd: int) -> None:
        if self._dead:
            raise PowerCut
        self._fds.pop(fd, None)
        os.close(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        self._tick()
        os.ftruncate(fd, size)

    def replace(self, src: Path, dst: Path) -> None:
        self._tick()
        node = self._node(src)
        old = self._paths.get(dst)
        os.replace(src, dst)
        if old is not None:
            old.path = None
        for path in [p for p in self._paths if p == src or src in p.parents]:
            moved = self._paths.pop(path)
            new_path = dst / path.relative_to(src) if path != src else dst
            moved.path = new_path
            self._paths[new_path] = moved
        assert node.path == dst

    def link(self, src: Path, dst: Path) -> None:
        self._tick()
        os.link(src, dst)
        self._paths[dst] = self._node(src)

    def mkdir(self, path: Path) -> None:
        self._tick()
        self._node(path.parent)
        os.mkdir(path)
        node = _Node(True, path)
        self._paths[path] = node
        self._dirs[node.id] = {}

    def remove_tree(self, path: Path) -> None:
        self._tick()
        super().remove_tree(path)
        for gone in [p for p in self._paths if p == path or path in p.parents]:
            self._paths.pop(gone).path = None  # the folder's entry stays durable until its parent is fsynced

    def fsync_dir(self, path: Path) -> None:
        self._tick()
        super().fsync_dir(path)
        node = self._node(path)
        self._dirs[node.id] = {child.name: self._node(child) for child in path.iterdir()}

    # -- the power cut ----------------------------------------------------------------------

    def crash(self) -> None:
        """The process dies but the machine stays up: the page cache (everything written) survives."""
        for fd in list(self._fds):
            os.close(fd)
        self._fds.clear()
        self._dead = False
        self._cut_at = None

    def power_loss(self, rng: random.Random | None = None) -> None:
        """Drop everything not made durable, then start again from what survived.

        With `rng`, each file keeps a random prefix of the bytes appended after its last fsync half
        of the time (a torn write-back), else exactly what its last fsync covered.
        """
        for fd in list(self._fds):
            try:
                os.close(fd)  # the process is gone: its descriptors and locks with it
            except OSError as exc:
                assert exc.errno == errno.EBADF
        self._fds.clear()
        root = self._paths[self.root]
        plan = self._durable_tree(root, rng)
        for child in self.root.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        _materialise(self.root, plan)
        self._dead = False
        self._cut_at = None
        self.losses += 1
        self._snapshot()

    def _durable_tree(self, node: _Node, rng: random.Random | None) -> dict[str, object]:
        plan: dict[str, object] = {}
        for name, child in self._dirs.get(node.id, {}).items():
            if child.is_dir:
                plan[name] = self._durable_tree(child, rng)
            else:
                plan[name] = self._durable_bytes(child, rng)
        return plan

    def _durable_bytes(self, node: _Node, rng: random.Random | None) -> bytes:
        durable = self._data.get(node.id, b"")
        if rng is None or node.path is None or rng.random() < 0.5:
            return durable
        try:
            now = node.path.read_bytes()
        except OSError:
            return durable
        if not now.startswith(durable) or len(now) == len(durable):
            return durable
        return now[: len(durable) + rng.randrange(1, len(now) - len(durable) + 1)]


def _materialise(folder: Path, plan: dict[str, object]) -> None:
    for name, content in plan.items():
        if isinstance(content, dict):
            (folder / name).mkdir()
            _materialise(folder / name, content)
        else:
            assert isinstance(content, bytes)
            (folder / name).write_bytes(content)
