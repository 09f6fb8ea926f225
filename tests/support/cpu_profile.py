"""Opt-in pytest plugin: the CPU each test costs, its own and its child processes', and how many it started.

`LAMINA_CPU_PROFILE=report.txt pytest ...` loads it (`tests/conftest.py`). Each test (setup, call and
teardown, so a module fixture counts for the test that first asks for it) is measured by
`getrusage` deltas of the process (`RUSAGE_SELF`) and of its waited-for children (`RUSAGE_CHILDREN`);
the processes started are the forks and spawns of the test's process. Each pytest process (every
xdist worker) appends its rows to `report.txt.<pid>.jsonl`; the process that ends the run merges them
into `report.txt`: the files, then the tests, the costliest first.
"""

from __future__ import annotations

import _posixsubprocess
import json
import os
import resource
import subprocess
from collections import defaultdict
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

_started = [0]


def _counting(function: Callable[..., Any]) -> Callable[..., Any]:
    """`function`, counting each call in `_started` (a fork or spawn of a child process).

    Args:
        function: The fork or spawn to wrap.

    Returns:
        The wrapper.
    """

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _started[0] += 1
        return function(*args, **kwargs)

    return wrapper


def _count_children() -> None:
    """Count every child process: subprocess and multiprocessing (`fork_exec`), forks, ptys and spawns."""
    _posixsubprocess.fork_exec = _counting(_posixsubprocess.fork_exec)
    if subprocess._fork_exec is not None:  # type: ignore[attr-defined]
        subprocess._fork_exec = _counting(subprocess._fork_exec)  # type: ignore[attr-defined]
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            setattr(os, name, _counting(getattr(os, name)))


def _cpu(who: int) -> float:
    """User and system CPU seconds of `who` (`RUSAGE_SELF` or `RUSAGE_CHILDREN`).

    Args:
        who: The `getrusage` target.

    Returns:
        The seconds.
    """
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


class CpuProfile:
    """The plugin: measures each test and writes the rows, then (in the last process) the report."""

    def __init__(self, report: Path) -> None:
        """Count child processes from now on.

        Args:
            report: Where the merged report goes; the rows go beside it.
        """
        self.report = report
        self.rows = report.parent / f"{report.name}.{os.getpid()}.jsonl"
        _count_children()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        """Measure one test's setup, call and teardown.

        Args:
            item: The test.

        Yields:
            To the test's run.
        """
        own, children, started = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN), _started[0]
        yield
        row = {
            "test": item.nodeid,
            "own": _cpu(resource.RUSAGE_SELF) - own,
            "children": _cpu(resource.RUSAGE_CHILDREN) - children,
            "processes": _started[0] - started,
        }
        with self.rows.open("a", encoding="utf-8") as out:
            out.write(json.dumps(row) + "\n")

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """In the process that ends the run (not an xdist worker), merge every process's rows into the report.

        Args:
            session: The run.
        """
        if os.environ.get("PYTEST_XDIST_WORKER"):
            return
        rows: list[dict[str, Any]] = []
        for part in sorted(self.report.parent.glob(f"{self.report.name}.*.jsonl")):
            rows += [json.loads(line) for line in part.read_text(encoding="utf-8").splitlines()]
            part.unlink()
        self.report.write_text(_render(rows), encoding="utf-8")


def _render(rows: list[dict[str, Any]]) -> str:
    """The report: totals, then files and tests by their CPU (own plus children), the costliest first.

    Args:
        rows: One per test.

    Returns:
        The report's text.
    """
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for row in rows:
        sums = files[row["test"].split("::")[0]]
        for index, value in enumerate((row["own"] + row["children"], row["own"], row["children"], row["processes"])):
            sums[index] += value
    cpu = sum(row["own"] + row["children"] for row in rows)
    lines = [f"{len(rows)} tests, {cpu:.1f} s of CPU, {sum(row['processes'] for row in rows)} processes started", ""]
    lines.append(f"{'cpu s':>8} {'own s':>8} {'child s':>8} {'procs':>6}  file")
    for name, (total, own, children, processes) in sorted(files.items(), key=lambda pair: -pair[1][0]):
        lines.append(f"{total:8.2f} {own:8.2f} {children:8.2f} {int(processes):6d}  {name}")
    lines += ["", f"{'cpu s':>8} {'own s':>8} {'child s':>8} {'procs':>6}  test"]
    for row in sorted(rows, key=lambda row: -(row["own"] + row["children"])):
        line = f"{row['own'] + row['children']:8.2f} {row['own']:8.2f} {row['children']:8.2f} {row['processes']:6d}"
        lines.append(f"{line}  {row['test']}")
    return "\n".join(lines) + "\n"
