"""Processes for the lock tests: a holder that forks and dies, and a writer racing another for a session.

Run as `python -m tests.session.jsonl._lock_worker MODE ROOT SESSION_ID [ROUNDS]`; it reports on stdout.
"""

from __future__ import annotations

import json
import os
import sys

from lamina.errors import LaminaError, SessionLockedError
from lamina.session import LocalSessionStore, UserMessage


def _say(report: dict[str, object]) -> None:
    """One line in one write: the parent and its child share the pipe."""
    os.write(sys.stdout.fileno(), (json.dumps(report) + "\n").encode())


def fork_and_die(root: str, session_id: str) -> None:
    """Open the session, fork a child that outlives this process, and die holding the session.

    The child says whether it could append, then waits until its stdin closes.
    """
    session = LocalSessionStore(root).open(session_id)
    pid = os.fork()
    if pid == 0:
        try:
            session.append(UserMessage(text="written by a forked child"), durable=True)
            outcome = "appended"
        except LaminaError as exc:
            outcome = f"refused: {exc}"
        _say({"child": os.getpid(), "append": outcome})
        sys.stdin.read()
        os._exit(0)
    _say({"parent": os.getpid(), "child_pid": pid})
    os._exit(0)  # dies holding the session: no close, no release


def race_opens(root: str, session_id: str, rounds: int) -> None:
    """Open and close the session `rounds` times, once the test says go; print every holder named."""
    store = LocalSessionStore(root)
    print("ready", flush=True)
    sys.stdin.readline()
    holders: list[str] = []
    for _ in range(rounds):
        try:
            store.open(session_id).close()
        except SessionLockedError as exc:
            holders.append(exc.holder)
    print(json.dumps(holders), flush=True)


if __name__ == "__main__":
    mode, store_root, session = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "fork":
        fork_and_die(store_root, session)
    else:
        race_opens(store_root, session, int(sys.argv[4]))
