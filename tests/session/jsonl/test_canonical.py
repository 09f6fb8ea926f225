"""The full load's shortcuts: the canonical record (CRC-32 of the lines known canonical), the mapped
read of a writer and offsets worked out on demand never change what a load finds."""

from __future__ import annotations

import json
import secrets
import tempfile
import zlib
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from lamina.session import (
    CompactionBoundary,
    JsonlSession,
    LocalSessionStore,
    ToolCall,
    UserMessage,
    _stamp,
)
from lamina.session import _scan as scan
from lamina.session._entries import encode_entry
from lamina.session._jsonl import _jsonl_open
from lamina.session._jsonl._jsonl_open import LOG_NAME
from lamina.session._jsonl._session_meta import META_NAME, read_meta, write_meta
from tests.conftest import examples
from tests.session.factories import FakeClock, counter_ids, exchange
from tests.session.jsonl.test_fuzz import damaged_logs


@pytest.fixture
def store(tmp_path: Path) -> LocalSessionStore:
    return LocalSessionStore(tmp_path / "store", clock=FakeClock(), new_entry_id=counter_ids())


def _session(store: LocalSessionStore, turns: int = 4) -> str:
    with store.create() as session:
        for n in range(turns):
            for e in exchange(n):
                session.append(e)
    return session.id


def _log(store: LocalSessionStore, session_id: str) -> bytes:
    return (store.folder_of(session_id) / LOG_NAME).read_bytes()


def _record(store: LocalSessionStore, session_id: str) -> tuple[int, int]:
    meta = read_meta(store.folder_of(session_id))
    return meta.canonical_size, meta.canonical_crc32


def _loaded(session: JsonlSession) -> tuple[object, ...]:
    """What a full load found: entries, offsets, damage, leaf."""
    entries = session.entries()
    report = session.report
    return (
        entries,
        list(session._offset_list),
        [(c.offset, c.line, c.reason) for c in report.corrupt_lines],
        [(d.entry_id, d.offset, d.line) for d in report.duplicate_ids],
        [r.describe() for r in report.relinks],
        report.bom,
        None if report.torn_tail is None else report.torn_tail.offset,
        session.leaf_id,
    )


# -- the record ---------------------------------------------------------------------------------


def test_appends_record_the_canonical_prefix(store: LocalSessionStore) -> None:
    session_id = _session(store)
    data = _log(store, session_id)
    assert _record(store, session_id) == (len(data), zlib.crc32(data))
    meta = read_meta(store.folder_of(session_id))
    assert meta.canonical_linked == len(data)  # each appended to the leaf
    assert (meta.canonical_distinct, meta.canonical_max_id) == (len(data), meta.leaf_id)  # ids made in order


def test_a_resumed_session_carries_the_record_on(store: LocalSessionStore) -> None:
    with store.create() as session:
        for n in range(5):
            for e in exchange(n):
                session.append(e)
        kept = session.path()[-3]
        session.append(
            CompactionBoundary(summary="s", first_kept_id=kept.id, tokens_before=9, tokens_after=1, trigger="manual")
        )
    with store.open(session.id) as resumed:
        assert resumed.loaded_count() < 10  # read from the boundary only
        resumed.append(UserMessage(text="after the resume"))
    data = _log(store, session.id)
    assert _record(store, session.id) == (len(data), zlib.crc32(data))
    meta = read_meta(store.folder_of(session.id))
    assert meta.canonical_linked == meta.canonical_distinct == len(data)  # the resumed writer knew both
    assert meta.canonical_max_id == meta.leaf_id


def test_a_duplicate_key_edited_into_the_recorded_prefix_is_still_refused(store: LocalSessionStore) -> None:
    session_id = _session(store)
    assert _record(store, session_id)[0] == len(_log(store, session_id))  # the whole log is recorded
    lines = _log(store, session_id).splitlines(keepends=True)
    assert lines[5].startswith(b'{"type":"user"')
    lines[5] = lines[5].replace(b'"text":', b'"text":"hidden","text":', 1)
    (store.folder_of(session_id) / LOG_NAME).write_bytes(b"".join(lines))
    with store.open(session_id, writable=False) as reopened:
        entries = reopened.entries()
        corrupt = reopened.report.corrupt_lines
    assert [c.line for c in corrupt] == [6]
    assert "duplicate key 'text'" in corrupt[0].reason
    assert len(entries) == len(lines) - 1


