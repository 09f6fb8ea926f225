"""Hypothesis strategies for shell commands built around every form the shell reader must see through."""

from __future__ import annotations

import shlex
from collections.abc import Callable

from hypothesis import strategies as st

PROGRAMS = ("git", "rm", "touch", "ls", "cat", "grep", "make", "npm")
"""Programs the generated commands run (the differential test shims each one)."""
WRAPPERS = ("env", "xargs", "nohup", "nice", "timeout", "find", "sudo", "bash", "sh")
"""Real programs the differential test lets run (behind a shim that records them), which run others."""

PLAIN_ARGUMENT = st.sampled_from(["x", "-f", "status", "--short", "src/a.py", "1", "--", "."])
ARGUMENT = st.one_of(
    PLAIN_ARGUMENT,
    st.sampled_from(["'a b'", '"a;b"', "'rm'", "$HOME", "${HOME}", "*.nothing", "a\\ b", "'}'", '"$x"', "'|'"]),
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=6).map(shlex.quote),
)


@st.composite
def simple_command(draw: st.DrawFn, program: str | None = None) -> str:
    """A program, possibly spelled another way, and its arguments."""
    name = program if program is not None else draw(st.sampled_from(PROGRAMS))
    spelled = draw(st.sampled_from([name, f"\\{name}", f"'{name}'", f'"{name}"', f"{name[0]}''{name[1:]}"]))
    args = draw(st.lists(ARGUMENT, max_size=3))
    return " ".join([spelled, *args])


def _quoted(form: str) -> Callable[[str], str]:
    return lambda inner: form.format(shlex.quote(inner))


def _through_variable(command: str) -> str:
    """`p=rm; $p x`: the program's name in a variable."""
    spelled, _, rest = command.partition(" ")
    return f"p={spelled}; $p {rest}"


SIMPLE_WRAPPERS: tuple[Callable[[str], str], ...] = (
    lambda c: f"command {c}",
    lambda c: f"env {c}",
    lambda c: f"env A=1 {c}",
    lambda c: f"sudo {c}",
    lambda c: f"nohup {c}",
    lambda c: f"time {c}",
    lambda c: f"nice -n 1 {c}",
    lambda c: f"timeout 5 {c}",
    lambda c: f"echo x | xargs {c}",
    lambda c: f"find . -maxdepth 0 -exec {c} \\;",
    lambda c: f"exec {c}",
    lambda c: _through_variable(c),
)
"""Forms that run a simple command through another program or word."""
STATEMENT_WRAPPERS: tuple[Callable[[str], str], ...] = (
    lambda c: f"{{ {c}; }}",
    lambda c: f"( {c} )",
    lambda c: f"if true; then {c}; fi",
    lambda c: f"while true; do {c}; break; done",
    lambda c: f"for i in 1; do {c}; done",
    lambda c: f"case x in x) {c};; esac",
    lambda c: f"f() {{ {c}; }}; f",
    lambda c: f"echo $({c})",
    lambda c: f"x=$({c})",
    lambda c: f"echo ${{x:-$({c})}}",
    lambda c: f"true && {c}",
    lambda c: f"false || {c}",
    lambda c: f"true | {c}",
    lambda c: f"true\n{c}",
    lambda c: f"{c} 2>/dev/null",
    lambda c: f"! {c}",
    _quoted("bash -c {}"),
    _quoted("sh -c {}"),
    _quoted("eval {}"),
    _quoted("bash <<< {}"),
    lambda c: f"bash <<'EOF'\n{c}\nEOF",
)
"""Forms that run any statement inside another."""


@st.composite
def hidden_command(draw: st.DrawFn, program: str | None = None) -> str:
    """A simple command behind up to three layers of wrappers, groups, keywords and substitutions."""
    command = draw(simple_command(program))
    if draw(st.booleans()):
        command = draw(st.sampled_from(SIMPLE_WRAPPERS))(command)
    for _ in range(draw(st.integers(0, 3))):
        command = draw(st.sampled_from(STATEMENT_WRAPPERS))(command)
    return command


HARMLESS = (">/dev/null", "2>&1", "2>/dev/null", "&>/dev/null", ">&2")
"""Redirections an allow rule lets through: nothing is opened."""
SMUGGLERS = (
    "$(touch C)",
    "`touch C`",
    "${x:-$(touch C)}",
    "${x:-'}'};touch C #'",
    '${x:-"}"};touch C #"',
    "$'\\'';touch C #'",
    "${x[$(touch C)]}",
    "<(touch C)",
    "$((1))",
    '$"x"',
    ">C",
    "2>>C",
    "&>C",
    '>"&1"',
    ">&C",
    "<C",
    "<<<x",
    "<<EOF\nx\nEOF\n",
    "; touch C",
    "| touch C",
    "&& touch C",
    "\ntouch C",
    "& touch C",
)
"""Fragments that make a `git status` command do more than it shows; an allow rule covers none of them."""


@st.composite
def git_status(draw: st.DrawFn, *, smuggle: bool) -> str:
    """`git status` commands joined by separators, with harmless redirections; one smuggler if asked."""
    parts: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        words = ["git", "status", *draw(st.lists(st.one_of(PLAIN_ARGUMENT, ARGUMENT), max_size=3))]
        words += draw(st.lists(st.sampled_from(HARMLESS), max_size=2))
        parts.append(" ".join(words))
    if smuggle:
        where = draw(st.integers(0, len(parts) - 1))
        parts[where] += " " + draw(st.sampled_from(SMUGGLERS))
    return draw(st.sampled_from([" && ", "; ", " | ", " || ", "\n"])).join(parts)
