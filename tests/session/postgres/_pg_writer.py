"""A writer process for the stall tests and benchmark: big turns, one acknowledgement line per flush.

Run as `python -m tests.session.postgres._pg_writer URL FILES ACKS LEASE QUERY_TIMEOUT APP_NAME`. It creates
a session and writes `{"session": id}` to ACKS (line-buffered), then serves turns of 40 entries of
about 8 KB each (so most of its time is spent inside a turn's transaction) and writes
`{"ack": [ids]}` after each flush returns. A `StoreConnectionError` is written as `{"error": ...}`
and the turn retried; a `SessionLeaseLostError` as `{"fenced": ...}`, and the process exits.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psycopg

from lamina.errors import SessionLeaseLostError, StoreConnectionError
from lamina.session import UserMessage
from lamina.session.postgres import PostgresSessionStore

ENTRIES_PER_TURN = 40
TEXT = "x" * 8_000


def write(url: str, files: str, acks: str, lease: float, query_timeout: float, app_name: str) -> None:
    out = open(acks, "a", buffering=1)  # noqa: SIM115 - open for the life of the process
    store = PostgresSessionStore(url, files_root=files, lease_seconds=lease, query_timeout=query_timeout)
    store.application_name = app_name  # the test finds this writer's connections by it
    session = store.create()
    out.write(json.dumps({"session": session.id}) + "\n")
    turn = 0
    while True:
        turn += 1
        ids = [session.append(UserMessage(text=f"turn {turn} entry {i} {TEXT}")).id for i in range(ENTRIES_PER_TURN)]
        while True:
            try:
                session.flush()
            except StoreConnectionError as exc:
                out.write(json.dumps({"error": str(exc)}) + "\n")
                continue
            except SessionLeaseLostError as exc:
                out.write(json.dumps({"fenced": str(exc)}) + "\n")
                store.close()
                return
            break
        out.write(json.dumps({"ack": ids}) + "\n")


def spawn(
    url: str, files: Path, acks: Path, lease: float, query_timeout: float, app_name: str
) -> subprocess.Popen[bytes]:
    """Start a writer process running the `lamina` this process imports; its stderr goes to ACKS.err."""
    import lamina

    root = Path(__file__).resolve().parents[3]
    code = Path(lamina.__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code), str(root)])}
    args = [sys.executable, "-m", "tests.session.postgres._pg_writer", url, str(files), str(acks), str(lease)]
    with open(acks.with_suffix(".err"), "wb") as errors:
        return subprocess.Popen([*args, str(query_timeout), app_name], cwd=root, env=env, stderr=errors)


def lines(acks: Path) -> list[dict[str, object]]:
    """The writer's lines so far (a line still being written is left out)."""
    out = []
    for line in (acks.read_text() if acks.exists() else "").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def open_transactions(admin_url: str, app_name: str) -> int:
    """Backends of application `app_name` inside a transaction that has written (holding its row locks)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND backend_xid IS NOT NULL",
            (app_name,),
        ).fetchone()
    return int(row[0]) if row is not None else 0


def stop_inside_transaction(writer: subprocess.Popen[bytes], admin_url: str, app_name: str, seed: int) -> None:
    """SIGSTOP `writer` at a moment one of its connections is inside a transaction that holds row locks."""
    rng = random.Random(seed)
    for _ in range(500):
        writer.send_signal(signal.SIGSTOP)
        if open_transactions(admin_url, app_name) and open_transactions(admin_url, app_name):  # not a commit in flight
            return
        writer.send_signal(signal.SIGCONT)
        threading.Event().wait(rng.uniform(0.001, 0.02))
    raise AssertionError(f"writer {app_name} was never stopped inside a transaction")


if __name__ == "__main__":
    url, files, acks, lease, query_timeout, app_name = sys.argv[1:7]
    write(url, files, acks, float(lease), float(query_timeout), app_name)
