"""`make run`'s command (`lamina demo`) runs end to end and prints its key lines intact."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import lamina


@pytest.mark.slow
def test_demo_runs_and_prints_its_key_lines(tmp_path: Path) -> None:
    src = str(Path(lamina.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": src, "COLUMNS": "200", "NO_COLOR": "1", "LAMINA_STORE": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "lamina.cli", "demo"], capture_output=True, text=True, env=env, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout
    # `lamina context` output is reprinted as text: the `[skill:name]` example survives (it was eaten)
    assert "a [skill:name] mention" in lines
    assert "→ Edit {'path': 'app.py', 'old_string': 'sum(xs) + 1', 'new_string': 'sum(xs)'}" in lines
    assert "✓ Bash: ok" in lines
    # plan mode, a submitted plan, Accept & Compact: compacted first, then the plan runs in execute mode
    assert "→ SubmitPlan" in lines and "◆ plan 'Fix total()' submitted for your decision" in lines
    steps = ["accepted (Accept & Compact)", "compaction complete", "dispatched: carrying it out", "'Fix total()' done"]
    assert all(step in lines for step in steps)
    assert [lines.index(step) for step in steps] == sorted(lines.index(step) for step in steps)
    assert lines.index("compaction complete") < lines.index("→ Edit")  # never before its compaction
    # the compaction keeps the user's own words verbatim, and pins no sentence as a rule
    assert "turn 1: total() returns the wrong number. Can you find out why? Don't change anything yet." in lines
    assert "pinned verbatim" not in lines
    assert "comes back: Is there anything worrying in build.log?" in lines  # the draft kept with the plan
    assert "app.py now: 'def total(xs):\\n    return sum(xs)'" in lines
    assert "loaded" in lines and "mode execute" in lines
    assert "\x1b" not in lines
    # it ends by saying how to open the session it wrote in `lamina serve` (the store is $LAMINA_STORE here)
    hint = lines[lines.index("lamina serve") :]
    assert f"--store {tmp_path} serve --session " in hint
    session_id = hint.split("serve --session ", 1)[1].split()[0]
    assert (tmp_path / session_id / "log.jsonl").is_file()
