"""What an allow rule lets run, against bash itself: only its prefix runs, and no file is written.

Generated `git status` commands, some with something smuggled in, run under bash in a scratch
folder of recording shims (`tests.shell.shims`) whenever `Bash(git status:*)` allows them.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lamina.cli._permissions import Permissions, parse_rule
from tests.conftest import EXHAUSTIVE
from tests.shell.commands import git_status
from tests.shell.shims import Scratch
from tests.shell.test_differential import check_seen

pytestmark = pytest.mark.slow
EXAMPLES = 1_500 if EXHAUSTIVE else 40


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scratch]:
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    yield Scratch(tmp_path_factory.mktemp("allowed") / "work")


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(git_status(smuggle=False), git_status(smuggle=True)))
def test_what_a_prefix_rule_allows_runs_only_that_prefix_and_writes_nothing(scratch: Scratch, command: str) -> None:
    allowed = bool(Permissions(allow=(parse_rule("Bash(git status:*)"),)).allowing("Bash", command, ()))
    ran = scratch.run(command)
    if ran is None or not allowed:
        return
    assert all(args[:2] == ["git", "status"] for args in ran), (command, ran)
    assert scratch.created() == [], command
    check_seen(scratch, command)
