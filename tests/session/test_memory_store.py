"""The in-memory store beyond the protocol suite: its folder of files, waiting writers, one read core."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from lamina.errors import SessionLockedError, UsageError
from lamina.session import InMemorySession, InMemorySessionStore, JsonlSession, UserMessage
from lamina.session._session_core import SessionCore
from tests.session.factories import FakeClock, counter_ids, exchange

READS = ("get", "path", "view", "children", "entries", "entries_loaded", "loaded_count", "info", "leaf_id")


@pytest.mark.parametrize("session_type", [JsonlSession, InMemorySession])
def test_the_reads_of_a_session_are_the_one_core(session_type: type[object]) -> None:
    for name in READS:
        assert getattr(session_type, name) is getattr(SessionCore, name), name


def test_the_store_owns_a_temporary_folder_of_files_and_removes_it_at_close() -> None:
    store = InMemorySessionStore()
    with store.create() as session:
        (session.data_dir / "out.txt").write_text("kept while the store is open")
        folder = store.files_root
        assert session.data_dir.is_relative_to(folder)
    assert (folder / session.id / "data" / "out.txt").is_file()
    store.close()
    assert not folder.exists()
    store.close()  # twice is fine
    with pytest.raises(UsageError, match="closed"):
        store.create()


def test_a_folder_passed_in_is_used_and_kept_and_holds_no_log(tmp_path: Path) -> None:
    with InMemorySessionStore(tmp_path / "files") as store, store.create() as session:
        for entry in exchange(1):
            session.append(entry)
        session.flush()
        sid = session.id
    assert sorted(p.name for p in (tmp_path / "files" / sid).iterdir()) == ["attachments", "data", "plans"]
    assert [p for p in (tmp_path / "files").rglob("*") if p.is_file()] == []  # no log, no metadata, no lock


def test_a_writer_waits_for_the_holder_to_close() -> None:
    with InMemorySessionStore(clock=FakeClock(), new_entry_id=counter_ids()) as store:
        holder = store.create()
        holder.append(UserMessage(text="mine"))
        opened: list[InMemorySession] = []
        waiter = threading.Thread(target=lambda: opened.append(store.open(holder.id, wait=60.0)))
        waiter.start()
        with pytest.raises(SessionLockedError):
            store.open(holder.id)  # no wait: refused at once
        holder.close()
        waiter.join()
        [second] = opened
        assert [e.text for e in second.entries() if isinstance(e, UserMessage)] == ["mine"]
        second.close()


def test_a_reader_keeps_what_it_opened_and_a_closed_writer_takes_no_appends() -> None:
    with InMemorySessionStore(clock=FakeClock(), new_entry_id=counter_ids()) as store:
        writer = store.create()
        first = writer.append(UserMessage(text="one"))
        reader = store.open(writer.id, writable=False)
        writer.append(UserMessage(text="two"))
        assert reader.entries() == [first] and reader.leaf_id == first.id
        writer.close()
        with pytest.raises(UsageError, match="read-only"):
            writer.append(UserMessage(text="after close"))
        assert store.list()[0].entry_count == 2
