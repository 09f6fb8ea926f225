"""A writer process for the stall tests and benchmark: big turns, one acknowledgement line per flush.

Run as `python -m tests.session._pg_writer URL FILES ACKS LEASE QUERY_TIMEOUT APP_NAME`. It creates
a session and writes `{"session": id}` to ACKS (line-buffered), then serves turns of 40 entries of
about 8 KB each (so most of its time is spent inside a turn's transaction) and writes
`{"ack": [ids]}` after each flush returns. A `StoreConnectionError` is written as `{"error": ...}`
and the turn retried; a `SessionLeaseLostError` as `{"fenced": ...}`, and the process exits.
"""

from __future__ import annotations

import json
import sys

from lamina.errors import SessionLeaseLostError, StoreConnectionError
from lamina.session._entries import UserMessage
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


if __name__ == "__main__":
    url, files, acks, lease, query_timeout, app_name = sys.argv[1:7]
    write(url, files, acks, float(lease), float(query_timeout), app_name)
