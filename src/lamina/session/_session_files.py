"""A session's files (attachments, data, plans): the operations every store's sessions share (I/O).

Described in docs/session-log.md ("A session's files"). A file is named relative to the session
(`attachments/<sha256>`, `data/tool-results/x.txt`, `plans/x.md`); `FolderFiles` keeps them in a
local folder (the JSONL store), `CachedFiles` in a backend (memory, PostgreSQL) with the local
folder as a cache that `local_file` fills on demand.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Final

from lamina._atomic import DISK, atomic_write
from lamina.errors import UsageError
from lamina.session._protocol import VIRTUAL_ROOT, FileInfo, FileSource
from lamina.session._stamp import SUBFOLDERS

CHUNK: Final = 1024 * 1024
"""Bytes read or written at a time."""
NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
"""Passed to every open of a session file: a symbolic link at the path fails with `ELOOP`."""


def open_for_reading(path: Path) -> BinaryIO:
    """Open a session file to read it, never through a symbolic link (`OSError` with `ELOOP` if it is one)."""
    fd = os.open(path, os.O_RDONLY | NOFOLLOW)
    try:
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def check_file_name(name: str) -> str:
    """`name` if it names a file of a session (`attachments/`, `data/` or `plans/` below), else `UsageError`."""
    parts = name.split("/")
    if not name or parts[0] not in SUBFOLDERS or any(p in ("", ".", "..") for p in parts) or "\0" in name:
        raise UsageError(f"not a session file name: {name!r} (attachments/…, data/… or plans/…)")
    return name


def chunks_of(source: FileSource) -> Iterator[bytes]:
    """The bytes of `source`, a chunk at a time."""
    if isinstance(source, bytes | bytearray | memoryview):
        view = memoryview(source)
        for start in range(0, max(len(view), 1), CHUNK):
            yield bytes(view[start : start + CHUNK])
        return
    if isinstance(source, Path):
        with source.open("rb") as handle:
            while chunk := handle.read(CHUNK):
                yield chunk
        return
    yield from source


def digest_of(source: bytes | Path) -> tuple[str, int]:
    """(SHA-256, size) of `source`, read in chunks."""
    digest, size = hashlib.sha256(), 0
    for chunk in chunks_of(source):
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


@contextlib.contextmanager
def replayable(source: FileSource) -> Iterator[bytes | Path]:
    """`source` as something that can be read twice: chunks are spooled to a temporary file first."""
    if isinstance(source, bytes | Path):
        yield source
        return
    fd, spool = tempfile.mkstemp(prefix="lamina-file-")
    try:
        with os.fdopen(fd, "wb") as handle:
            for chunk in source:
                handle.write(chunk)
        yield Path(spool)
    finally:
        Path(spool).unlink(missing_ok=True)


def write_local(target: Path, source: FileSource, *, durable: bool) -> FileInfo:
    """Write `source` to `target` through a temporary name and a rename (fsynced with its folder if `durable`)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0

    def write(fd: int) -> None:
        nonlocal size
        for chunk in chunks_of(source):
            digest.update(chunk)
            size += len(chunk)
            DISK.write(fd, chunk)

    atomic_write(target, write, durable=durable)
    return FileInfo(target.name, size, digest.hexdigest())


def stored_files(root: Path, prefix: str) -> Iterator[tuple[str, Path]]:
    """(name, path) of the regular files under `root` whose names start with `prefix` (no links, no temporaries)."""
    for top in SUBFOLDERS:
        if not (top.startswith(prefix) or prefix.startswith(top)) or not (root / top).is_dir():
            continue
        for here, dirs, names in os.walk(root / top):
            dirs[:] = [d for d in dirs if not (Path(here) / d).is_symlink()]
            for file in names:
                path = Path(here) / file
                name = path.relative_to(root).as_posix()
                if file.startswith(".") or path.is_symlink() or not path.is_file():
                    continue
                if name.startswith(prefix):
                    yield name, path


CarriedFolder = tuple[Path, list[tuple[Path, Path]]]
"""A folder of a copied session's files, as it is under the copy, and its regular files (source, copy)."""


def carried_folders(source: Path, target: Path) -> Iterator[tuple[str, Iterator[CarriedFolder]]]:
    """What a copy of the session whose files are under `source` carries to `target`, subfolder by subfolder.

    Each subfolder there is (`attachments`, `data`, `plans`) comes with its folders, top first, and
    their regular files (links and anything else that is not a file are not a session's).
    """
    for name in SUBFOLDERS:
        if (source / name).is_dir():
            yield name, _carried(source, target, name)


