"""`LocalSessionStore.in_use`: whether a writer holds a session now, seen without taking its lock."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lamina.session import LocalSessionStore

HOLD = """
import sys
from lamina.session import LocalSessionStore
session = LocalSessionStore(sys.argv[1]).open(sys.argv[2])
print("held", flush=True)
sys.stdin.read()
session.close()
"""


def test_a_session_is_in_use_while_a_writer_holds_it(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    session = store.create(cwd="/w")
    assert store.in_use(session.id)
    session.close()
    assert not store.in_use(session.id)
    with store.open(session.id, writable=False):  # a reader takes no lock
        assert not store.in_use(session.id)


@pytest.mark.slow
def test_a_writer_in_another_process_is_seen_and_never_disturbed(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    with store.create(cwd="/w") as session:
        session_id = session.id
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path), session_id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        for _ in range(200):  # looking never takes the lock: the holder keeps it throughout
            assert store.in_use(session_id)
    finally:
        holder.communicate("", timeout=30)
    assert not store.in_use(session_id)
    store.open(session_id).close()  # free again
