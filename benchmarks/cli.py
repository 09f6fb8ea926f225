"""The command line's start-up beside `python -c pass`, and the core install, each in fresh processes.

`python -c pass`, `lamina --version`, `lamina --help`, `python -c "import lamina"` and `lamina chat`
to its prompt (in a pty: until prompt_toolkit reads a line; scripted model, and the default one with
no request sent) run in turn, round after round. Each gives CPU (children included) and wall time,
min / median / max, `cli_{cpu,wall}_{min,median,max}_ms_start_<subject>`, and its median over the
floor's, `cli_{cpu,wall}_ratio_start_<subject>`. The older names stay (`cli_help_ms`, `cli_help_cpu_ms`,
`cli_version_ms`, `python_startup_ms`, `import_lamina_ms`, `import_lamina_cpu_ms`), and the core
install's: the wheel without extras in a fresh venv (docs/benchmarks.md says what each one is).
"""

from __future__ import annotations

import json
import os
import pty
import resource
import select
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchmarks import Figure, ratio
from benchmarks._core_install import build_wheel, core_venv, uv_available

SCENARIO = "start"
PROMPT_READY = b"\x1b[?2004h"
"""prompt_toolkit turns bracketed paste on when it starts reading a line."""
PROMPT_TIMEOUT = 60.0
DEFAULT_MODEL = "anthropic:claude-sonnet-5"


@dataclass
class Runs:
    """One subject's runs: CPU and wall milliseconds of each."""

    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)


def _environment(folder: Path) -> dict[str, str]:
    """Bytecode on (as after `pip install`), nothing of the user's: store, config, history and workspace are fresh."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "NO_COLOR", "LINES")}
    return {
        **env,
        "COLUMNS": "100",
        "TERM": "xterm",
        "PROMPT_TOOLKIT_NO_CPR": "1",
        "LAMINA_STORE": str(folder / "store"),
        "XDG_STATE_HOME": str(folder / "state"),
        "XDG_CONFIG_HOME": str(folder / "config"),
        "XDG_DATA_HOME": str(folder / "data"),
    }


def _lamina() -> list[str]:
    """The `lamina` console script beside this interpreter, else `python -m lamina.cli`."""
    script = Path(sys.executable).with_name("lamina")
    return [str(script)] if script.exists() else [sys.executable, "-m", "lamina.cli"]


def _timed(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU milliseconds of one process run to its end (its waited-for children included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True, env=env, cwd=cwd)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000


def _cpu_so_far(pid: int) -> float | None:
    """CPU milliseconds a running process (and the children it waited for) used so far; None off Linux."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    ticks = sum(int(fields[n]) for n in (11, 12, 13, 14))  # utime, stime, cutime, cstime
    return ticks * 1000 / os.sysconf("SC_CLK_TCK")


