"""Project memory: `MEMORY.md` at the workspace root, loaded as a capped stable part (I/O: disk).

Memory holds conclusions that stay useful across sessions (design chapter §10.8, SPEC F7). The
file is loaded keeping its top, whole lines while they fit, so that the whole memory part stays
within `max_tokens` (5,000 by default). See docs/workspace.md, "Project memory".
"""

from __future__ import annotations

import codecs
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from lamina._text_codec import find_codec
from lamina.context import Authority, Part, Stability, Tier
from lamina.defang import defang, join, render_block, trusted
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator
from lamina.workspace._confine import outside_roots
from lamina.workspace._context_files import SkippedPath

__all__ = [
    "DEFAULT_MEMORY_MAX_TOKENS",
    "MEMORY_FILE_NAME",
    "ProjectMemory",
    "load_memory",
    "memory_part",
]

MEMORY_FILE_NAME: Final = "MEMORY.md"
DEFAULT_MEMORY_MAX_TOKENS: Final = 5_000
_MAX_READ_BYTES: Final = 1_048_576
"""Read at most this much; a longer file is cut anyway, so the rest need not be read."""


@dataclass(frozen=True, slots=True)
class ProjectMemory:
    """The top of a project's `MEMORY.md`, as much of it as the budget allows."""

    path: Path
    text: str
    """The kept top of the file, before defanging."""
    truncated: bool
    kept_lines: int
    total_lines: int | None
    """Lines in the whole file; None when it was too large to read in full."""
    total_tokens: int | None
    """Estimated tokens of the whole file; None when it was too large to read in full."""
    size: int
    mtime_ns: int


def load_memory(
    root: str | os.PathLike[str],
    *,
    max_tokens: int = DEFAULT_MEMORY_MAX_TOKENS,
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
    allowed_roots: Sequence[str | os.PathLike[str]] = (),
) -> ProjectMemory | SkippedPath | None:
    """Read `MEMORY.md` in `root`, keeping as much of its top as fits a part of `max_tokens` tokens.

    Args:
        root: The working directory.
        max_tokens: Most tokens of the memory part.
        estimator: Counts them.
        allowed_roots: Folders besides `root` that a linked `MEMORY.md` may point into.

    Returns:
        The memory; a `SkippedPath` with the reason when the file exists but cannot be used (a link
        resolving outside `root` and `allowed_roots`, not a regular file, unreadable, binary, not
        UTF-8); None when there is no such file or it holds only whitespace.
    """
    path = Path(root) / MEMORY_FILE_NAME
    read = _read_memory(path, (root, *allowed_roots))
    if not isinstance(read, _MemoryFile):
        return read
    if not read.text.strip():
        return None
    return _fitted(path, read, max_tokens, estimator)


@dataclass(frozen=True, slots=True)
class _MemoryFile:
    """The text read from `MEMORY.md` (at most `_MAX_READ_BYTES` of it) and the file's stat."""

    text: str
    complete: bool
    """Whether `text` is the whole file."""
    st: os.stat_result


def _read_memory(path: Path, roots: Sequence[str | os.PathLike[str]]) -> _MemoryFile | SkippedPath | None:
    """Read the top of the memory file at `path`, or say why it cannot be used (I/O: disk).

    Args:
        path: `MEMORY.md` in the working directory.
        roots: The working directory and the folders a linked file may point into.

    Returns:
        The text read; a `SkippedPath` when the file exists but cannot be used; None when there is none.
    """

    def skip(reason: str) -> SkippedPath:
        return SkippedPath(path, MEMORY_FILE_NAME, reason)

    try:
        st = os.stat(path)
    except FileNotFoundError:
        return skip("broken symlink") if os.path.islink(path) else None
    except OSError as exc:
        return skip(f"cannot stat: {_describe(exc)}")
    outside = outside_roots(path, roots)
    if outside is not None:
        return skip(outside)
    if not stat.S_ISREG(st.st_mode):
        return skip("not a regular file")
    try:
        with open(path, "rb") as handle:
            data = handle.read(_MAX_READ_BYTES + 1)
    except OSError as exc:
        return skip(f"cannot read: {_describe(exc)}")
    complete = len(data) <= _MAX_READ_BYTES
    try:
        text = _decode(data[:_MAX_READ_BYTES], complete=complete)
    except _NotText as exc:
        return skip(exc.reason)
    return _MemoryFile(text, complete, st)


