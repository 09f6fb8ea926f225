"""Invariant 6: a writer SIGKILLed at any instant loses at most the entry being written.

Each trial forks a writer process (with Lamina already imported, so a trial costs milliseconds,
not an interpreter start), lets it append for a random moment and kills it with SIGKILL.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest

from lamina.session import LocalSessionStore, UserMessage
from tests.conftest import EXHAUSTIVE
from tests.session.jsonl._crash_writer import write_forever

KILLS = 1_000 if EXHAUSTIVE else 50

pytestmark = pytest.mark.timeout(6 * 3600 if EXHAUSTIVE else 300)
"""The exhaustive run is long by design; the suite-wide time limit is for the normal run."""


def _start_writer(root: str, session_id: str, seed: int) -> tuple[int, int]:
    """Fork a writer; returns its pid and the read end of its report pipe."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: write until killed, never return into the test runner
        try:
            os.close(read_fd)
            write_forever(root, session_id, seed, lambda text: _write_all(write_fd, text.encode()))
        finally:
            os._exit(1)
    os.close(write_fd)
    return pid, read_fd


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


def _read_all(fd: int) -> str:
    chunks: list[bytes] = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks).decode()


@pytest.mark.slow
def test_crash_at_random_moments_loses_nothing_durable(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path / "store")
    with store.create() as session:
        session_id = session.id
    rng = random.Random(20261129)
    durable: set[str] = set()
    torn_seen = 0
    for round_no in range(KILLS):
        if round_no % 10 == 0 and round_no:  # a fresh session every ten rounds keeps every read small
            with store.create() as session:
                session_id = session.id
            durable.clear()
        pid, fd = _start_writer(str(store.root), session_id, round_no)
        try:
            ready = os.read(fd, 6)
            assert ready == b"ready\n", ready
            time.sleep(rng.uniform(0.0, 0.03))
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            out = ready.decode() + _read_all(fd)
        finally:
            os.close(fd)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
        durable.update(line[2:] for line in out.splitlines() if line.startswith("D "))

        with store.open(session_id, writable=False) as reader:
            ids = {e.id for e in reader.entries()}
            report = reader.report
        missing = durable - ids
        assert not missing, f"round {round_no}: durable entries lost: {sorted(missing)[:5]}"
        assert report.corrupt_lines == [], f"round {round_no}: only the last line may be torn"
        torn_seen += report.torn_tail is not None
    assert durable, "the writer never completed a durable append"
    print(f"SIGKILL trials: {KILLS}, torn tails seen: {torn_seen}, acknowledged entries lost: 0")
    with store.open(session_id) as writer:  # the next append repairs whatever tail is left
        writer.append(UserMessage(text="after the last crash"))
    with store.open(session_id, writable=False) as reader:
        assert reader.report.torn_tail is None and reader.report.corrupt_lines == []
