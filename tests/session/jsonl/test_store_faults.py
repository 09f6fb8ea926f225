"""Issue 28: the JSONL store under faults from outside (races, folders removed or restored, links, forks).

Each test is one promise: nothing acknowledged is lost and every failure is a `LaminaError`, with a
delete racing a writer or another delete, a folder removed or replaced under a writer, a log cut
under its metadata, a symbolic link in place of a session file, a failed create, a forked child of
a lock holder, and a lock file that does not yet name its holder.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import lamina
from lamina.errors import (
    LaminaError,
    SessionCorruptError,
    SessionIOError,
    SessionLockedError,
    SessionNotFoundError,
)
from lamina.session import LocalSessionStore, LogEntry, OsFiles, OutboxRecord, UserMessage
from lamina.session._jsonl._jsonl_open import LOG_NAME
from lamina.session._jsonl._jsonl_store import DELETING_PREFIX
from lamina.session._jsonl._session_meta import META_NAME, read_meta
from tests.conftest import EXHAUSTIVE
from tests.session.factories import FakeClock, counter_ids
from tests.session.jsonl._power import PowerCut, SimulatedDisk

ROUNDS = 600 if EXHAUSTIVE else 60
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def store(tmp_path: Path) -> LocalSessionStore:
    return LocalSessionStore(tmp_path / "store", clock=FakeClock(), new_entry_id=counter_ids())


@pytest.fixture
def fine_switching() -> Iterator[None]:
    """Switch threads often, so the racing threads interleave between the store's steps."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def _session_with(store: LocalSessionStore, n: int = 2) -> tuple[str, list[LogEntry]]:
    with store.create() as session:
        written: list[LogEntry] = [session.append(UserMessage(text=f"m{i}")) for i in range(n)]
    return session.id, written


def _race(*bodies: Callable[[], object]) -> list[BaseException]:
    """Run each body on its own thread from one barrier; the errors they raised."""
    barrier = threading.Barrier(len(bodies))
    errors: list[BaseException] = []

    def run(body: Callable[[], None]) -> None:
        barrier.wait()
        try:
            body()
        except BaseException as exc:  # every error is collected and judged by the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(body,)) for body in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive(), "a racing thread hung"
    return errors


# -- 1. delete under the lock ---------------------------------------------------------------------


def test_delete_is_refused_while_a_writer_holds_the_session_and_waits_when_asked(store: LocalSessionStore) -> None:
    session_id, written = _session_with(store)
    writer = store.open(session_id)
    with pytest.raises(SessionLockedError, match=r"already open for writing by pid \d+"):
        store.delete(session_id)
    assert store.open(session_id, writable=False).entries() == written  # refused: untouched
    closed = threading.Event()

    def close_soon() -> None:
        writer.close()
        closed.set()

    errors = _race(lambda: store.delete(session_id, wait=20.0), close_soon)
    assert errors == [] and closed.is_set()
    assert store.list() == []
    with pytest.raises(SessionNotFoundError):
        store.open(session_id)


@pytest.mark.slow
def test_a_delete_racing_a_writer_never_loses_an_acknowledged_entry(
    store: LocalSessionStore, fine_switching: None
) -> None:
    lost = 0
    for n in range(ROUNDS):
        session_id, _ = _session_with(store, 1)
        acknowledged: list[LogEntry] = []
        survived_close: list[bool] = []

        def write(
            session_id: str = session_id,
            acknowledged: list[LogEntry] = acknowledged,
            survived_close: list[bool] = survived_close,
            n: int = n,
        ) -> None:
            for _ in range(50):  # until it gets in or the session is gone
                try:
                    session = store.open(session_id)
                except SessionLockedError:
                    continue
                except SessionNotFoundError:
                    return
                with session:
                    for i in range(3):
                        entry = session.append(UserMessage(text=f"round {n} entry {i}"))
                        session.flush()
                        acknowledged.append(entry)
                    # still the writer: what it acknowledged must be in the session now
                    try:
                        with store.open(session_id, writable=False) as reader:
                            survived_close.append(all(e in reader.entries() for e in acknowledged))
                    except LaminaError:  # gone, or its log is: lost
                        survived_close.append(False)
                return

        def delete(session_id: str = session_id) -> None:
            with contextlib.suppress(SessionLockedError):
                store.delete(session_id)

        errors = _race(write, delete)
        assert all(isinstance(e, LaminaError) for e in errors), errors
        if acknowledged and not all(survived_close):
            lost += 1
        with contextlib.suppress(SessionNotFoundError):  # the delete came after the writer closed: fine
            store.delete(session_id)
    assert lost == 0, f"{lost} of {ROUNDS} races lost acknowledged entries"
    assert list(store.root.iterdir()) == []


