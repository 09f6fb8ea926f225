"""Branch creation, export and import run in a child process that SIGKILLs itself at one file operation.

Every write of the store goes through its file layer, so killing at operation N, for each N, stops
the work at each of its steps (a write stops half-way). Run through a forkserver: cheap children.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from lamina.engine import ContextEngine
from lamina.session import LocalSessionStore, OsFiles, export_session, import_session


class KillAt(OsFiles):
    """The real disk, until operation `at` (0-based): there the process is killed (a write half done)."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.ops = 0

    def _step(self) -> bool:
        now, self.ops = self.ops, self.ops + 1
        return now == self.at

    def _die(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        if self._step():
            self._die()
        return super().open(path, flags, mode)

    def write(self, fd: int, data: bytes) -> None:
        if self._step():
            super().write(fd, data[: len(data) // 2])
            self._die()
        super().write(fd, data)

    def fsync(self, fd: int) -> None:
        if self._step():
            self._die()
        super().fsync(fd)

    def close(self, fd: int) -> None:
        if self._step():
            self._die()
        super().close(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        if self._step():
            self._die()
        super().ftruncate(fd, size)

    def replace(self, src: Path, dst: Path) -> None:
        if self._step():
            self._die()
        super().replace(src, dst)

    def link(self, src: Path, dst: Path) -> None:
        if self._step():
            self._die()
        super().link(src, dst)

    def mkdir(self, path: Path) -> None:
        if self._step():
            self._die()
        super().mkdir(path)

    def fsync_dir(self, path: Path) -> None:
        if self._step():
            self._die()
        super().fsync_dir(path)


def run(mode: str, root: str, arg: str, extra: str, kill_at: int, count_file: str) -> None:
    """Do one step of work (`branch`, `export` or `import`) on a store whose layer kills at `kill_at`."""
    files = KillAt(kill_at)
    store = LocalSessionStore(root, files=files)
    if mode == "branch":
        session = store.open(arg)
        ContextEngine(session, stable_source=lambda: ()).branch(extra, seed=True)
        session.close()
    elif mode == "export":
        export_session(store, arg, extra)
    elif mode == "import":
        import_session(store, arg, cwd=extra)
    else:
        raise ValueError(mode)
    Path(count_file).write_text(str(files.ops))
