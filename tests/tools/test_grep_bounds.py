"""Bounded Grep: the time limit holds inside one file's line, and a cancelled Grep stops using the CPU.

The issue's case: `^(a+)+$` on one 30-character line ran 66 s (doubling with each character) while
the 30 s limit was checked only between files, and a cancelled call went on in its thread. The search
now runs in a worker process that the deadline or the cancellation kills.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from lamina.tools import GrepTool
from tests.tools.conftest import Session

CATASTROPHIC = "^(a+)+$"
LINE = "a" * 30 + "!\n"  # backtracks for minutes: every way to split 30 a's is tried before giving up


def _workers() -> list[int]:
    """This process's Grep worker processes still alive (not zombies), from /proc."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path("/proc", entry, "status").read_text()
            command = Path("/proc", entry, "cmdline").read_bytes()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        alive = not fields.get("State", "").startswith(("Z", "X"))
        if fields.get("PPid", "").strip() == str(os.getpid()) and b"_grep_worker.py" in command and alive:
            found.append(int(entry))
    return found


async def _until(condition: object, what: str) -> None:
    """Wait until `condition()` holds (a liveness wait, up to a minute on a busy machine, not a timing assertion)."""
    for _ in range(600):
        if condition():  # type: ignore[operator]
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"never happened: {what}")


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_a_catastrophic_pattern_on_one_line_stops_at_the_time_limit(session: Session) -> None:
    session.put("one-line.txt", LINE)  # one file: a limit checked between files is never checked
    grep = session.with_tools([GrepTool(time_limit=1.0)])
    result = await grep.call("Grep", pattern=CATASTROPHIC, output_mode="content")
    assert not result.is_error
    assert "the search stopped after 1 s; results are incomplete" in result.content


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds the worker in /proc")
async def test_a_cancelled_grep_leaves_no_worker_and_burns_no_cpu(session: Session) -> None:
    session.put("one-line.txt", LINE)
    grep = session.with_tools([GrepTool(time_limit=3600.0)])
    task = asyncio.create_task(grep.call("Grep", pattern=CATASTROPHIC))
    await _until(lambda: _workers(), "a worker process started")
    (worker,) = _workers()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await _until(lambda: not os.path.exists(f"/proc/{worker}"), "the worker was killed and reaped")
    before = time.process_time()
    await asyncio.sleep(1.0)
    assert time.process_time() - before < 0.5  # no thread of ours goes on searching either


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds the worker in /proc")
async def test_a_finished_grep_leaves_no_worker(session: Session) -> None:
    session.put("a.txt", "needle\n")
    result = await session.call("Grep", pattern="needle")
    assert result.content == "a.txt"
    assert _workers() == []


async def test_without_an_interpreter_to_start_grep_searches_in_its_own_thread(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An embedded host with no Python executable: the search still runs, limit checked between files."""
    monkeypatch.setattr("sys.executable", "")
    session.put("a.txt", "needle\n")
    session.put("b.txt", "hay\n")
    result = await session.call("Grep", pattern="needle", output_mode="content")
    assert result.content == "a.txt:1:needle"
