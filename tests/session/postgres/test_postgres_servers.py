"""Eight agent servers share 200 sessions in one database while some are SIGKILLed mid-turn (and one stalls).

Afterwards: no session ever had two writers (each log is one chain, its lease tokens never go back),
no acknowledged entry is lost, no one-shot is delivered twice and no plan is dispatched twice.

Plan dispatch is exercised through its primitive: a plan-state transition (ready → dispatched) is a
critical entry, committed at once and only under the writer's lease, so a server that decided to
dispatch from a stale view is fenced off. `LAMINA_EXHAUSTIVE=1` runs many more turns and kills.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lamina.session import OutboxRecord, PlanState, TurnRecord, UserMessage
from lamina.session._entries import decode_entry
from lamina.session.postgres import PostgresSessionStore
from tests.conftest import EXHAUSTIVE
from tests.session.postgres._pg_server import server_name
from tests.support.postgres import URL, fresh_schema, schema_url

SERVERS = 8
SESSIONS = 200
TURNS = 150 if EXHAUSTIVE else 12
"""Turns per server (on average) acknowledged before the servers are told to stop."""
KILLS = 40 if EXHAUSTIVE else 4
LEASE = 1.0
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema("servers") as name:
        yield name


def _spawn(url: str, files: Path, acks: Path, seed: int, stop: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    args = [sys.executable, "-m", "tests.session.postgres._pg_server", url, str(files), str(acks), str(seed), str(stop)]
    with open(acks.with_suffix(".err"), "wb") as errors:
        return subprocess.Popen([*args, str(LEASE)], cwd=ROOT, env=env, stderr=errors)


def _stall_between_transactions(server: subprocess.Popen[bytes], seed: int, schema: str, rng: random.Random) -> None:
    """SIGSTOP `server` at a moment none of its connections is inside a statement or a transaction.

    A stall models a server that stops answering between turns (a long pause, a lost network). A
    server stopped inside a transaction (holding its session's row lock, which the takeover then
    ends) is `test_postgres_stalls.py`'s case.
    """
    for _ in range(500):
        server.send_signal(signal.SIGSTOP)
        time.sleep(0.05)  # the server's last message reaches PostgreSQL
        with psycopg.connect(URL, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND state <> 'idle'",
                (server_name(seed, schema),),
            ).fetchone()
        if row is not None and row[0] == 0:
            return
        server.send_signal(signal.SIGCONT)
        time.sleep(rng.uniform(0.01, 0.1))
    raise AssertionError(f"server {seed} never paused between transactions")


def _take_over(url: str, files: Path, pid: int) -> list[str]:
    """Wait for the leases of a stopped server to expire, then write one entry to each of its sessions."""
    time.sleep(LEASE * 1.5)
    taken: list[str] = []
    with PostgresSessionStore(url, files_root=files, lease_seconds=LEASE) as store:
        with psycopg.connect(URL) as conn:
            held = conn.execute(
                f'SELECT id FROM "{store.schema}".sessions WHERE lease_owner LIKE %s', (f"% pid {pid} %",)
            ).fetchall()
        for (sid,) in held:
            with store.open(sid, wait=LEASE * 2) as session:
                session.append(UserMessage(text="taken over from a stalled server"))
            taken.append(sid)
    return taken


def _acks(folder: Path) -> list[dict[str, Any]]:
    """The servers' acknowledgement lines, as JSON."""
    lines: list[dict[str, Any]] = []
    for file in folder.glob("*.jsonl"):
        for line in file.read_text().splitlines():
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:  # the last line of a killed server may be cut: it acknowledged nothing
                continue
    return lines


