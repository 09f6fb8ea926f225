"""Which programs a command could run: the words a deny rule looks at."""

from __future__ import annotations

import shlex

import pytest

from lamina.shell import could_run, read_command
from lamina.shell._programs import NON_RUNNERS


def _runs(command: str, *prefix: str) -> str | None:
    return could_run(read_command(command), prefix)


@pytest.mark.parametrize(
    "command",
    [
        "rm x",
        "/bin/rm x",
        "\\rm x",
        "r''m x",
        '"rm" x',
        "/bin/r? x",
        "command rm x",
        "builtin command rm x",
        "env A=1 rm x",
        "sudo -u root rm x",
        "nohup rm x &",
        "time rm x",
        "nice -n 5 rm x",
        "timeout 5 rm x",
        "exec rm x",
        "eval rm x",
        "eval 'rm x'",
        "echo x | xargs rm",
        "find . -name '*.tmp' -exec rm {} +",
        "watch rm x",
        "bash -c 'ls && rm x'",
        'sh -c "cd /tmp; rm x"',
        "su -c 'rm x' root",
        "ssh host 'rm -rf x'",
        "python3 -c 'import os' && rm x",
        "{ rm x; }",
        "(rm x)",
        "if true; then rm x; fi",
        "while true; do rm x; done",
        "for f in a; do rm $f; done",
        "case a in a) rm x;; esac",
        "f() { rm x; }; f",
        "function f { rm x; }",
        "echo $(rm x)",
        "echo `rm x`",
        "echo ${x:-$(rm x)}",
        "cat <(rm x)",
        "x=$(rm x)",
        "p=rm; $p x",
        "$(echo rm) x",
        "`echo rm` x",
        "${p} x",
        "PAGER='rm x' git log",
        "GIT_SSH_COMMAND=rm git fetch",
        "git -c core.pager=rm log",
        "git -c alias.x='!rm x' x",
        "alias r=rm; r x",
        "export EDITOR=rm; git commit",
        "bash <<'EOF'\nrm x\nEOF",
        "sh <<< 'rm x'",
    ],
)
def test_a_program_is_seen_in_every_position_that_could_run_it(command: str) -> None:
    assert _runs(command, "rm") is not None


@pytest.mark.parametrize(
    "command",
    [
        "echo rm",
        "ls rm",
        "grep -n 'rm -rf' notes.md",
        "cat <<EOF\nrm x\nEOF",
        "touch rm",
        "mkdir -p rm/x",
        "git status",
        "rmdir x",
        "printf '%s' firm",
    ],
)
def test_words_that_no_program_runs_are_left_alone(command: str) -> None:
    assert _runs(command, "rm") is None


def test_a_rule_of_several_words_needs_them_in_order_after_the_program() -> None:
    assert _runs("git push", "git", "push") == "git push"
    assert _runs("git -C repo push origin", "git", "push") is not None
    assert _runs("sudo git push --force", "git", "push", "--force") is not None
    assert _runs("git $verb", "git", "push") is not None  # an expansion could be `push`
    assert _runs("git pull", "git", "push") is None
    assert _runs("git log", "git", "push") is None


def test_a_parse_error_could_run_anything() -> None:
    assert _runs("echo ${z:-`ls`}", "rm") is not None
    assert _runs("echo (", "rm") is not None


def test_scripts_nested_too_deep_could_run_anything() -> None:
    command = "ls"
    for _ in range(6):
        command = f"bash -c {shlex.quote(command)}"
    assert "too deep" in (_runs(command, "rm") or "")


def test_the_programs_that_never_run_their_words_exclude_those_that_can() -> None:
    for runner in ("env", "sudo", "xargs", "find", "git", "printf", "test", "sort", "tar", "sed", "awk", "make"):
        assert runner not in NON_RUNNERS
