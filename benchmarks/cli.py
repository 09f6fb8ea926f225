"""The core install and the start-up time of the command line, each in a fresh process.

`cli_help_ms` / `cli_help_cpu_ms`: `python -m lamina.cli --help` (median wall clock, and CPU, which
does not grow when other jobs share the cores); `cli_version_ms`; `python_startup_ms` the floor.
`import_lamina_ms` / `import_lamina_cpu_ms`: `import lamina, lamina.engine, lamina.agent`.
`core_install_distributions` / `core_install_mb`: the wheel without extras in a fresh venv (the
distributions, Lamina among them; site-packages with bytecode); `core_import_lamina_ms` there.
The heavy modules (SDKs, MCP, prompt_toolkit, the engine) load with the commands that need them.
No peer runs: there is no comparable command on the machine to measure side by side.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import Figure
from benchmarks._core_install import build_wheel, core_venv, uv_available


def _median_ms(args: list[str], repeats: int) -> tuple[float, float]:
    """Median wall-clock and median CPU (user + system) milliseconds of a fresh process."""
    wall, cpu = [], []
    # bytecode on, as after `pip install` (which compiles it): PYTHONDONTWRITEBYTECODE would compile Lamina every run
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "COLUMNS": "100"}
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([sys.executable, *args], check=True, capture_output=True, env=env)
        wall.append((time.perf_counter() - start) * 1000)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
    return statistics.median(wall), statistics.median(cpu)


def _core_install(repeats: int, progress: Callable[[str], None]) -> list[Figure]:
    """The size of the core install and the import time there; none when uv is missing."""
    if not uv_available():
        progress("uv is not installed: no core install figures")
        return []
    progress("the core install: the wheel into a fresh venv, no extras")
    with tempfile.TemporaryDirectory() as folder:
        venv = core_venv(Path(folder) / "core", build_wheel(Path(folder) / "wheel"))
        installed = venv.distributions()
        size = venv.megabytes()
        code = "import lamina, lamina.engine, lamina.agent"
        venv.run(str(venv.python), "-c", code, cwd=Path(folder))  # writes the bytecode cache
        wall = []
        for _ in range(repeats):
            start = time.perf_counter()
            done = venv.run(str(venv.python), "-c", code, cwd=Path(folder))
            wall.append((time.perf_counter() - start) * 1000)
            if done.returncode != 0:
                raise RuntimeError(f"import lamina failed in the core install:\n{done.stderr}")
    return [
        Figure(
            "core_install_distributions",
            len(installed),
            "distributions",
            note="goal: at most 15 (" + ", ".join(installed) + ")",
        ),
        Figure("core_install_mb", size, "MB", note="goal: at most 40 MB (site-packages, MiB)"),
        Figure("core_import_lamina_ms", statistics.median(wall), "ms", note="import lamina in the core install"),
    ]


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
        Figure("cli_help_ms", help_ms, "ms", note="goal: under 250 ms"),
        Figure("cli_help_cpu_ms", help_cpu_ms, "ms", note="CPU time: stable when other jobs share the cores"),
        Figure("cli_version_ms", version_ms, "ms"),
        Figure("python_startup_ms", bare_ms, "ms"),
        Figure("import_lamina_ms", import_ms, "ms", note="import lamina, lamina.engine, lamina.agent"),
        Figure("import_lamina_cpu_ms", import_cpu_ms, "ms"),
        *_core_install(repeats, progress),
    ]