def _to_prompt(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU milliseconds from starting `lamina chat` in a pseudo-terminal to its prompt; then Ctrl-D."""
    leader, follower = pty.openpty()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    child = subprocess.Popen(args, stdin=follower, stdout=follower, stderr=follower, env=env, cwd=cwd)
    os.close(follower)
    seen = b""
    try:
        while PROMPT_READY not in seen:
            ready, _, _ = select.select([leader], [], [], PROMPT_TIMEOUT)
            if not ready:
                raise RuntimeError(f"no prompt after {PROMPT_TIMEOUT:.0f} s; the terminal showed:\n{seen[-2000:]!r}")
            try:
                seen += os.read(leader, 65536)
            except OSError as exc:  # the child ended and closed the terminal
                raise RuntimeError(f"lamina chat ended before its prompt:\n{seen[-2000:]!r}") from exc
        wall = (time.perf_counter() - start) * 1000
        cpu = _cpu_so_far(child.pid)
        os.write(leader, b"\x04")  # Ctrl-D at the prompt: quit
        _drain(leader)
        child.wait(timeout=PROMPT_TIMEOUT)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        os.close(leader)
    if cpu is None:  # off Linux: the whole run, quitting included
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def _drain(leader: int) -> None:
    """Read the terminal until the child closes it (a full pty would block the child's last writes)."""
    while True:
        ready, _, _ = select.select([leader], [], [], PROMPT_TIMEOUT)
        if not ready:
            return
        try:
            if not os.read(leader, 65536):
                return
        except OSError:
            return


def _subjects(folder: Path) -> dict[str, Callable[[], tuple[float, float]]]:
    """Each subject's one run, by target name; `chat` runs the scripted model in an empty workspace."""
    env = _environment(folder)
    workspace = folder / "workspace"
    workspace.mkdir()
    script = folder / "script.json"
    script.write_text(json.dumps({"responses": [{"text": "unused"}]}))
    lamina = _lamina()
    python = sys.executable
    # the default provider, to its prompt: a key so the chat starts, a closed port so nothing could be sent
    offline = {**env, "ANTHROPIC_API_KEY": "unused", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    return {
        "python": lambda: _timed([python, "-c", "pass"], env, workspace),
        "version": lambda: _timed([*lamina, "--version"], env, workspace),
        "help": lambda: _timed([*lamina, "--help"], env, workspace),
        "import": lambda: _timed([python, "-c", "import lamina"], env, workspace),
        "chat": lambda: _to_prompt([*lamina, "chat", "--model", f"scripted:{script}"], env, workspace),
        "chat_anthropic": lambda: _to_prompt([*lamina, "chat", "--model", DEFAULT_MODEL], offline, workspace),
    }


_LABELS = {
    "python": "python -c pass",
    "version": "lamina --version",
    "help": "lamina --help",
    "import": 'python -c "import lamina"',
    "chat": "lamina chat to its prompt",
    "chat_anthropic": "the same with --model anthropic:…",
}
_GOALS = {
    ("cpu", "version"): "goal: under 150 ms",
    ("cpu", "help"): "goal: under 150 ms",
    ("wall", "chat"): "goal: under 1,000 ms on 2 cores",
    ("wall", "chat_anthropic"): "goal: under 1,000 ms on 2 cores",
}


def _start_figures(runs: dict[str, Runs]) -> list[Figure]:
    """min / median / max of each subject's CPU and wall time, and its median over the floor's."""
    figures: list[Figure] = []
    for kind in ("cpu", "wall"):
        values = {target: mine.cpu if kind == "cpu" else mine.wall for target, mine in runs.items()}
        floor_name = f"cli_{kind}_median_ms_{SCENARIO}_python"
        floor = statistics.median(values["python"])
        for stat, pick in (("min", min), ("median", statistics.median), ("max", max)):
            for target, mine in values.items():
                figure = _figure(f"cli_{kind}_{stat}_ms", target, pick(mine), "ms")
                if stat == "median":
                    over = None if target == "python" else ratio(figure.value, floor, floor_name)
                    figure = replace(figure, ratio_vs=over, note=_GOALS.get((kind, target), ""))
                figures.append(figure)
        for target, mine in values.items():
            over_floor = ratio(statistics.median(mine), floor, floor_name).ratio
            figures.append(_figure(f"cli_{kind}_ratio", target, over_floor, "x", note=_LABELS[target]))
    return figures


def _figure(base: str, target: str, value: float, unit: str, *, note: str = "") -> Figure:
    return Figure(f"{base}_{SCENARIO}_{target}", value, unit, note=note, scenario=SCENARIO, target=target)


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
        Figure("core_import_lamina_ms", statistics.median(wall), "ms", note=f"{code} in the core install"),
    ]


def _start(repeats: int, progress: Callable[[str], None]) -> list[Figure]:
    """The subjects, `repeats` rounds after a warm-up round, and the older figures from the same runs."""
    with tempfile.TemporaryDirectory() as folder:
        subjects = _subjects(Path(folder))
        for run_once in subjects.values():  # warm the file cache and write the bytecode
            run_once()
        runs = {target: Runs() for target in subjects}
        progress(f"{', '.join(_LABELS.values())}: {repeats} rounds")
        for _ in range(repeats):
            for target, run_once in subjects.items():
                wall, cpu = run_once()
                runs[target].wall.append(wall)
                runs[target].cpu.append(cpu)
        env = _environment(Path(folder))
        code = "import lamina, lamina.engine, lamina.agent"
        engine = [_timed([sys.executable, "-c", code], env, Path(folder)) for _ in range(repeats)]
    return [
        *_start_figures(runs),
        Figure("cli_help_ms", statistics.median(runs["help"].wall), "ms", note="lamina --help, wall clock"),
        Figure("cli_help_cpu_ms", statistics.median(runs["help"].cpu), "ms", note="CPU time of the same runs"),
        Figure("cli_version_ms", statistics.median(runs["version"].wall), "ms", note="lamina --version, wall clock"),
        Figure("python_startup_ms", statistics.median(runs["python"].wall), "ms", note="python -c pass"),
        Figure("import_lamina_ms", statistics.median([w for w, _ in engine]), "ms", note=code),
        Figure("import_lamina_cpu_ms", statistics.median([c for _, c in engine]), "ms"),
    ]


def run(*, quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    repeats = 5 if quick else 21
    return [*_start(repeats, progress), *_core_install(repeats, progress)]