def _carried(source: Path, target: Path, name: str) -> Iterator[CarriedFolder]:
    for folder, _, files in os.walk(source / name):
        here = target / Path(folder).relative_to(source)
        pairs = [(Path(folder) / file, here / file) for file in files]
        yield here, [(src, dst) for src, dst in pairs if not src.is_symlink() and src.is_file()]


class FolderFiles:
    """A session's files kept in its local folder (the JSONL store): the folder is the truth."""

    def __init__(self, root: Path, check_writable: Callable[[], None]) -> None:
        self._root = root
        self._check_writable = check_writable
        """Raises when the session may not write (a read-only session takes no files, as it takes no appends)."""

    def put_file(self, name: str, source: FileSource) -> FileInfo:
        check_file_name(name)
        self._check_writable()
        info = write_local(self._root / check_file_name(name), source, durable=True)
        return FileInfo(name, info.size, info.sha256)

    def open_file(self, name: str) -> BinaryIO:
        return open_for_reading(self._root / check_file_name(name))

    def stat_file(self, name: str) -> FileInfo | None:
        path = self._root / check_file_name(name)
        if path.is_symlink() or not path.is_file():
            return None
        sha256, size = digest_of(path)
        return FileInfo(name, size, sha256)

    def list_files(self, prefix: str = "") -> list[FileInfo]:
        out: list[FileInfo] = []
        for name, path in sorted(stored_files(self._root, prefix)):
            sha256, size = digest_of(path)
            out.append(FileInfo(name, size, sha256))
        return out

    def local_file(self, name: str) -> Path:
        return self._root / check_file_name(name)

    def shown_path(self, name: str = "") -> str:
        return str(self._root / check_file_name(name)) if name else str(self._root)

    def file_name(self, shown: str) -> str | None:
        return _name_under(str(self._root), shown)


def _name_under(root: str, shown: str) -> str | None:
    if not shown.startswith(root + "/"):
        return None
    name = PurePosixPath(shown[len(root) + 1 :]).as_posix()
    try:
        return check_file_name(name)
    except UsageError:
        return None


class CachedFiles(ABC):
    """A session's files kept in a backend, with its local folder as a cache filled on demand."""

    _virtual: bool = False
    """Names are shown under `VIRTUAL_ROOT` (the same on every host), not as local paths."""

    @property
    @abstractmethod
    def _files_root(self) -> Path:
        """The local cache folder of the session's files."""

    @abstractmethod
    def _store_file(self, name: str, source: bytes | Path, sha256: str, size: int) -> None:
        """Make `source` the file `name` in the backend, durably."""

    @abstractmethod
    def open_file(self, name: str) -> BinaryIO: ...

    @abstractmethod
    def stat_file(self, name: str) -> FileInfo | None: ...

    @abstractmethod
    def list_files(self, prefix: str = "") -> list[FileInfo]: ...

    def put_file(self, name: str, source: FileSource) -> FileInfo:
        check_file_name(name)
        with replayable(source) as local:
            sha256, size = digest_of(local)
            self._store_file(name, local, sha256, size)
            try:
                write_local(self._files_root / name, local, durable=False)
            except OSError:
                if not self._virtual:  # the model reads this copy by its local path: a put it lacks failed
                    raise
                # else a convenience only: the backend holds the file, `local_file` fetches it again
        return FileInfo(name, size, sha256)

    def local_file(self, name: str) -> Path:
        target = self._files_root / check_file_name(name)
        info = self.stat_file(name)
        if info is None:  # a folder (fetch everything under it), or a file not stored (yet)
            for inner in self.list_files(name + "/"):
                self._fetch(inner)
            return target
        self._fetch(info)
        return target

    def _fetch(self, info: FileInfo) -> None:
        target = self._files_root / info.name
        fresh = not target.is_symlink() and target.is_file() and target.stat().st_size == info.size
        if fresh and digest_of(target)[0] == info.sha256:
            return
        with self.open_file(info.name) as handle:
            write_local(target, iter(lambda: handle.read(CHUNK), b""), durable=False)

    def shown_path(self, name: str = "") -> str:
        root = VIRTUAL_ROOT if self._virtual else str(self._files_root)
        return f"{root}/{check_file_name(name)}" if name else root

    def file_name(self, shown: str) -> str | None:
        return _name_under(VIRTUAL_ROOT if self._virtual else str(self._files_root), shown)