@pytest.mark.slow
def test_racing_deletes_and_readers_raise_only_lamina_errors(store: LocalSessionStore, fine_switching: None) -> None:
    for _ in range(ROUNDS):
        session_id, _ = _session_with(store)
        deleted: list[bool] = []

        def delete(session_id: str = session_id, deleted: list[bool] = deleted) -> None:
            try:
                store.delete(session_id)
                deleted.append(True)
            except (SessionNotFoundError, SessionLockedError):
                pass

        def read(session_id: str = session_id) -> None:
            with contextlib.suppress(SessionNotFoundError):
                store.open(session_id, writable=False).entries()

        errors = _race(delete, delete, read, store.list)
        assert errors == [], errors
        assert deleted == [True] or (deleted == [] and store.folder_of(session_id).is_dir())
        with contextlib.suppress(SessionNotFoundError):
            store.delete(session_id)
    assert list(store.root.iterdir()) == []


@pytest.mark.slow
def test_an_interrupted_delete_leaves_the_session_whole_or_gone_and_the_store_removes_the_rest(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    disk = SimulatedDisk(root)
    store = LocalSessionStore(root, files=disk)
    outcomes = set()
    for n in range(1, 12):
        with store.create() as session:
            written = [session.append(UserMessage(text=f"m{i}")) for i in range(3)]
        disk.cut_after(n)
        with contextlib.suppress(PowerCut):
            store.delete(session.id)
        disk.power_loss()
        try:
            with store.open(session.id, writable=False) as survivor:
                assert survivor.entries() == written and survivor.report.clean
                outcomes.add("whole")
            store.delete(session.id)
        except SessionNotFoundError:
            outcomes.add("gone")
        assert store.list() == []
        assert not [f for f in root.iterdir() if f.name.startswith(DELETING_PREFIX)]
    assert outcomes == {"whole", "gone"}


# -- 2. a writer checks its files before it acknowledges ------------------------------------------


def test_a_folder_removed_under_a_writer_fails_its_flush_and_critical_appends(store: LocalSessionStore) -> None:
    session_id, _ = _session_with(store)
    session = store.open(session_id)
    session.append(UserMessage(text="before"))
    session.flush()
    shutil.rmtree(store.folder_of(session_id))
    session.append(UserMessage(text="into a removed file"))
    with pytest.raises(SessionIOError, match=r"\.lock: cannot keep the write lock: the lock file was removed"):
        session.flush()
    with pytest.raises(SessionIOError, match="reopen the session"):
        session.append(OutboxRecord(part_id="p", status="queued", kind="note", text="x"))
    session.close()  # lets go without writing: nothing recreated
    assert not store.folder_of(session_id).exists()


def test_a_critical_append_into_a_removed_folder_is_not_acknowledged(store: LocalSessionStore) -> None:
    session_id, _ = _session_with(store)
    with store.open(session_id) as session:
        session.append(UserMessage(text="opens the log"))
        shutil.rmtree(store.folder_of(session_id))
        with pytest.raises(SessionIOError):
            session.append(OutboxRecord(part_id="p", status="queued", kind="note", text="x"))


def test_a_folder_restored_under_a_writer_never_has_two_acknowledged_writers(
    store: LocalSessionStore, tmp_path: Path
) -> None:
    session_id, written = _session_with(store)
    folder = store.folder_of(session_id)
    first = store.open(session_id)
    acked = [first.append(UserMessage(text="acknowledged before the restore"))]
    first.flush()
    written += acked
    backup = tmp_path / "backup"
    shutil.copytree(folder, backup)  # a restore from backup: copy, remove, rename back
    shutil.rmtree(folder)
    backup.rename(folder)
    second = store.open(session_id)  # the restored folder's lock is a new file: the second writer gets in
    mine = second.append(UserMessage(text="by the second writer"))
    second.flush()
    first.append(UserMessage(text="by the first writer after the restore"))
    with pytest.raises(SessionIOError, match="cannot keep the write lock"):
        first.flush()  # the first writer is no writer any more: nothing it writes is acknowledged
    first.close()
    second.close()
    with store.open(session_id, writable=False) as reader:
        assert reader.entries() == [*written, mine]
    assert read_meta(folder).entry_count == len(written) + 1


def test_a_log_replaced_under_a_writer_fails_its_flush(store: LocalSessionStore) -> None:
    session_id, _ = _session_with(store)
    log = store.folder_of(session_id) / LOG_NAME
    with store.open(session_id) as session:
        session.append(UserMessage(text="opens the log"))
        session.flush()
        copy = log.with_name("copy")
        shutil.copyfile(log, copy)
        copy.replace(log)
        session.append(UserMessage(text="into the old file"))
        with pytest.raises(SessionIOError, match=r"log\.jsonl: cannot make the log durable.*removed or replaced"):
            session.flush()


@pytest.mark.parametrize("cut", ["emptied", "cut at a line"])
def test_a_log_cut_under_intact_metadata_is_damage_not_a_fresh_session(store: LocalSessionStore, cut: str) -> None:
    session_id, written = _session_with(store, 6)
    log = store.folder_of(session_id) / LOG_NAME
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"" if cut == "emptied" else b"".join(lines[:2]))
    kept = [] if cut == "emptied" else written[:2]
    with store.open(session_id, writable=False) as reader:
        assert reader.entries() == kept
        assert reader.report.log_cut is not None and not reader.report.clean
        assert "it was cut or emptied" in reader.report.messages()[0]
    with pytest.raises(SessionCorruptError, match=r"log.jsonl: the log is \d+ bytes with \d+ entries.*6 entries"):
        store.open(session_id)
    assert read_meta(store.folder_of(session_id)).entry_count == 6  # the evidence stays


