"""The reader against bash itself: every program bash runs for a generated command, the reader saw.

Each command runs under `bash -c` in a scratch folder whose PATH holds only recording shims: a
shim for each program writes its name and arguments to a file of its own; the wrappers (`env`, `xargs`,
`find`, `sudo`, `bash`, …) record themselves, then run the real program, which finds the shims.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lamina.cli._permissions import Permissions, parse_rule
from lamina.shell import could_run, read_command
from tests.conftest import EXHAUSTIVE
from tests.shell.commands import PROGRAMS, WRAPPERS, git_status, hidden_command

pytestmark = pytest.mark.slow
EXAMPLES = 1_500 if EXHAUSTIVE else 40
RECORD = 'printf "%s\\0" "${0##*/}" "$@" > "$(/usr/bin/mktemp "$SHIM_LOG/XXXXXXXX")"\n'
REAL = {"sudo": 'while [ "${1#-}" != "$1" ]; do shift; done; exec "$@"\n'}


class Scratch:
    """A folder to run commands in, a PATH of shims, and the log they write."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.log = root.parent / f"{root.name}.log"
        self.bin.mkdir(parents=True)
        self.log.mkdir()
        for name in PROGRAMS:
            self._shim(name, RECORD)
        for name in WRAPPERS:
            real = shutil.which(name, path="/usr/bin:/bin")
            tail = REAL.get(name) or (f'exec {real} "$@"\n' if real else "exit 127\n")
            self._shim(name, RECORD + tail)

    def _shim(self, name: str, body: str) -> None:
        path = self.bin / name
        path.write_text("#!/bin/bash\n" + body)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)

    def run(self, command: str) -> list[list[str]] | None:
        """The programs the command ran, each with its arguments; None when bash refuses its syntax."""
        for entry in self.root.iterdir():
            if entry != self.bin:
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        for record in self.log.iterdir():
            record.unlink()
        if subprocess.run(["bash", "-n", "-c", command], capture_output=True, check=False).returncode != 0:
            return None
        env = {"PATH": str(self.bin), "SHIM_LOG": str(self.log), "HOME": str(self.root), "LC_ALL": "C"}
        subprocess.run(
            ["/bin/bash", "-c", command],
            cwd=self.root,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            check=False,
        )
        return [path.read_bytes().decode(errors="replace").split("\0")[:-1] for path in self.log.iterdir()]

    def created(self) -> list[str]:
        return sorted(entry.name for entry in self.root.iterdir() if entry != self.bin)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scratch]:
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    yield Scratch(tmp_path_factory.mktemp("differential") / "work")


def _check_seen(scratch: Scratch, command: str) -> None:
    ran = scratch.run(command)
    if ran is None:
        return
    reading = read_command(command)
    for program, *_ in ran:
        assert could_run(reading, (program,)) is not None, (command, program, reading)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(hidden_command(), hidden_command("rm")))
def test_every_program_bash_runs_was_seen_by_the_reader(scratch: Scratch, command: str) -> None:
    _check_seen(scratch, command)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(git_status(smuggle=False), git_status(smuggle=True)))
def test_what_a_prefix_rule_allows_runs_only_that_prefix_and_writes_nothing(scratch: Scratch, command: str) -> None:
    allowed = bool(Permissions(allow=(parse_rule("Bash(git status:*)"),)).allowing("Bash", command, ()))
    ran = scratch.run(command)
    if ran is None or not allowed:
        return
    assert all(args[:2] == ["git", "status"] for args in ran), (command, ran)
    assert scratch.created() == [], command
    _check_seen(scratch, command)


@pytest.mark.parametrize(
    "command",
    [
        "command rm x",
        "{ rm x; }",
        "p=rm; $p x",
        "$(echo rm) x",
        "bash -c 'rm x'",
        "find . -maxdepth 0 -exec rm {} \\;",
        "f() { rm x; }; f",
        "bash <<'EOF'\nrm x\nEOF",
    ],
)
def test_the_shims_see_what_they_should(scratch: Scratch, command: str) -> None:
    ran = scratch.run(command) or []
    assert ["rm", "x"] in ran or ["rm", "."] in ran, ran
    _check_seen(scratch, command)


def test_the_scratch_folder_is_safe_to_run_in() -> None:
    assert os.environ.get("SHIM_LOG") is None  # the shims log only where a run points them
