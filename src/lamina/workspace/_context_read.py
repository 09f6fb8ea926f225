"""One project context file: its record, and reading it safely (I/O: disk).

A context file is read only when it is a regular file (a FIFO is never opened for a blocking read),
resolves inside the allowed roots when it is a link, holds no NUL byte, is UTF-8 and is at most
`huge_bytes` long; its text is cut at `max_bytes` on a character boundary.
"""

from __future__ import annotations

import codecs
import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from lamina._text_codec import find_codec
from lamina.workspace._confine import outside_roots as _outside_roots
from lamina.workspace._ignore import SkippedPath
from lamina.workspace._ignore import describe_os_error as _describe

#: Start of the line appended to a truncated file's text.
TRUNCATION_MARK: Final = "[… truncated:"

# Non-blocking so that a FIFO swapped in after the stat cannot hang the open.
_OPEN_FLAGS: Final = (
    os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
)


@dataclass(frozen=True, slots=True)
class ContextFile:
    """One project context file that was read."""

    path: Path
    """Absolute path, as found under the root (a symlink is kept, not resolved)."""
    relative: str
    """POSIX path relative to the scan root, e.g. `packages/a/AGENTS.md`."""
    depth: int
    """Number of folders between the root and the file: 0 for a file in the root."""
    text: str
    """The file's text, at most `max_bytes` of it, then a `TRUNCATION_MARK` line if cut."""
    size: int
    """The whole file's size in bytes, even when `text` was truncated."""
    truncated: bool
    mtime_ns: int


def read_context_file(
    path: Path, relative: str, depth: int, *, max_bytes: int, huge_bytes: int, roots: Iterable[str | os.PathLike[str]]
) -> ContextFile | SkippedPath:
    """Read one context file found by the walk, or say why it is skipped (I/O: disk).

    Args:
        path: The file, as found under the root.
        relative: Its POSIX path relative to the root.
        depth: Folders between the root and the file.
        max_bytes: Keep at most this many bytes of its text.
        huge_bytes: Skip it when larger than this.
        roots: Folders a symlinked file may resolve into.

    Returns:
        The file read (its text capped at `max_bytes`), or why it was skipped.
    """

    def skip(reason: str) -> SkippedPath:
        return SkippedPath(path, relative, reason)

    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return skip("symlink loop")
        if isinstance(exc, FileNotFoundError):
            return skip("broken symlink" if os.path.islink(path) else "disappeared during the scan")
        return skip(f"cannot stat: {_describe(exc)}")
    if os.path.islink(path):
        outside = _outside_roots(path, roots)
        if outside is not None:
            return skip(outside)
    if not stat.S_ISREG(st.st_mode):
        return skip("not a regular file")
    if st.st_size > huge_bytes:
        return skip(f"too large ({st.st_size:,} bytes; the limit is {huge_bytes:,})")
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        return skip(f"cannot open: {_describe(exc)}")
    try:
        st = os.fstat(fd)  # the file actually opened, in case it was swapped since the stat
        if not stat.S_ISREG(st.st_mode):
            return skip("not a regular file")
        chunks: list[bytes] = []
        wanted = max_bytes + 1  # one byte more tells whether the file is longer than the cap
        while wanted > 0:
            chunk = os.read(fd, wanted)
            if not chunk:
                break
            chunks.append(chunk)
            wanted -= len(chunk)
    except OSError as exc:
        return skip(f"cannot read: {_describe(exc)}")
    finally:
        os.close(fd)
    data = b"".join(chunks)
    truncated = len(data) > max_bytes
    data = data[:max_bytes]
    # Not complete when truncated: a character cut in half at the cap is dropped, not an error.
    codec = find_codec(data, complete=not truncated)
    if codec is None:
        return skip("binary (contains a NUL byte)" if b"\x00" in data else "not text in any encoding Lamina reads")
    text = codecs.getincrementaldecoder(codec.codec)(errors="replace").decode(data, final=not truncated)
    size = st.st_size
    if truncated:
        text += f"\n\n{TRUNCATION_MARK} showing {max_bytes:,} of {size:,} bytes; read the file for the rest]"
    return ContextFile(
        path=path, relative=relative, depth=depth, text=text, size=size, truncated=truncated, mtime_ns=st.st_mtime_ns
    )