def test_a_wrong_record_is_ignored_and_a_full_load_rebuilds_it(store: LocalSessionStore) -> None:
    session_id = _session(store)
    folder = store.folder_of(session_id)
    with store.open(session_id, writable=False) as truth:
        expected = _loaded(truth)
    meta = read_meta(folder)
    for size, crc in [(meta.canonical_size, meta.canonical_crc32 ^ 1), (meta.canonical_size // 2, 0), (10**9, 7)]:
        write_meta(folder, msgspec.structs.replace(meta, canonical_size=size, canonical_crc32=crc))
        with store.open(session_id) as reopened:
            assert _loaded(reopened) == expected
            reopened.append(UserMessage(text="one more"))
        data = _log(store, session_id)
        assert _record(store, session_id) == (len(data), zlib.crc32(data))
        meta = read_meta(folder)
        assert meta.canonical_linked == meta.canonical_distinct == len(data)  # learnt by the load, kept by the append
        with store.open(session_id, writable=False) as truth:
            expected = _loaded(truth)
        meta = read_meta(folder)


def test_a_hand_written_line_ends_the_record(store: LocalSessionStore) -> None:
    session_id = _session(store)
    folder = store.folder_of(session_id)
    before = len(_log(store, session_id))
    with store.open(session_id, writable=False) as session:
        leaf = session.leaf_id
    spaced = {"type": "user", "id": "by-hand", "parent_id": leaf, "ts": 1.0, "v": 1, "text": "typed in an editor"}
    with open(folder / LOG_NAME, "ab") as f:
        f.write(json.dumps(spaced).encode() + b"\n")  # valid, but not as this code writes it
    with store.open(session_id) as reopened:
        later = reopened.append(UserMessage(text="appended after it"))
        assert [e.id for e in reopened.entries()[-2:]] == ["by-hand", later.id]
    assert _record(store, session_id)[0] == before
    with store.open(session_id, writable=False) as again:
        assert [e.id for e in again.entries()[-2:]] == ["by-hand", later.id]


def test_a_line_this_code_would_not_write_again_is_never_recorded(store: LocalSessionStore) -> None:
    """A tool input with keys that collide once encoded (1 and "1") would decode to one key: such a
    line is not canonical, so the record stops before it and a load checks it line by line."""
    with store.create() as session:
        session.append(UserMessage(text="first"))
        offset = session._size
        session.append(ToolCall(call_id="c", name="odd", input={1: "int key", "1": "str key"}))  # type: ignore[dict-item]
        session.append(UserMessage(text="last"))
    assert _record(store, session.id)[0] == offset
    with store.open(session.id, writable=False) as reopened:
        reopened.load_all()
        assert [c.line for c in reopened.report.corrupt_lines] == [2]
        assert "duplicate key '1'" in reopened.report.corrupt_lines[0].reason


# -- the mapped read of a writer ----------------------------------------------------------------


def _damaged_logs(store: LocalSessionStore) -> list[str]:
    ids = []
    for how in ["clean", "torn", "corrupt", "bom", "duplicate", "no newline"]:
        session_id = _session(store, turns=3)
        path = store.folder_of(session_id) / LOG_NAME
        data = path.read_bytes()
        lines = data.splitlines(keepends=True)
        if how == "torn":
            data = data + lines[4][:20]
        elif how == "corrupt":
            lines[6] = lines[6][:30] + b"\n"
            data = b"".join(lines)
        elif how == "bom":
            data = scan.BOM + data
        elif how == "duplicate":
            data = data + lines[3]
        elif how == "no newline":
            data = data[:-1]
        path.write_bytes(data)
        ids.append(session_id)
    return ids


def test_a_mapped_read_finds_what_a_plain_read_finds(store: LocalSessionStore, monkeypatch: pytest.MonkeyPatch) -> None:
    session_ids = _damaged_logs(store)
    monkeypatch.setattr(_jsonl_open, "MAP_MIN_BYTES", 1)  # every writer's full load maps its log
    for session_id in session_ids:
        meta_bytes = (store.folder_of(session_id) / META_NAME).read_bytes()
        with store.open(session_id, writable=False) as reader:
            reader.load_all()
            expected = _loaded(reader)
        with store.open(session_id) as writer:
            writer.load_all()
            assert _loaded(writer) == expected, session_id
        (store.folder_of(session_id) / META_NAME).write_bytes(meta_bytes)


# -- offsets worked out on demand ----------------------------------------------------------------


def _clean_log(turns: int) -> bytes:
    entries = [
        msgspec.structs.replace(e, id=f"e{i}", parent_id=f"e{i - 1}" if i else None, ts=float(i))
        for i, e in enumerate(e for n in range(turns) for e in exchange(n))
    ]
    return b"".join(encode_entry(e) + b"\n" for e in entries)


@given(
    turns=st.integers(1, 12),
    chunk=st.sampled_from([1, 100, 1_000, 1 << 20]),
    near=st.sampled_from([0, 1, 3, 4_096]),
    index=st.integers(0, 200),
    torn=st.booleans(),
)
def test_each_offset_worked_out_alone_is_the_line_start(
    turns: int, chunk: int, near: int, index: int, torn: bool
) -> None:
    data = _clean_log(turns)
    if torn:
        data += b'{"type":"us'
    starts = [0, *(i + 1 for i, byte in enumerate(data) if byte == ord("\n"))][: data.count(b"\n")]
    defaults = scan.CHUNK_BYTES, scan._NEAR_END
    scan.CHUNK_BYTES, scan._NEAR_END = chunk, near  # type: ignore[misc]
    try:
        found = scan.scan_log(data, base_offset=0, first_line=1)
        position = index % len(starts)
        assert found.offsets[position] == starts[position]  # alone, before the list is worked out
        assert found.offsets[-1] == starts[-1]
        assert list(found.offsets) == starts
    finally:
        scan.CHUNK_BYTES, scan._NEAR_END = defaults  # type: ignore[misc]


@given(
    turns=st.integers(1, 10),
    chunk=st.sampled_from([1, 300, 1 << 20]),
    cut=st.integers(0, 60),
    how=st.sampled_from(["right", "wrong crc", "mid-line"]),
)
def test_a_record_never_changes_what_the_scan_finds(turns: int, chunk: int, cut: int, how: str) -> None:
    data = _clean_log(turns)
    starts = [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    size = starts[cut % len(starts)]
    if how == "mid-line":
        size -= 3
    crc = zlib.crc32(data[:size]) ^ (how == "wrong crc")
    default = scan.CHUNK_BYTES
    scan.CHUNK_BYTES = chunk  # type: ignore[misc]
    try:
        plain = scan.scan_log(data, base_offset=0, first_line=1)
        trusting = scan.scan_log(data, base_offset=0, first_line=1, canonical=scan.Canonical(size, crc))
    finally:
        scan.CHUNK_BYTES = default  # type: ignore[misc]
    assert trusting.entries == plain.entries
    assert trusting.offsets == plain.offsets
    assert trusting.canonical == plain.canonical == scan.Canonical(len(data), zlib.crc32(data))


# -- the one-call decode of the recorded lines ----------------------------------------------------


def _recorded(data: bytes, cut: int, how: str, originals: list[bytes]) -> scan.Canonical:
    """A canonical record for `data`: true (a prefix of canonical lines), stale (the undamaged log's),
    with a wrong CRC-32, or ending mid-line."""
    if how == "stale":
        clean = b"".join(line + b"\n" for line in originals)
        size = sum(len(line) + 1 for line in originals[: cut % (len(originals) + 1)])
        return scan.Canonical(size, zlib.crc32(clean[:size]))
    size = 0
    for line in data.split(b"\n")[:-1][: cut + 1]:
        if not scan.is_canonical_line(line):
            break
        size += len(line) + 1
    if how == "mid-line":
        size = max(size - 3, 1)
        assume(data[size - 1 : size] != b"\n")  # else a record that lies about its lines, CRC-32 and all
    return scan.Canonical(size, zlib.crc32(data[:size]) ^ (how == "wrong crc"))


@settings(max_examples=examples(150), deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(
    log=damaged_logs(),
    cut=st.integers(0, 20),
    how=st.sampled_from(["true", "stale", "wrong crc", "mid-line"]),
    threaded=st.booleans(),
)
@pytest.mark.slow
def test_the_one_call_decode_of_recorded_lines_finds_what_line_by_line_reading_finds(
    log: tuple[bytes, list[bytes]], cut: int, how: str, threaded: bool
) -> None:
    data, originals = log
    record = _recorded(data, cut, how, originals)
    start = len(scan.BOM) if data.startswith(scan.BOM) else 0
    by_line = scan._scan_lines(data, start, 0, 1)
    default = scan.CRC_THREAD_BYTES
    scan.CRC_THREAD_BYTES = 1 if threaded else default  # type: ignore[misc]  # the CRC-32 beside the decode
    try:
        trusting = scan.scan_log(data, base_offset=0, first_line=1, canonical=record)
    finally:
        scan.CRC_THREAD_BYTES = default  # type: ignore[misc]
    assert trusting.entries == by_line.entries
    assert list(trusting.offsets) == list(by_line.offsets)
    assert [(c.offset, c.line, c.reason) for c in trusting.corrupt] == [
        (c.offset, c.line, c.reason) for c in by_line.corrupt
    ]
    assert trusting.torn == by_line.torn
    assert trusting.end == by_line.end
    found = trusting.canonical  # what it records is true: whole canonical lines, and their CRC-32
    assert found is not None
    assert found.crc32 == zlib.crc32(data[: found.size])
    assert found.size == 0 or data[found.size - 1] == ord("\n")
    assert all(scan.is_canonical_line(line) for line in data[: found.size].split(b"\n")[:-1])
    if trusting.lines is not None:
        assert trusting.lines == by_line.lines


# -- the linked record ------------------------------------------------------------------------------


def test_an_entry_that_names_no_earlier_entry_ends_the_linked_record(store: LocalSessionStore) -> None:
    with store.create() as session:
        session.append(UserMessage(text="first"))
        offset = session._size
        session._write(UserMessage(text="orphan", id="orphan", parent_id="nowhere", ts=1.0), sync=False)
        session.append(UserMessage(text="last"))
    meta = read_meta(session.folder)
    assert (meta.canonical_size, meta.canonical_linked) == (session._size, offset)
    with store.open(session.id) as reopened:
        reopened.load_all()
        assert [r.describe() for r in reopened.report.relinks] == [
            "entry orphan names a parent that is not in the log (nowhere); re-linked to e000001"
        ]
    assert read_meta(session.folder).canonical_linked == offset  # a broken link is never learnt


@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(
    shape=st.lists(st.integers(0, 3), min_size=1, max_size=20),
    odd=st.sampled_from(["none", "missing parent", "later parent", "duplicate id", "cycle"]),
    threaded=st.booleans(),
    ordered=st.booleans(),
)
@pytest.mark.slow
def test_the_linked_and_distinct_records_never_change_what_a_full_load_finds(
    shape: list[int], odd: str, threaded: bool, ordered: bool
) -> None:
    """Branches made through the API (ids made in order, or at random), then one odd line written as it
    is: a load that trusts the records finds what a load that looks for broken links and duplicate ids
    finds."""
    with tempfile.TemporaryDirectory() as tmp:
        new_id = counter_ids() if ordered else (lambda: secrets.token_hex(8))
        store = LocalSessionStore(Path(tmp), clock=FakeClock(), new_entry_id=new_id)
        with store.create() as session:
            for back in shape:
                path = session.path()
                if back and len(path) > back:
                    session.branch(path[-1 - back].id)
                session.append(UserMessage(text=f"{back}"))
            leaf = session.leaf_id
            if odd == "missing parent":
                session._write(UserMessage(text="odd", id="odd", parent_id="nowhere", ts=1.0), sync=False)
            elif odd in ("later parent", "cycle"):
                session._write(UserMessage(text="odd", id="odd", parent_id="later", ts=1.0), sync=False)
                parent = "odd" if odd == "cycle" else leaf
                session._write(UserMessage(text="later", id="later", parent_id=parent, ts=1.0), sync=False)
            elif odd == "duplicate id":
                assert leaf is not None
                session._write(UserMessage(text="again", id=leaf, parent_id=leaf, ts=1.0), sync=False)
        folder = session.folder
        meta = read_meta(folder)
        if odd == "none":
            assert meta.canonical_linked == meta.canonical_distinct == meta.canonical_size == meta.log_size
        if odd == "duplicate id":
            assert meta.canonical_distinct < meta.log_size
        default = scan.CRC_THREAD_BYTES
        scan.CRC_THREAD_BYTES = 1 if threaded else default  # type: ignore[misc]
        try:
            with store.open(session.id, writable=False) as trusting:
                fast = _loaded(trusting)
            write_meta(
                folder, msgspec.structs.replace(meta, canonical_linked=0, canonical_distinct=0, canonical_max_id="")
            )
            with store.open(session.id, writable=False) as looking:
                slow = _loaded(looking)
        finally:
            scan.CRC_THREAD_BYTES = default  # type: ignore[misc]
        assert fast == slow


# -- the distinct record ----------------------------------------------------------------------------


def test_made_ids_increase_and_differ() -> None:
    made = [_stamp._new_entry_id() for _ in range(5_000)]
    assert made == sorted(made) and len(set(made)) == len(made)
    assert all(len(i) == 16 and int(i, 16) >= 0 for i in made)


def test_an_id_not_known_new_ends_the_distinct_record_and_a_full_load_learns_it_again(tmp_path: Path) -> None:
    ids = iter(["b1", "b2", "b3", "a1", "c1"])
    store = LocalSessionStore(tmp_path / "store", clock=FakeClock(), new_entry_id=lambda: next(ids))
    with store.create() as session:
        session.append(UserMessage(text="one"))
        kept = session.append(UserMessage(text="two"))
        session.append(
            CompactionBoundary(summary="s", first_kept_id=kept.id, tokens_before=9, tokens_after=1, trigger="manual")
        )
    size = session._size
    with store.open(session.id) as resumed:  # the tail only: "a1" is not above "b3", nor known new
        assert resumed.loaded_count() == 2
        resumed.append(UserMessage(text="four"))
    meta = read_meta(session.folder)
    assert (meta.canonical_distinct, meta.canonical_max_id) == (size, "b3")
    assert meta.canonical_linked == meta.canonical_size == meta.log_size
    with store.open(session.id) as whole:
        assert [e.id for e in whole.entries()] == ["b1", "b2", "b3", "a1"]
        assert not whole.report.duplicate_ids
        whole.append(UserMessage(text="five"))  # "c1" is above "b3": the record learnt by the load grows
    meta = read_meta(session.folder)
    assert (meta.canonical_distinct, meta.canonical_max_id) == (meta.log_size, "c1")


def test_a_duplicate_id_ends_the_distinct_record_and_is_reported(store: LocalSessionStore) -> None:
    with store.create() as session:
        first = session.append(UserMessage(text="first"))
        size = session._size
        session._write(UserMessage(text="again", id=first.id, parent_id=first.id, ts=1.0), sync=False)
    assert read_meta(session.folder).canonical_distinct == size
    with store.open(session.id, writable=False) as reopened:
        assert [e.text for e in reopened.entries() if isinstance(e, UserMessage)] == ["first"]
        assert [d.entry_id for d in reopened.report.duplicate_ids] == [first.id]