# -- 3. no symbolic links ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", [LOG_NAME, META_NAME, ".lock"])
def test_a_symlinked_session_file_is_refused_and_nothing_outside_is_touched(
    store: LocalSessionStore, tmp_path: Path, name: str
) -> None:
    session_id, _ = _session_with(store)
    folder = store.folder_of(session_id)
    outside = tmp_path / "outside"
    # a log-like file whose last line looks torn: a writer that followed the link would cut it
    original = (folder / name).read_bytes() if (folder / name).exists() else b""
    outside.write_bytes(original + b'{"type":"user","id":"tor')
    (folder / name).unlink(missing_ok=True)
    (folder / name).symlink_to(outside)
    before = outside.read_bytes()
    for writable in (True, False):
        with pytest.raises(SessionCorruptError, match=rf"{name}: is a symbolic link"):
            store.open(session_id, writable=writable)
    (row,) = store.list()
    assert row.problem is not None and name in row.problem
    if name == ".lock":
        with pytest.raises(SessionCorruptError, match=rf"{name}: is a symbolic link"):
            store.delete(session_id)
    else:
        store.delete(session_id)  # removes the link, never what it points at
    assert outside.read_bytes() == before


def test_a_symlinked_session_folder_is_refused_and_left_alone(store: LocalSessionStore, tmp_path: Path) -> None:
    session_id, _ = _session_with(store)
    folder = store.folder_of(session_id)
    outside = tmp_path / "outside-folder"
    folder.rename(outside)
    folder.symlink_to(outside)
    before = {p.name: p.read_bytes() for p in outside.iterdir() if p.is_file()}
    for attempt in (store.open, lambda i: store.open(i, writable=False), store.delete):
        with pytest.raises(SessionCorruptError, match=rf"{session_id}: is a symbolic link"):
            attempt(session_id)
    (row,) = store.list()
    assert row.problem is not None and "the session folder" in row.problem
    assert {p.name: p.read_bytes() for p in outside.iterdir() if p.is_file()} == before


