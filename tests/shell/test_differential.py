"""The reader against bash itself: every program bash runs for a generated command, the reader saw.

Each command runs under `bash -c` in a scratch folder whose PATH holds only recording shims: a
shim for each program writes its name and arguments to a file of its own; the wrappers (`env`, `xargs`,
`find`, `sudo`, `bash`, …) record themselves, then run the real program, which finds the shims.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lamina.shell import could_run, read_command
from tests.conftest import EXHAUSTIVE
from tests.shell.commands import hidden_command
from tests.shell.shims import Scratch

pytestmark = pytest.mark.slow
EXAMPLES = 1_500 if EXHAUSTIVE else 40
EXAMPLES = 1_500 if EXHAUSTIVE else 40


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scratch]:
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    yield Scratch(tmp_path_factory.mktemp("differential") / "work")


def check_seen(scratch: Scratch, command: str) -> None:
    """Every program bash ran for `command` could run by the reader's account."""
    ran = scratch.run(command)
    if ran is None:
        return
    reading = read_command(command)
    for program, *_ in ran:
        assert could_run(reading, (program,)) is not None, (command, program, reading)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(hidden_command(), hidden_command("rm")))
def test_every_program_bash_runs_was_seen_by_the_reader(scratch: Scratch, command: str) -> None:
    check_seen(scratch, command)


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
    check_seen(scratch, command)
