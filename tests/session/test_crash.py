"""Invariant 6: a writer SIGKILLed at any instant loses at most the entry being written."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from lamina.session.store import LocalSessionStore
from tests.conftest import EXHAUSTIVE

KILLS = 1_000 if EXHAUSTIVE else 50
WRITER = Path(__file__).with_name("_crash_writer.py")
REPO = Path(__file__).parents[2]


def test_crash_at_random_moments_loses_nothing_durable(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path / "store")
    with store.create() as session:
        session_id = session.id
    rng = random.Random(20261129)
    durable: set[str] = set()
    torn_seen = 0
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO}"}
    for round_no in range(KILLS):
        proc = subprocess.Popen(
            [sys.executable, str(WRITER), str(store.root), session_id, str(round_no)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n", proc.stderr.read() if proc.stderr else ""
        time.sleep(rng.uniform(0.0, 0.03))
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate()
        assert proc.returncode == -signal.SIGKILL, err
        durable.update(line[2:] for line in out.splitlines() if line.startswith("D "))

        with store.open(session_id, writable=False) as reader:
            ids = {e.id for e in reader.entries()}
            report = reader.report
        missing = durable - ids
        assert not missing, f"round {round_no}: durable entries lost: {sorted(missing)[:5]}"
        assert report.corrupt_lines == [], f"round {round_no}: only the last line may be torn"
        torn_seen += report.torn_tail is not None
    assert durable, "the writer never completed a durable append"
    from lamina.session.entries import UserMessage

    with store.open(session_id) as writer:  # the next append repairs whatever tail is left
        writer.append(UserMessage(text="after the last crash"))
    with store.open(session_id, writable=False) as reader:
        assert reader.report.torn_tail is None and reader.report.corrupt_lines == []