class _FailsAt(OsFiles):
    """A disk that refuses (ENOSPC) the n-th operation from now, and only that one."""

    def __init__(self) -> None:
        self.left: int | None = None

    def _step(self) -> None:
        if self.left is not None:
            self.left -= 1
            if self.left == 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        self._step()
        return super().open(path, flags, mode)

    def write(self, fd: int, data: bytes) -> None:
        self._step()
        super().write(fd, data)

    def fsync(self, fd: int) -> None:
        self._step()
        super().fsync(fd)

    def replace(self, src: Path, dst: Path) -> None:
        self._step()
        super().replace(src, dst)

    def mkdir(self, path: Path) -> None:
        self._step()
        super().mkdir(path)

    def fsync_dir(self, path: Path) -> None:
        self._step()
        super().fsync_dir(path)


def test_a_failed_create_leaves_nothing_behind(tmp_path: Path) -> None:
    disk = _FailsAt()
    root = tmp_path / "store"
    store = LocalSessionStore(root, files=disk)
    failures = 0
    for n in range(1, 40):
        disk.left = n
        try:
            session = store.create()
        except SessionIOError:
            failures += 1
            assert list(root.iterdir()) == [], f"a create failing at operation {n} left files behind"
            continue
        session.close()
        break
    assert failures > 5  # every step of a create was made to fail once


# -- 4. the lock ------------------------------------------------------------------------------------


def _worker(*args: str, stdin: int | None = subprocess.PIPE) -> subprocess.Popen[str]:
    source = Path(lamina.__file__).resolve().parents[1]  # the Lamina under test, in the child too
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(source), str(REPO)])}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.session.jsonl._lock_worker", *args],
        stdin=stdin,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )


@pytest.mark.slow
def test_a_forked_child_that_outlives_the_holder_neither_holds_nor_writes(store: LocalSessionStore) -> None:
    session_id, written = _session_with(store)
    holder = _worker("fork", str(store.root), session_id)
    assert holder.stdin is not None and holder.stdout is not None
    reports = [json.loads(holder.stdout.readline()) for _ in range(2)]
    child = next(r for r in reports if "child" in r)
    try:
        assert holder.wait(timeout=30) == 0  # the holder is dead; its child lives on, blocked on stdin
        assert child["append"].startswith("refused: ") and "fork of the writer" in child["append"]
        with store.open(session_id) as session:  # not locked by the child
            assert session.entries() == written
    finally:
        holder.stdin.close()  # the child reads the same pipe: it exits
        holder.stdout.close()
    with store.open(session_id, writable=False) as reader:
        assert reader.entries() == written