class _NotText(Exception):
    """The bytes read are not text: `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _decode(data: bytes, *, complete: bool) -> str:
    """The text of the bytes read from the file (pure).

    Args:
        data: The bytes read, at most `_MAX_READ_BYTES`.
        complete: Whether they are the whole file (else a character cut in half at the end is dropped).

    Returns:
        The text in the encoding it is in (`lamina._text_codec`), a byte order mark dropped.

    Raises:
        _NotText: The bytes are binary (a NUL byte) or text in no encoding Lamina reads.
    """
    codec = find_codec(data, complete=complete)
    if codec is None:
        raise _NotText("binary (contains a NUL byte)" if b"\x00" in data else "not text in any encoding Lamina reads")
    return codecs.getincrementaldecoder(codec.codec)(errors="replace").decode(data, final=complete)


def _fitted(path: Path, read: _MemoryFile, max_tokens: int, estimator: TokenEstimator) -> ProjectMemory:
    """The memory keeping as much of the top of `read` as fits a part of `max_tokens` tokens (pure)."""
    text, complete, st = read.text, read.complete, read.st
    total_lines = len(text.splitlines()) if complete else None
    total_tokens = estimator.count(text) if complete else None

    def memory(kept: str) -> ProjectMemory:
        return ProjectMemory(
            path=path,
            text=kept,
            truncated=len(kept) < len(text) or not complete,
            kept_lines=len(kept.splitlines()),
            total_lines=total_lines,
            total_tokens=total_tokens,
            size=st.st_size,
            mtime_ns=st.st_mtime_ns,
        )

    def fits(kept: str) -> bool:
        return estimator.count(memory_part(memory(kept)).text) <= max_tokens

    if complete and fits(text):
        return memory(text)
    # The wrapper, intro and note cost the same for any content: what is left is the content's share.
    # Escapes can only lengthen the content, so the raw cut is an upper bound; shorten it if needed.
    share = max_tokens - estimator.count(memory_part(memory("")).text)
    kept = _top(text, share, estimator)
    if not fits(kept):
        kept = _shrink_to_fit(kept, fits)
    return memory(kept)


def _shrink_to_fit(kept: str, fits: Callable[[str], bool]) -> str:
    """The longest start of `kept` that `fits`, cut at a line end where it can be (pure)."""
    kept = _at_line_end(kept, _longest(len(kept), lambda length: fits(kept[:length])))
    while kept and not fits(kept):
        kept = _at_line_end(kept, len(kept) - 1)
    return kept


def _top(text: str, max_tokens: int, estimator: TokenEstimator) -> str:
    """The longest start of `text` within `max_tokens`: whole lines when at least one line fits."""
    if max_tokens <= 0:
        return ""
    if estimator.count(text) <= max_tokens:
        return text
    return _at_line_end(text, _longest(len(text), lambda length: estimator.count(text[:length]) <= max_tokens))


def _longest(limit: int, fits: Callable[[int], bool]) -> int:
    """The largest length up to `limit` that `fits`, by bisection (0 when none does; longer never fits better)."""
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def _at_line_end(text: str, limit: int) -> str:
    """`text[:limit]`, shortened to its last complete line when it has one."""
    line_end = text.rfind("\n", 0, limit)
    return text[: line_end + 1] if line_end >= 0 else text[:limit]


_INTRO = (
    "Project memory: conclusions kept in MEMORY.md at the root of the working directory across sessions. "
    "Use it as background on this project; it can be out of date, so check it against the code when it matters."
)


def memory_part(memory: ProjectMemory) -> Part:
    """The stable `memory` part: the kept text, defanged, and a note when the file was cut."""
    # Never cut by defang: the budget was applied to the whole part when the file was loaded.
    limit = 20 * len(memory.text) + 16
    wrapped = defang(memory.text, source=MEMORY_FILE_NAME, authority=Authority.PROJECT_FILE, max_chars=limit)
    pieces = [trusted(_INTRO), wrapped]
    if memory.truncated:
        whole = _count(memory.total_lines, "line") if memory.total_lines is not None else _count(memory.size, "byte")
        kept = _count(memory.kept_lines, "line")
        pieces.append(
            trusted(
                f"[MEMORY.md was cut to fit the memory budget: the first {kept} of {whole} are shown. The full file "
                "is MEMORY.md in the working directory; Read it for the rest, and keep it short.]"
            )
        )
    text = render_block("memory", join("\n", pieces), source=MEMORY_FILE_NAME)
    return Part("memory", text, MEMORY_FILE_NAME, Authority.PROJECT_FILE, Stability.STABLE, Tier.MEMORY)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def _describe(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied"
    return (exc.strerror or type(exc).__name__).lower()
