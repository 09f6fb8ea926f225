"""`make run`'s command (`lamina demo`) runs end to end and prints its key lines intact.

In a terminal (a pty) its colours are real SGR sequences and its lines fit the width; piped, it
has no escape sequences, wraps at 100 columns and never splits a word; it says where it keeps
the session.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest
from rich.cells import cell_len

import lamina

SRC = str(Path(lamina.__file__).parents[1])
CSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
"""A control sequence as a terminal reads it (colours, cursor moves)."""
SGR = re.compile(r"\x1b\[[0-9;]*m")
"""A colour or style sequence."""


@pytest.mark.slow
def test_demo_runs_and_prints_its_key_lines(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "200", "NO_COLOR": "1", "LAMINA_STORE": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "lamina.cli", "demo"], capture_output=True, text=True, env=env, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout
    # `lamina context` output is reprinted as text: the `[skill:name]` example survives (it was eaten)
    assert "a [skill:name] mention" in lines
    # tool calls as `lamina chat` shows them (one view): the call, its result folded, a saved result's file
    assert "   → Edit app.py\n   ✓ Edit: Edited app.py: replaced 1 occurrence." in lines
    assert "   ✓ Bash: ok\n     [exit code 0]" in lines
    assert re.search(r"     … \+\d+ lines\n", lines) and "/output" not in lines  # no such command in the demo
    saved = re.search(r"\(full output: (\S+/data/tool-results/toolu_\w+\.txt)\)", lines)  # openable as printed
    assert saved is not None and Path(saved.group(1)).is_file() and saved.group(1).startswith(str(tmp_path))
    assert "10:66:" not in lines and "11:06:39 INFO step 3999" in lines  # a plausible sample log
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


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary folder with a short path: the demo's paths must fit a line, whatever pytest's base is."""
    folder = Path(tempfile.mkdtemp(prefix="ld-", dir="/tmp" if Path("/tmp").is_dir() else None))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": SRC, "TMPDIR": str(tmp_path), **extra}
    for name in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES", "LAMINA_STORE", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        if name not in extra:
            env.pop(name, None)
    return env


def _piped(tmp_path: Path, *args: str, **extra: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "lamina.cli", "demo", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=_env(tmp_path, **extra),
        cwd=tmp_path,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _tokens(text: str) -> set[str]:
    # ids, times and temporary folders differ between runs; rules and the command's continuation depend on the width
    return {
        t
        for t in text.split()
        if not any(c.isdigit() for c in t)
        and t != "\\"
        and not t.startswith("─")
        and not any(root in t for root in ("/tmp/", tempfile.gettempdir()))
    }


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
@pytest.mark.parametrize("columns", [80, 132])
def test_demo_in_a_terminal_prints_real_colours_at_its_width(short_tmp: Path, columns: int) -> None:
    tmp_path = short_tmp
    child = pexpect.spawn(
        sys.executable,
        ["-m", "lamina.cli", "demo"],
        env=_env(tmp_path, TERM="xterm-256color", LAMINA_STORE=str(tmp_path / "store")),
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=120,
        dimensions=(40, columns),
    )
    child.expect(pexpect.EOF)
    raw = child.before
    child.close()
    assert child.exitstatus == 0, raw
    sequences = CSI.findall(raw)
    assert any(SGR.fullmatch(s) for s in sequences)  # its own colours, sent to the terminal
    visible = CSI.sub("", raw).replace("\r", "")
    # nothing else reaches the screen as escape text: no ESC left, no "␛[", no "[1m" printed as words
    assert "\x1b" not in visible and "␛" not in visible
    assert not re.search(r"\[[0-9;]*m", visible), re.search(r".*\[[0-9;]*m.*", visible)
    assert "Context for " in visible and "Per turn" in visible and "The session is kept in your store" in visible
    lines = visible.split("\n")
    too_wide = [line for line in lines if cell_len(line.rstrip()) > columns]
    assert too_wide == []  # every line fits: the terminal never wraps one inside a word
    assert "history.user." in visible  # the parts table fits, a long part id cut at its end if need be


@pytest.fixture(scope="module")
def piped_demo() -> Iterator[tuple[str, Path]]:
    """One `lamina demo` piped, with no terminal, no COLUMNS and no LAMINA_STORE: its output and its TMPDIR."""
    folder = Path(tempfile.mkdtemp(prefix="ld-", dir="/tmp" if Path("/tmp").is_dir() else None))
    yield _piped(folder), folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.xdist_group("demo-piped")  # one worker, one run of the fixture
def test_demo_piped_has_no_escapes_a_sensible_width_and_no_split_word(
    short_tmp: Path, piped_demo: tuple[str, Path]
) -> None:
    piped = piped_demo[0]  # no terminal, no COLUMNS: 100 columns
    wide = _piped(short_tmp, COLUMNS="1000")  # nothing wrapped: every word whole
    assert "\x1b" not in piped and "␛" not in piped
    lines = piped.splitlines()
    # at most 100 columns, but for a word longer than that (a temporary path), left whole on its own line
    too_wide = [line for line in lines if cell_len(line) > 100 and len(line.removesuffix(" \\").split()) > 1]
    assert too_wide == []
    assert max(cell_len(line) for line in wide.splitlines()) > 100  # the narrow run did wrap
    whole = _tokens(wide)
    assert _tokens(piped) <= whole, sorted(_tokens(piped) - whole)  # no fragment of a word
    for above, below in itertools.pairwise(lines):
        if above.strip() and below.strip():
            joined = above.split()[-1] + below.split()[0]
            assert joined not in whole or joined in _tokens(piped), (above, below)


@pytest.mark.slow
@pytest.mark.xdist_group("demo-piped")
def test_demo_keeps_its_session_in_a_temporary_store_it_names(piped_demo: tuple[str, Path]) -> None:
    piped, tmp_path = piped_demo
    out = " ".join(piped.replace(" \\\n", " ").split())  # wrapped lines and the continued command joined
    assert "The session was in a temporary store, removed now." in out, out[-1500:]
    assert "run the demo with --keep" in out and "serve --session" not in out  # the command only when kept
    assert list(tmp_path.iterdir()) == []  # the sample workspace and the store are removed


@pytest.mark.slow
def test_demo_keep_keeps_its_temporary_store_and_names_it(short_tmp: Path) -> None:
    out = " ".join(_piped(short_tmp, "--keep").replace(" \\\n", " ").split())
    kept = re.search(r"The session is kept in (\S+), a temporary folder \(delete it when done: rm -r (\S+)\)\.", out)
    assert kept is not None, out[-1500:]
    store = Path(kept.group(1))
    assert store.parent == short_tmp and kept.group(2) == str(store)
    command = out[out.index("Inspect it in the browser") :]
    session_id = command.split("serve --session ", 1)[1].split()[0]
    assert (store / session_id / "log.jsonl").is_file()
    assert f"--store {store} serve --session {session_id} --open" in command
    assert sorted(p.name for p in short_tmp.iterdir()) == [store.name]  # the sample workspace is removed