@pytest.mark.slow
def test_the_lock_holder_is_named_in_every_race_across_processes(store: LocalSessionStore) -> None:
    session_id, _ = _session_with(store)
    rounds = "2000" if EXHAUSTIVE else "300"
    racers = [_worker("race", str(store.root), session_id, rounds) for _ in range(2)]
    holders: list[str] = []
    try:
        for racer in racers:
            assert racer.stdout is not None and racer.stdout.readline().strip() == "ready"
        for racer in racers:
            assert racer.stdin is not None
            racer.stdin.write("go\n")
            racer.stdin.flush()
        for racer in racers:
            assert racer.stdout is not None
            holders += json.loads(racer.stdout.readline())
            assert racer.wait(timeout=60) == 0
    finally:
        for racer in racers:
            if racer.poll() is None:
                racer.kill()
                racer.wait()
            for pipe in (racer.stdin, racer.stdout):
                if pipe is not None:
                    pipe.close()
    assert holders, "the racers never met"
    assert all(h.startswith("pid ") and "unknown" not in h for h in holders), sorted(set(holders))


@pytest.mark.slow
def test_a_holder_stopped_before_writing_its_name_is_named_by_the_kernel(store: LocalSessionStore) -> None:
    session_id, _ = _session_with(store)
    fd = os.open(store.folder_of(session_id) / ".lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # taken, and the name never follows (a holder stopped right here)
        with pytest.raises(SessionLockedError, match=rf"by pid {os.getpid()} on "):
            store.open(session_id)
    finally:
        os.close(fd)


def test_a_lock_let_go_while_its_holder_is_looked_up_is_taken_not_reported(store: LocalSessionStore) -> None:
    session_id, written = _session_with(store)
    fd = os.open(store.folder_of(session_id) / ".lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a holder in its release: the name already cleared, the lock not yet
    letting_go = threading.Timer(0.2, lambda: os.close(fd))  # well inside the second writer's wait for a name
    letting_go.start()
    try:
        with store.open(session_id) as session:  # no "holder unknown": the lock is free by then
            assert session.entries() == written
    finally:
        letting_go.join()


@pytest.mark.slow
def test_a_dead_holders_name_is_not_reported_for_a_live_one(store: LocalSessionStore) -> None:
    session_id, _ = _session_with(store)
    path = store.folder_of(session_id) / ".lock"
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.pwrite(fd, f"pid 999999 on {os.uname().nodename} since then".encode(), 0)  # left by a dead holder
        with pytest.raises(SessionLockedError, match=rf"by pid {os.getpid()} on "):
            store.open(session_id)
    finally:
        os.close(fd)


class _MetaFails(OsFiles):
    """A disk that refuses to put a new `meta.json` in place."""

    def replace(self, src: Path, dst: Path) -> None:
        if dst.name == META_NAME:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        super().replace(src, dst)


class _CloseFails(OsFiles):
    """A disk whose every `close` fails once armed, before closing anything (NFS reports write errors at close)."""

    def __init__(self) -> None:
        self.failing = False

    def close(self, fd: int) -> None:
        if self.failing:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        super().close(fd)


def _lock_descriptors(folder: Path) -> int:
    """How many of this process's descriptors are open on the session's lock file."""
    lock = str(folder / ".lock")
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/self/fd/{fd}") == lock
    return count


def test_a_failed_metadata_write_never_keeps_the_lock(store: LocalSessionStore) -> None:
    session_id, written = _session_with(store)
    folder = store.folder_of(session_id)
    (folder / META_NAME).unlink()  # the open rebuilds it, and the disk refuses the new one
    failing = LocalSessionStore(store.root, files=_MetaFails())
    with failing.open(session_id) as session:
        assert session.report.meta_problem is not None
    assert _lock_descriptors(folder) == 0
    with pytest.raises(SessionIOError, match=r"meta\.json: cannot replace the metadata"):
        failing.create()
    disk = _CloseFails()
    session = LocalSessionStore(store.root, files=disk).open(session_id)
    session.append(UserMessage(text="one more"))
    disk.failing = True  # the metadata's temporary file, the log and the lock all fail to close
    with contextlib.suppress(SessionIOError):
        session.close()
    disk.failing = False
    assert _lock_descriptors(folder) == 0
    with store.open(session_id) as again:
        assert again.entries()[: len(written)] == written