@pytest.mark.slow
def test_many_servers_one_truth(schema: str, tmp_path: Path) -> None:
    url = schema_url(schema)
    files, acks = tmp_path / "files", tmp_path / "acks"
    acks.mkdir()
    with PostgresSessionStore(url, files_root=files) as store:
        for _ in range(SESSIONS):
            store.create(cwd="/srv").close()
    rng = random.Random(18)
    stop = tmp_path / "stop"
    servers = {n: _spawn(url, files, acks / f"{n}.jsonl", n, stop) for n in range(SERVERS)}
    deadline = time.monotonic() + (1800 if EXHAUSTIVE else 300)

    def serving() -> list[int]:
        """Servers alive and past their first turn (a kill then lands among turns, not in start-up)."""
        ready = [n for n, p in servers.items() if p.poll() is None and (acks / f"{n}.jsonl").exists()]
        return [n for n in ready if (acks / f"{n}.jsonl").stat().st_size]

    while len(serving()) < SERVERS // 2:
        assert time.monotonic() < deadline, "the servers did not start"
        time.sleep(0.1)
    # one server stalls past its leases' expiry, its sessions are taken over, then it wakes up
    stalled = rng.choice(serving())
    _stall_between_transactions(servers[stalled], stalled, schema, rng)
    taken_over = _take_over(url, files, servers[stalled].pid)
    servers[stalled].send_signal(signal.SIGCONT)
    next_seed = SERVERS
    for _ in range(KILLS):  # SIGKILL a server in the middle of its turns, start another in its place
        time.sleep(rng.uniform(0.1, 0.4))
        while not serving():
            assert time.monotonic() < deadline, "no server is serving"
            time.sleep(0.05)
        victim = rng.choice(serving())
        servers[victim].send_signal(signal.SIGKILL)
        servers[victim].wait()
        servers[next_seed] = _spawn(url, files, acks / f"{next_seed}.jsonl", next_seed, stop)
        next_seed += 1
    while sum("ack" in line for line in _acks(acks)) < SERVERS * TURNS:
        assert time.monotonic() < deadline, "the servers did not serve enough turns"
        time.sleep(0.2)
    stop.touch()
    for p in servers.values():
        p.wait(timeout=max(deadline - time.monotonic(), 10))
    kills = KILLS
    for n, p in servers.items():
        stderr = (acks / f"{n}.err").read_text()
        assert p.returncode in (0, -signal.SIGKILL), f"server {n} failed:\n{stderr}"

    with psycopg.connect(URL) as conn:
        rows = conn.execute(
            f'SELECT session_id, seq, id, parent_id, lease_token, payload::text FROM "{schema}".entries'
            " ORDER BY session_id, seq"
        ).fetchall()
    by_session: dict[str, list[tuple[int, str, str | None, int, str]]] = {}
    for sid, seq, eid, parent, token, payload in rows:
        by_session.setdefault(sid, []).append((seq, eid, parent, token, payload))

    committed: set[tuple[str, str]] = set()
    for sid, log in by_session.items():
        assert [r[0] for r in log] == list(range(1, len(log) + 1)), f"{sid}: a gap in the sequence"
        tokens = [r[3] for r in log]
        assert tokens == sorted(tokens), f"{sid}: an older writer wrote after a newer one"
        parents = [r[2] for r in log]
        assert parents == [None, *(r[1] for r in log[:-1])], f"{sid}: two writers built on the same leaf"
        entries = [decode_entry(r[4].encode()) for r in log]
        delivered = Counter(e.part_id for e in entries if isinstance(e, OutboxRecord) and e.status == "delivered")
        assert all(n == 1 for n in delivered.values()), f"{sid}: a one-shot delivered twice"
        carried = Counter(p.part_id for e in entries if isinstance(e, TurnRecord) for p in e.one_shots)
        assert all(n == 1 for n in carried.values()), f"{sid}: a one-shot sent in two turns"
        dispatched = [e for e in entries if isinstance(e, PlanState) and e.state == "dispatched"]
        assert len(dispatched) <= 1, f"{sid}: a plan dispatched twice"
        committed.update((sid, r[1]) for r in log)

    lines = _acks(acks)
    acked = {(str(line["ack"][0]), str(i)) for line in lines if "ack" in line for i in line["ack"][1]}
    assert acked, "no turn completed"
    assert acked <= committed, f"{len(acked - committed)} acknowledged entries lost"
    dispatches = Counter(tuple(line["dispatch"]) for line in lines if "dispatch" in line)
    assert all(n == 1 for n in dispatches.values()), "a plan dispatch acknowledged twice"
    fenced = sum("fenced" in line for line in lines)
    print(f"{len(acked)} acknowledged entries, {kills} kills, {len(taken_over)} sessions taken over, {fenced} fenced")
