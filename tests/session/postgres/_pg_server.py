"""One agent server of the multi-server test: serves turns of randomly picked sessions until done.

Run as `python -m tests.session.postgres._pg_server URL FILES ACKS SEED STOP LEASE`: it serves turns until the
file STOP exists. Every line written to
ACKS (line-buffered, so a SIGKILL loses none that was written) is one JSON object:
`{"ack": [session, [ids]]}` once entries are committed, `{"dispatch": [session, plan]}` once a plan's
dispatch is committed, `{"fenced": session}` when the lease was found taken over.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

from lamina.engine import ContextEngine
from lamina.errors import SessionLeaseLostError, SessionLockedError, StoreConnectionError
from lamina.session import AssistantMessage, LogEntry, PlanState
from lamina.session.postgres import PostgresSessionStore

PLAN = "plan-1"


def _plan_state(entries: list[LogEntry]) -> str | None:
    states = [e.state for e in entries if isinstance(e, PlanState) and e.plan_id == PLAN]
    return states[-1] if states else None


def server_name(seed: int, schema: str) -> str:
    """The PostgreSQL application name of server `seed`'s connections (the schema keeps it the test's own)."""
    return f"lamina-test-server-{seed}-{schema}"


def serve(url: str, files: str, acks: str, seed: int, stop: str, lease: float) -> None:
    rng = random.Random(seed)
    out = open(acks, "a", buffering=1)  # noqa: SIM115 - open for the life of the process
    store = PostgresSessionStore(url, files_root=files, lease_seconds=lease)
    store.application_name = server_name(seed, store.schema)  # the test finds this server's connections by it
    ids = [row.id for row in store.list()]
    while not os.path.exists(stop):
        sid = rng.choice(ids)
        try:
            session = store.open(sid)
        except (SessionLockedError, StoreConnectionError):  # held elsewhere, or the database is slow to answer
            time.sleep(0.005)
            continue
        try:
            engine = ContextEngine(session, stable_source=lambda: ())
            start = session.leaf_id
            turn = engine.prepare_turn(f"a request to {sid}")
            time.sleep(rng.uniform(0, 0.02))  # the model thinks: a kill lands mid-turn
            engine.record(AssistantMessage(text="an answer"))
            engine.commit(turn)  # one-shots delivered: committed at once
            if turn.one_shots:
                out.write(json.dumps({"ack": [sid, [session.leaf_id]]}) + "\n")
            if rng.random() < 0.4:
                engine.queue_one_shot("note", f"a note for the next turn of {sid}")
            state = _plan_state(session.entries_loaded())
            if state is None:
                engine.record(PlanState(plan_id=PLAN, state="compacted", plan_path="plans/p.md"))
            elif state == "compacted":
                engine.record(PlanState(plan_id=PLAN, state="dispatched", plan_path="plans/p.md"))
                out.write(json.dumps({"dispatch": [sid, PLAN]}) + "\n")
            time.sleep(rng.uniform(0, 0.02))
            engine.end_turn()
            path = [e.id for e in session.path()]
            new = path[path.index(start) + 1 :] if start is not None else path
            out.write(json.dumps({"ack": [sid, new]}) + "\n")
        except SessionLeaseLostError:
            out.write(json.dumps({"fenced": sid}) + "\n")
        except StoreConnectionError:
            pass
        finally:
            try:
                session.close()
            except SessionLeaseLostError:  # taken over after the turn's last commit: nothing was written
                out.write(json.dumps({"fenced": sid}) + "\n")
            except StoreConnectionError:
                pass
    store.close()


if __name__ == "__main__":
    url, files, acks, seed, stop, lease = sys.argv[1:7]
    serve(url, files, acks, int(seed), stop, float(lease))
