"""The scan decodes a log in chunks; where the chunks fall never changes what it finds."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lamina.session import _scan as scan
from lamina.session._entries import encode_entry
from tests.session.factories import exchange


def _log(turns: int) -> bytes:
    entries = [
        msgspec.structs.replace(e, id=f"e{i}", parent_id=f"e{i - 1}" if i else None, ts=float(i))
        for i, e in enumerate(e for n in range(turns) for e in exchange(n))
    ]
    return b"".join(encode_entry(e) + b"\n" for e in entries)


def _damaged(data: bytes, where: int, how: int) -> bytes:
    lines = data.split(b"\n")
    i = where % (len(lines) - 1)
    if how == 1:
        lines[i] = lines[i][: len(lines[i]) // 2]  # a cut line in the middle
    elif how == 2:
        lines[i] = b"\xff" + lines[i]  # invalid UTF-8
    elif how == 3:
        return data[: len(data) - 7]  # a torn tail
    return b"\n".join(lines)


def _summary(result: scan.LogScan) -> tuple[object, ...]:
    return (
        result.entries,
        result.offsets,
        [(c.offset, c.line) for c in result.corrupt],
        None if result.torn is None else result.torn.offset,
        result.end,
        result.lines,
    )


@given(
    turns=st.integers(1, 12),
    chunk=st.sampled_from([1, 7, 100, 1_000, 5_000]),
    where=st.integers(0, 200),
    how=st.integers(0, 3),
    first_line=st.sampled_from([None, 1]),
)
@pytest.mark.slow
def test_chunk_boundaries_never_change_the_scan(
    turns: int, chunk: int, where: int, how: int, first_line: int | None
) -> None:
    data = _damaged(_log(turns), where, how)
    whole = scan.scan_log(data, base_offset=0, first_line=first_line)
    default = scan.CHUNK_BYTES
    scan.CHUNK_BYTES = chunk  # type: ignore[misc]  # chunks of a few bytes to a few lines
    try:
        chunked = scan.scan_log(data, base_offset=0, first_line=first_line)
    finally:
        scan.CHUNK_BYTES = default  # type: ignore[misc]
    assert _summary(chunked) == _summary(whole)
    assert chunked.entries, "a damaged line or a torn tail never hides the other entries"
    assert all(data.startswith(encode_entry(e), o) for e, o in zip(chunked.entries, chunked.offsets, strict=True))
