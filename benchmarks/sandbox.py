"""`python -m benchmarks sandbox`: what the Bash sandbox adds to a command, through the Bash tool.

Figures:

- `bash_true_ms_unconfined` / `bash_true_ms_sandboxed`: the median wall-clock time of a Bash tool
  call running `true`, from the call to its result, without and with bubblewrap (the note gives
  min and max over the runs). Both run in one event loop, alternating, so a busy moment of the
  machine falls on both.
- `sandbox_overhead_ms`: the sandboxed median minus the unconfined one: what each command pays
  for its sandbox (new namespaces, the mounts, the seccomp filter, a process more).
- `sandbox_ratio`: the sandboxed median over the unconfined one.

Where the machine cannot make a sandbox, only the unconfined figure is given and the reason is
printed (as a peer that is not installed is skipped).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import Figure, ratio
from lamina.tools import BashTool, PermissionMode, SandboxSettings, ToolContext


async def _timings(bash: BashTool, ctx: ToolContext, runs: int) -> list[float]:
    samples = []
    call = bash.validate({"command": "true"})
    for _ in range(runs):
        started = time.perf_counter()
        result = await bash.run(call, ctx)
        samples.append((time.perf_counter() - started) * 1000)
        assert result.content.endswith("[exit code 0]"), result.content
    return samples


def _note(samples: list[float]) -> str:
    low, middle, high = min(samples), statistics.median(samples), max(samples)
    return f"min {low:.2f} / median {middle:.2f} / max {high:.2f} ms over {len(samples)} runs"


async def _measure(runs: int, progress: Callable[[str], None]) -> list[Figure]:
    unconfined = BashTool(sandbox=SandboxSettings(enabled=False))
    sandboxed = BashTool()
    problem = sandboxed.sandbox_notice()
    with tempfile.TemporaryDirectory(prefix="lamina-bench-sandbox-") as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        ctx = ToolContext(cwd=root, data_dir=Path(tmp) / "data", mode=PermissionMode.EXECUTE)
        plain: list[float] = []
        confined: list[float] = []
        await _timings(unconfined, ctx, 3)  # warm up: imports, the first fork
        if problem is None:
            await _timings(sandboxed, ctx, 3)
        for done in range(0, runs, 10):
            progress(f"runs {done + 1}..{min(done + 10, runs)} of {runs}")
            batch = min(10, runs - done)
            plain += await _timings(unconfined, ctx, batch)
            if problem is None:
                confined += await _timings(sandboxed, ctx, batch)
    figures = [Figure("bash_true_ms_unconfined", round(statistics.median(plain), 3), "ms", note=_note(plain))]
    if problem is not None:
        print(f"sandbox: no sandbox on this machine, so no sandboxed figures: {problem}", file=sys.stderr)
        return figures
    overhead = statistics.median(confined) - statistics.median(plain)
    return [
        *figures,
        Figure(
            "bash_true_ms_sandboxed",
            round(statistics.median(confined), 3),
            "ms",
            ratio_vs=ratio(statistics.median(confined), statistics.median(plain), "bash_true_ms_unconfined"),
            note=_note(confined),
        ),
        Figure(
            "sandbox_overhead_ms", round(overhead, 3), "ms", note="median sandboxed - median unconfined, per command"
        ),
        Figure("sandbox_ratio", round(statistics.median(confined) / statistics.median(plain), 3), "x"),
    ]


def run(*, quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    return asyncio.run(_measure(30 if quick else 200, progress))
