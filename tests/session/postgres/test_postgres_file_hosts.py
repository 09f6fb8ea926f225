"""Two hosts, one PostgreSQL session, no shared disk: each reads the files the other wrote.

Each host is a process of its own (`tests/session/postgres/_pg_file_host.py`) with a file folder of its
own; the session's lease moves between them turn by turn. A host killed in the middle of storing
a file leaves no entry naming a file the database does not hold whole.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from lamina.session import ToolResult, UserMessage
from lamina.session.postgres import PostgresSessionStore
from tests.session.postgres._pg_file_host import big_text
from tests.support.postgres import fresh_schema, schema_url

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
LEASE = 2.0


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_schema("hosts") as schema:
        yield schema_url(schema)


class Host:
    """A host process and its pipes."""

    def __init__(self, url: str, files: Path, sid: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + str(ROOT)}
        args = [sys.executable, "-m", "tests.session.postgres._pg_file_host", url, str(files), sid, str(LEASE)]
        self.process = subprocess.Popen(
            args, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )

    def ask(self, command: str) -> dict[str, object]:
        stdin, stdout = self._pipes()
        stdin.write(command + "\n")
        stdin.flush()
        line = stdout.readline()
        assert line, f"the host ended ({self.process.wait()})"
        answer: dict[str, object] = json.loads(line)
        return answer

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        assert self.process.stdin is not None and self.process.stdout is not None
        return self.process.stdin, self.process.stdout

    def close(self) -> None:
        stdin, stdout = self._pipes()
        if self.process.poll() is None:
            stdin.write("exit\n")
            stdin.flush()
            self.process.wait(timeout=60)
        stdin.close()
        stdout.close()


def _named_files(store: PostgresSessionStore, sid: str) -> list[str]:
    """Every file the session's log names, each checked whole in the database (size and chunks)."""
    names: list[str] = []
    with store.open(sid, writable=False) as session:
        for entry in session.entries():
            if isinstance(entry, UserMessage):
                names += [f"attachments/{ref.sha256}" for ref in entry.attachments]
                names += ["data/" + ref.text.removeprefix("data/") for ref in entry.attachments if ref.text]
            elif isinstance(entry, ToolResult) and entry.full_output_path:
                name = session.file_name(entry.full_output_path)
                assert name is not None, entry.full_output_path
                names.append(name)
        for name in names:
            info = session.stat_file(name)
            assert info is not None, f"the log names {name}, which the database does not hold"
            with session.open_file(name) as handle:
                assert len(handle.read()) == info.size
    return names


def _wait_for_copy(store: PostgresSessionStore, seconds: float = 30.0) -> bool:
    """Wait until a COPY into `file_chunks` is running (True), or `seconds` pass (False)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with store._conn() as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'COPY file_chunks%%'"
            ).fetchone()
        if row is not None and row[0]:
            return True
        time.sleep(0.002)
    return False


def test_two_hosts_take_turns_and_read_each_others_files(url: str, tmp_path: Path) -> None:
    with PostgresSessionStore(url, files_root=tmp_path / "setup") as store:
        with store.create(cwd=str(tmp_path)) as session:
            sid = session.id
        a = Host(url, tmp_path / "a", sid)
        b = Host(url, tmp_path / "b", sid)
        try:
            wrote: list[object] = []
            for number, host in enumerate([a, b, a, b]):
                answer = host.ask(f"turn {number}")
                assert answer["checked"] == wrote  # everything the turns before wrote, read on this host
                assert isinstance(answer["wrote"], list)
                wrote += answer["wrote"]
        finally:
            a.close()
            b.close()
        assert len(_named_files(store, sid)) == 4 * 3  # an original, its text and a result per turn
        assert not set(os.listdir(tmp_path / "a")) & {"b"}  # nothing shared between the folders


def test_a_host_killed_while_storing_a_file_leaves_no_entry_naming_a_missing_file(url: str, tmp_path: Path) -> None:
    with PostgresSessionStore(url, files_root=tmp_path / "setup") as store:
        with store.create(cwd=str(tmp_path)) as session:
            sid = session.id
        a = Host(url, tmp_path / "a", sid)
        b = Host(url, tmp_path / "b", sid)
        try:
            a.ask("turn 0")
            stdin, stdout = a._pipes()
            stdin.write("big 1\n")
            stdin.flush()
            assert json.loads(stdout.readline()) == {"putting": True}
            mid_copy = _wait_for_copy(store)  # the big file's chunks are going in now
            a.process.send_signal(signal.SIGKILL)
            a.process.wait(timeout=30)
            answer = b.ask("turn 2")  # takes the lease over once it expires
            assert len(answer["checked"]) >= 2  # type: ignore[arg-type]
        finally:
            a.close()
            b.close()
        names = _named_files(store, sid)
        big = hashlib.sha256(big_text("a", 1)).hexdigest()
        assert mid_copy  # killed inside the transaction: neither the file nor an entry naming it is there
        assert len(names) == 6 and f"attachments/{big}" not in names
        with store._conn() as conn:  # no blob is held in part: its chunks add up to its size
            rows = conn.execute(
                "SELECT b.sha256 FROM file_blobs b LEFT JOIN file_chunks c USING (sha256)"
                " GROUP BY b.sha256, b.size HAVING coalesce(sum(length(c.data)), 0) <> b.size"
            ).fetchall()
        assert rows == []
