"""Start-up time of the command line: `lamina --help` as a user runs it, in a fresh process.

- `cli_help_ms`: `python -m lamina.cli --help` until the process exits (median of several runs).
  The heavy modules (the provider SDKs, the MCP client, prompt_toolkit, the engine) are imported
  by the commands that need them, not by the help.
- `cli_help_cpu_ms`: the CPU time (user + system) of the same runs; unlike the wall clock it does
  not grow when other jobs share the cores.
- `cli_version_ms`: `python -m lamina.cli --version`.
- `python_startup_ms`: the bare interpreter (`python -c pass`), the floor under both.
- `import_lamina_ms` / `import_lamina_cpu_ms`: `import lamina, lamina.engine, lamina.agent` (what a
  library user's agent loads), wall clock and CPU; the cache simulator, the SDKs and the scripted
  provider are not among them.

No peer runs: there is no comparable command on the machine to measure side by side.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from benchmarks import Figure


def _median_ms(args: list[str], repeats: int) -> tuple[float, float]:
    """Median wall-clock and median CPU (user + system) milliseconds of a fresh process."""
    wall, cpu = [], []
    env = {**os.environ, "COLUMNS": "100"}
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([sys.executable, *args], check=True, capture_output=True, env=env)
        wall.append((time.perf_counter() - start) * 1000)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
    return statistics.median(wall), statistics.median(cpu)


def run(*, quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    repeats = 5 if quick else 21
    _median_ms(["-m", "lamina.cli", "--help"], 1)  # warm the OS file cache and the bytecode cache
    progress(f"lamina --help, {repeats} runs")
    help_ms, help_cpu_ms = _median_ms(["-m", "lamina.cli", "--help"], repeats)
    version_ms, _ = _median_ms(["-m", "lamina.cli", "--version"], repeats)
    bare_ms, _ = _median_ms(["-c", "pass"], repeats)
    progress(f"import lamina, {repeats} runs")
    import_ms, import_cpu_ms = _median_ms(["-c", "import lamina, lamina.engine, lamina.agent"], repeats)
    return [
        Figure("cli_help_ms", help_ms, "ms", note="target: under 500 ms"),
        Figure("cli_help_cpu_ms", help_cpu_ms, "ms", note="CPU time: stable when other jobs share the cores"),
        Figure("cli_version_ms", version_ms, "ms"),
        Figure("python_startup_ms", bare_ms, "ms"),
        Figure("import_lamina_ms", import_ms, "ms", note="import lamina, lamina.engine, lamina.agent"),
        Figure("import_lamina_cpu_ms", import_cpu_ms, "ms"),
    ]
