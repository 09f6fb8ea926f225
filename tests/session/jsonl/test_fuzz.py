"""Fuzzing the log reader, the metadata reader and the open path with damaged bytes.

Valid logs (a tree of every entry type) are damaged at random: byte flips, insertions (NUL, newlines,
invalid UTF-8, a byte order mark), deletions, truncations, and whole lines replaced by wrong types,
entries of unknown future types or versions, huge lines, duplicate keys, duplicate ids and parent
cycles. Every case must end without a hang (a per-case time bound), without an error that is not a
`SessionError`, and without losing a well-formed entry: every line of the damaged log that is still
byte for byte an original line loads. `LAMINA_EXHAUSTIVE=1` runs over 100,000 cases in all.
"""

from __future__ import annotations

import json
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TypedDict

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lamina.errors import SessionError
from lamina.session import (
    AssistantMessage,
    CompactionBoundary,
    Custom,
    LocalSessionStore,
    LogEntry,
    OutboxRecord,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
    check_session,
    repair_session,
)
from lamina.session._entries import encode_entry
from lamina.session._jsonl._jsonl_open import LOG_NAME
from lamina.session._jsonl._session_meta import META_NAME, SessionMeta, read_meta
from lamina.session._scan import scan_log
from lamina.session._tree import LostLine, mend_links, path_to, view_start_id
from tests.conftest import EXHAUSTIVE

READER_CASES = 80_000 if EXHAUSTIVE else 150
OPEN_CASES = 12_000 if EXHAUSTIVE else 40
META_CASES = 10_000 if EXHAUSTIVE else 40
CASE_SECONDS = 30.0
"""A case that runs longer than this has hung (generous: the machine may be busy)."""

_SETTINGS = {"deadline": None, "suppress_health_check": list(HealthCheck), "database": None}

pytestmark = pytest.mark.timeout(6 * 3600 if EXHAUSTIVE else 300)
"""The exhaustive run is long by design; the suite-wide time limit is for the normal run."""


@contextmanager
def _time_bound(seconds: float = CASE_SECONDS) -> Iterator[None]:
    def _alarm(signum: int, frame: object) -> None:
        raise TimeoutError(f"a case ran for more than {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# -- valid logs ---------------------------------------------------------------------------------

_texts = st.text(max_size=40)


class _Stamp(TypedDict):
    id: str
    parent_id: str | None
    ts: float


@st.composite
def _entries(draw: st.DrawFn) -> list[LogEntry]:
    count = draw(st.integers(1, 14))
    out: list[LogEntry] = []
    for i in range(count):
        parent = None if i == 0 else out[draw(st.integers(max(0, i - 3), i - 1))].id
        stamp = _Stamp(id=f"e{i:03d}", parent_id=parent, ts=1_790_000_000.0 + i)
        kind = draw(st.integers(0, 6))
        entry: LogEntry
        if kind == 0:
            entry = UserMessage(text=draw(_texts), **stamp)
        elif kind == 1:
            entry = AssistantMessage(text=draw(_texts), usage=Usage(input=draw(st.integers(0, 10**6))), **stamp)
        elif kind == 2:
            entry = ToolCall(call_id=f"c{i}", name="Read", input={"path": draw(_texts)}, **stamp)
        elif kind == 3:
            entry = ToolResult(call_id=f"c{i}", name="Read", content=draw(_texts), **stamp)
        elif kind == 4:
            entry = OutboxRecord(part_id=f"p{i}", status="queued", text=draw(_texts), **stamp)
        elif kind == 5 and i > 0:
            kept = out[draw(st.integers(0, i - 1))].id
            entry = CompactionBoundary(
                summary=draw(_texts), first_kept_id=kept, tokens_before=9, tokens_after=1, trigger="manual", **stamp
            )
        else:
            entry = Custom(name="app.x", data={"k": draw(st.integers())}, **stamp)
        out.append(entry)
    return out


# -- damage -------------------------------------------------------------------------------------

_NASTY = st.sampled_from([b"\x00", b"\n", b"\xff\xfe", b"\xef\xbb\xbf", b"\r\n", b"{", b'"', b"\\", b"\xc3"])


def _bad_line(draw: st.DrawFn, lines: list[bytes], index: int) -> bytes:
    """A replacement for line `index`, made from the original lines (all valid objects)."""
    base = json.loads(lines[index])
    choice = draw(st.integers(0, 8))
    if choice == 0:  # wrong types
        base[draw(st.sampled_from(["id", "parent_id", "ts", "text", "type", "v"]))] = draw(
            st.sampled_from([5, None, [], {}, "x", 1.5, True, -1])
        )
    elif choice == 1:  # an unknown future type
        base["type"] = draw(st.sampled_from(["hologram", "user2", ""]))
        base["beams"] = 3
    elif choice == 2:  # a known type from a newer format version
        base["v"] = draw(st.integers(2, 99))
        base["new_field"] = "from the future"
    elif choice == 3:  # huge
        base["text"] = "h" * draw(st.sampled_from([70_000, 300_000]))
    elif choice == 4:  # duplicate keys
        raw = json.dumps(base, separators=(",", ":"))
        return (raw[:-1] + ',"id":"shadow"}').encode()
    elif choice == 5:  # a duplicate id
        base["id"] = json.loads(lines[draw(st.integers(0, len(lines) - 1))])["id"]
    elif choice == 6:  # a parent later in the log, or itself (a cycle)
        base["parent_id"] = json.loads(lines[draw(st.integers(index, len(lines) - 1))])["id"]
    elif choice == 7:  # a parent that does not exist
        base["parent_id"] = "nowhere"
    else:  # not an object at all
        return draw(st.sampled_from([b"[]", b"null", b"42", b'"s"', b"", b"   "]))
    return json.dumps(base, separators=(",", ":")).encode()


@st.composite
def damaged_logs(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    """A damaged log, and the original lines (without newlines)."""
    originals = [encode_entry(e) for e in draw(_entries())]
    lines = list(originals)
    for _ in range(draw(st.integers(0, 2))):
        index = draw(st.integers(0, len(lines) - 1))
        lines[index] = _bad_line(draw, originals, index)
    data = bytearray(b"".join(line + b"\n" for line in lines))
    for _ in range(draw(st.integers(0, 3))):
        if not data:
            break
        op = draw(st.integers(0, 3))
        pos = draw(st.integers(0, len(data) - 1))
        if op == 0:
            data[pos] ^= draw(st.integers(1, 255))
        elif op == 1:
            data[pos:pos] = draw(st.one_of(_NASTY, st.binary(min_size=1, max_size=8)))
        elif op == 2:
            del data[pos : pos + draw(st.integers(1, 40))]
        else:
            del data[pos:]
    return bytes(data), originals


def _intact_ids(data: bytes, originals: list[bytes]) -> set[str]:
    """Ids of the lines of `data` that are still, byte for byte, complete original lines."""
    known = set(originals)
    segments = data.split(b"\n")[:-1]  # the last segment has no newline: it may be torn
    return {json.loads(seg)["id"] for seg in segments if seg in known}


# -- the log reader (pure) ----------------------------------------------------------------------


@pytest.mark.slow
def test_fuzz_the_log_reader() -> None:
    cases = [0]

    @settings(max_examples=READER_CASES, **_SETTINGS)  # type: ignore[arg-type]
    @given(damaged_logs())
    def case(log: tuple[bytes, list[bytes]]) -> None:
        data, originals = log
        cases[0] += 1
        with _time_bound():
            scan = scan_log(data, base_offset=0, first_line=1)
            seen: dict[str, LogEntry] = {}
            for entry in scan.entries:
                seen.setdefault(entry.id, entry)
            order = list(seen.values())
            offsets = {e.id: o for e, o in zip(scan.entries, scan.offsets, strict=True)}
            lost = [
                LostLine(sum(1 for e in order if offsets[e.id] < c.offset), c.lost_id, c.lost_parent)
                for c in scan.corrupt
            ]
            links = {r.entry_id: r.new_parent for r in mend_links(order, lost)}
            for entry in order:  # every walk ends, and reaches the root through surviving entries
                path = path_to(seen, entry.id, links)
                assert path[0].id == entry.id or links.get(path[0].id, path[0].parent_id) is None
                view_start_id(seen, entry.id, links)
        missing = _intact_ids(data, originals) - set(seen)
        assert not missing, f"well-formed entries lost: {missing}"

    case()
    print(f"log reader: {cases[0]} cases")


# -- the open path (disk) -----------------------------------------------------------------------


def _session_with(root: Path, data: bytes, meta: bytes | None) -> tuple[LocalSessionStore, str]:
    store = LocalSessionStore(root)
    with store.create() as session:
        pass
    (session.folder / LOG_NAME).write_bytes(data)
    if meta is not None:
        (session.folder / META_NAME).write_bytes(meta)
    return store, session.id


@pytest.mark.slow
def test_fuzz_the_open_path() -> None:
    cases = [0]

    @settings(max_examples=OPEN_CASES, **_SETTINGS)  # type: ignore[arg-type]
    @given(damaged_logs(), st.booleans())
    def case(log: tuple[bytes, list[bytes]], drop_meta: bool) -> None:
        data, originals = log
        intact = _intact_ids(data, originals)
        cases[0] += 1
        with tempfile.TemporaryDirectory() as tmp, _time_bound():
            store, session_id = _session_with(Path(tmp), data, b"{}" if drop_meta else None)
            try:
                with store.open(session_id, writable=False) as reader:
                    ids = {e.id for e in reader.entries()}
                    reader.view()
                    for entry_id in ids:
                        reader.path(entry_id)
                assert not intact - ids, f"well-formed entries lost: {intact - ids}"
                with store.open(session_id) as writer:
                    added = writer.append(UserMessage(text="after the damage"))
                with store.open(session_id, writable=False) as again:
                    after = {e.id for e in again.entries()}
                    assert again.leaf_id == added.id
                assert added.id in after and not intact - after
                health = check_session(store, session_id)
                repair_session(store, session_id)
                assert not check_session(store, session_id).damaged, health
                with store.open(session_id, writable=False) as repaired:
                    final = {e.id for e in repaired.entries()}
                    assert repaired.report.clean, repaired.report.messages()
                assert after <= final
            except SessionError:
                pass  # a clear error naming the file is an acceptable end; a raw one is not

    case()
    print(f"open path: {cases[0]} cases")


# -- the metadata reader ------------------------------------------------------------------------


@st.composite
def damaged_meta(draw: st.DrawFn) -> bytes:
    valid = {
        "format": 1,
        "id": "will-be-replaced",
        "created_at": 1.0,
        "updated_at": 2.0,
        "leaf_id": "e001",
        "leaf_offset": 100,
        "resume_offset": 50,
        "log_size": 200,
        "entry_count": 3,
    }
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return draw(st.binary(max_size=200))
    if kind == 1:  # wrong types and wrong values
        key = draw(st.sampled_from(sorted(valid)))
        valid[key] = draw(
            st.one_of(
                st.integers(-(10**12), 10**12), st.none(), st.text(max_size=5), st.floats(allow_nan=False), st.just([])
            )
        )
        return json.dumps(valid).encode()
    raw = bytearray(json.dumps(valid).encode())
    if kind == 2 and raw:
        pos = draw(st.integers(0, len(raw) - 1))
        raw[pos] ^= draw(st.integers(1, 255))
    else:
        raw = raw[: draw(st.integers(0, len(raw)))]
    return bytes(raw)


@pytest.mark.slow
def test_fuzz_the_metadata_reader() -> None:
    cases = [0]
    lines = [encode_entry(UserMessage(text="m0", id="e000"))]
    lines += [
        encode_entry(AssistantMessage(text=f"a{i}", id=f"e{i:03d}", parent_id=f"e{i - 1:03d}")) for i in range(1, 6)
    ]
    data = b"".join(line + b"\n" for line in lines)

    @settings(max_examples=META_CASES, **_SETTINGS)  # type: ignore[arg-type]
    @given(damaged_meta())
    def case(raw: bytes) -> None:
        cases[0] += 1
        with tempfile.TemporaryDirectory() as tmp, _time_bound():
            store, session_id = _session_with(Path(tmp), data, raw)
            folder = store.folder_of(session_id)
            with suppress(SessionError):
                read_meta(folder)
            with store.open(session_id, writable=False) as reader:
                assert [e.id for e in reader.entries()] == [f"e{i:03d}" for i in range(6)]
                assert reader.leaf_id is not None
                reader.view()
            with store.open(session_id) as writer:
                assert writer.leaf_id == "e005" or writer.leaf_id in {f"e{i:03d}" for i in range(6)}
            meta = msgspec.json.decode((folder / META_NAME).read_bytes(), type=SessionMeta)
            assert (meta.id, meta.log_size, meta.entry_count) == (session_id, len(data), 6)

    case()
    print(f"metadata reader: {cases[0]} cases")
