"""Allow and deny rules: their syntax, Bash prefixes and compound commands, paths, what "always" adds."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lamina.cli._permissions import PermissionRule, Permissions, always_rules, parse_rule, read_rules
from lamina.errors import ConfigError
from lamina.shell import read_command
from tests.shell.commands import git_status

RESERVED = frozenset(
    [
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "case",
        "esac",
        "for",
        "select",
        "while",
        "until",
        "do",
        "done",
        "in",
        "function",
        "time",
        "coproc",
    ]
)
WORD = st.from_regex(r"[a-z][a-z0-9_-]{0,7}", fullmatch=True).filter(lambda word: word not in RESERVED)
"""A plain word: a program or a subcommand (not one of bash's reserved words)."""
ARGUMENT = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), min_size=1, max_size=12)
"""Any argument at all: quoted with `shlex.quote`, it is one word whatever it holds."""
SEPARATOR = st.sampled_from([";", "&&", "||", "|", "&", "\n", " ; ", " && ", " | "])


def _allowed(permissions: Permissions, command: str) -> bool:
    return bool(permissions.allowing("Bash", command, ()))


def _rules(*allow: str, deny: tuple[str, ...] = ()) -> Permissions:
    return read_rules([("test", list(allow), list(deny))])


@given(st.lists(WORD, min_size=1, max_size=3), st.lists(ARGUMENT, max_size=4))
def test_a_prefix_rule_allows_its_words_followed_by_any_arguments(prefix: list[str], rest: list[str]) -> None:
    rule = PermissionRule("Bash", "prefix", tuple(prefix))
    permissions = Permissions(allow=(rule,))
    command = " ".join([*prefix, *(shlex.quote(word) for word in rest)])
    assert _allowed(permissions, command)
    assert parse_rule(rule.text) == rule  # the written form reads back


@given(st.lists(WORD, min_size=1, max_size=3), SEPARATOR, st.lists(WORD, min_size=1, max_size=3))
def test_a_compound_command_needs_every_part_allowed(prefix: list[str], separator: str, other: list[str]) -> None:
    permissions = Permissions(allow=(PermissionRule("Bash", "prefix", tuple(prefix)),))
    allowed = " ".join(prefix)
    extra = " ".join(other)
    both = permissions.with_allowed([PermissionRule("Bash", "prefix", tuple(other))])
    assert _allowed(both, allowed + separator + extra)
    if tuple(other[: len(prefix)]) != tuple(prefix):
        assert not _allowed(permissions, allowed + separator + extra)
        assert not _allowed(permissions, extra + separator + allowed)


@given(st.lists(WORD, min_size=1, max_size=3), st.lists(WORD, min_size=1, max_size=3))
def test_substitutions_and_redirections_to_files_are_never_allowed_by_a_prefix(
    prefix: list[str], other: list[str]
) -> None:
    permissions = Permissions(allow=(PermissionRule("Bash", "prefix", tuple(prefix)),))
    allowed, extra = " ".join(prefix), " ".join(other)
    for command in (
        f"{allowed} $({extra})",
        f"{allowed} `{extra}`",
        f'{allowed} "$({extra})"',
        f"{allowed} <({extra})",
        f"{allowed} > {other[0]}.txt",
        f"{allowed} >> out",
        f"X=1 {allowed}",
        f"({allowed})",
        f"{allowed} <<EOF\n{extra}\nEOF",
        f"{allowed} '",  # unterminated
    ):
        assert not _allowed(permissions, command), command
    assert _allowed(permissions, f"{allowed} 2>&1")
    assert _allowed(permissions, f"{allowed} > /dev/null 2>/dev/null")


@given(st.lists(ARGUMENT, max_size=4), SEPARATOR)
def test_quoted_separators_are_arguments_not_commands(rest: list[str], separator: str) -> None:
    permissions = _rules("Bash(git status:*)")
    quoted = " ".join(shlex.quote(word + separator + "rm -rf x") for word in rest)
    assert _allowed(permissions, f"git status {quoted}")
    assert [word.value for word in read_command(f"git status {quoted}").commands[0].words[2:]] == [
        w + separator + "rm -rf x" for w in rest
    ]


def test_git_status_does_not_allow_what_follows_it() -> None:
    permissions = _rules("Bash(git status:*)")
    assert _allowed(permissions, "git status")
    assert _allowed(permissions, "git status -s")
    assert _allowed(permissions, "git  'status'  --short")  # quotes removed, as the shell does
    for command in (
        "git status; rm -rf x",
        "git status && rm -rf x",
        "git status || rm -rf x",
        "git status | sh",
        "git status & rm -rf x",
        "git status\nrm -rf x",
        "git statusx",
        "git push",
        "git status $(rm -rf x)",
        "git status `rm -rf x`",
    ):
        assert not _allowed(permissions, command), command
    assert _allowed(permissions, "git status # ; rm -rf x")  # a comment runs nothing


@given(st.lists(WORD, min_size=1, max_size=2), SEPARATOR, st.lists(ARGUMENT, max_size=3))
def test_a_deny_rule_refuses_a_command_when_any_part_matches(other: list[str], separator: str, rest: list[str]) -> None:
    permissions = _rules("Bash", deny=("Bash(rm:*)",))
    denied = " ".join(["rm", *(shlex.quote(word) for word in rest)])
    safe = " ".join(other)
    for command in (
        denied,
        safe + separator + denied,
        denied + separator + safe,
        f"{safe} $({denied})",
        f"{safe} `{denied}`",
        f"X=1 {denied}",
        f"/bin/{denied}",
        f"({denied})",
    ):
        rule = permissions.denying("Bash", command, ())
        assert rule is not None and rule.text == "Bash(rm:*)", command
        assert not _allowed(permissions, command)  # deny wins over the allow rule for every command
    # `a rm` is refused too: the arguments of a program not known to never run them could be programs
    # (WORD holds no reserved word, which alone is no whole command and is refused as well)
    if "rm" not in other:
        assert permissions.denying("Bash", safe, ()) is None


def test_exact_rules_match_the_whole_command_only() -> None:
    permissions = _rules("Bash(npm test)")
    assert _allowed(permissions, "npm test")
    assert _allowed(permissions, "  npm test ")
    assert not _allowed(permissions, "npm test --watch")
    assert not _allowed(permissions, "npm test; rm x")


def test_tool_rules_and_path_globs() -> None:
    permissions = _rules("Read", "Edit(src/**)", "Write(*.md)", deny=("Read(.env)", "Edit(src/secret/**)"))
    assert permissions.allowing("Read", None, ("app.py",))
    assert permissions.allowing("Read", None, ())
    assert not permissions.allowing("Read", None, (".env",))  # deny wins
    assert permissions.denying("Read", None, ("app.py", "config/.env")) is not None  # a name without / matches anywhere
    assert permissions.allowing("Edit", None, ("src/a.py", "src/lib/b.py"))
    assert not permissions.allowing("Edit", None, ("src/a.py", "tests/b.py"))  # every path must match
    assert not permissions.allowing("Edit", None, ("src/secret/key.py",))
    assert not permissions.allowing("Edit", None, ())  # a path rule needs paths
    assert permissions.allowing("Write", None, ("docs/a.md",))
    assert not permissions.allowing("Write", None, ("docs/a.py",))
    assert not permissions.allowing("Bash", "ls", ())  # no rule for Bash at all


@pytest.mark.parametrize(
    ("command", "rules"),
    [
        ("git status", ["Bash(git status:*)"]),
        ("git status -s", ["Bash(git status -s:*)"]),
        ("npm test", ["Bash(npm test:*)"]),
        ("npm run build", ["Bash(npm run build:*)"]),
        ("python -m pytest tests/test_a.py -x", ["Bash(python -m pytest:*)"]),
        ("pytest tests/test_a.py", ["Bash(pytest:*)"]),
        ("git commit -m 'fix: the thing'", ["Bash(git commit -m:*)"]),
        ("ls -la src/", ["Bash(ls -la:*)"]),
        ("make -j 4", ["Bash(make -j:*)"]),
        ("git status && npm test", ["Bash(git status && npm test)"]),
        ("git add . && git commit -m x", ["Bash(git add . && git commit -m x)"]),
        ("for i in 1 2 3; do echo tick; sleep 1; done", ["Bash(for i in 1 2 3; do echo tick; sleep 1; done)"]),
        ("(while true; do date; done) | head -3", ["Bash((while true; do date; done) | head -3)"]),
        ("echo $(whoami)", ["Bash(echo $(whoami))"]),
        ("ls > out.txt", ["Bash(ls > out.txt)"]),
    ],
)
def test_always_allows_the_command_prefix(command: str, rules: list[str]) -> None:
    chosen = always_rules("Bash", command)
    assert [rule.text for rule in chosen] == rules
    assert _allowed(Permissions(allow=chosen), command)  # what "always" adds covers the call it answered
    assert [rule.text for rule in always_rules("Edit", None)] == ["Edit"]


@given(st.text(max_size=40))
def test_always_covers_the_command_it_answered_whatever_it_is(command: str) -> None:
    if not command.strip():
        return
    assert _allowed(Permissions(allow=always_rules("Bash", command)), command)


@given(st.text(max_size=60))
def test_reading_never_fails(command: str) -> None:
    reading = read_command(command)
    assert all(isinstance(word.text, str) for part in reading.commands for word in part.words)


@pytest.mark.parametrize(
    ("text", "problem"),
    [("Bash(", "not a rule"), ("Bash()", "empty specifier"), ("Bash(:*)", "empty prefix"), ("no spaces", "not a rule")],
)
def test_a_bad_rule_is_an_error_naming_file_and_list(text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=rf"cfg.toml: permissions\.deny\[1\]: .*{problem}"):
        read_rules([("cfg.toml", [], ["Read", text])])


def test_rules_keep_their_origin_and_are_not_repeated() -> None:
    permissions = read_rules([("user.toml", ["Read"], []), ("ws.toml", ["Bash(git status:*)"], ["Bash(rm:*)"])])
    assert [(r.text, r.origin) for r in permissions.allow] == [("Read", "user.toml"), ("Bash(git status:*)", "ws.toml")]
    again = permissions.with_allowed([parse_rule("Read"), parse_rule("Bash(npm test:*)")])
    assert [r.text for r in again.allow] == ["Read", "Bash(git status:*)", "Bash(npm test:*)"]
    assert again.deny == permissions.deny


# --- issue 42: an allow rule never lets an unapproved command run, a deny rule sees every form ---------------

SMUGGLED = [
    "git status ${x:-$(touch C)}",
    "git status ${x:-`touch C`}",
    "git status ${x:-'}'};touch C #'",
    'git status ${x:-"}"};touch C #"',
    "git status $'\\'';touch C #'",
    "git status ${x[$(touch C)]}",
]
"""Six ways to hide `touch C` in a command that starts `git status` (each allowed before the shell reader)."""
WRITES = ["git status >1", "git status 2>>2", "git status &>1", 'git status >"&1"']
"""Redirections to files that look like descriptor duplications (each allowed before)."""
DENIED_FORMS = [
    "command rm x",
    "{ rm x; }",
    "if true; then rm x; fi",
    "p=rm; $p x",
    "$(echo rm) x",
    "env rm x",
    "echo x | xargs rm",
    "sudo rm x",
    "bash -c 'rm x'",
    "eval rm x",
    "exec rm x",
    "time rm x",
    "nohup rm x",
    "find . -exec rm {} \\;",
    "f() { rm x; }; f",
    "`echo rm` x",
]
"""Sixteen shell forms that ran `rm` past `Bash(rm:*)` before the shell reader."""


@pytest.mark.parametrize("command", SMUGGLED + WRITES)
def test_an_allow_rule_never_covers_a_command_that_hides_another_or_writes_a_file(command: str) -> None:
    assert not _allowed(_rules("Bash(git status:*)"), command)
    assert not _allowed(_rules("Bash(git:*)"), command)


@pytest.mark.parametrize("command", DENIED_FORMS)
def test_a_deny_rule_refuses_every_form_that_runs_its_program(command: str) -> None:
    permissions = _rules("Bash", deny=("Bash(rm:*)",))
    rule = permissions.denying("Bash", command, ())
    assert rule is not None and rule.text == "Bash(rm:*)"
    assert not _allowed(permissions, command)


def test_a_deny_rule_leaves_programs_that_never_run_their_words_alone() -> None:
    permissions = _rules("Bash", deny=("Bash(rm:*)", "Bash(git push:*)"))
    for command in ("echo rm", "ls rm", "grep -rn 'rm -rf' src", "cat <<EOF\nrm x\nEOF", "git status", "git pull"):
        assert permissions.denying("Bash", command, ()) is None, command
    for command in ("git -C repo push", "git push --force", "sudo git push", "g=git; $g push"):
        assert permissions.denying("Bash", command, ()) is not None, command


def test_the_refusal_says_what_could_run() -> None:
    from lamina.cli._permissions import refused_because

    rule = parse_rule("Bash(rm:*)")
    assert refused_because(rule, "bash -c 'ls; rm -rf x'") == "rm -rf x"
    assert refused_because(rule, "p=x; $p y") == "`$p` (an expansion: it could be any program)"
    assert refused_because(rule, "ls") is None


@given(git_status(smuggle=False))
def test_git_status_with_any_arguments_and_harmless_redirections_is_allowed(command: str) -> None:
    assert _allowed(_rules("Bash(git status:*)"), command), command


@given(git_status(smuggle=True))
def test_git_status_with_anything_smuggled_in_is_never_allowed(command: str) -> None:
    assert not _allowed(_rules("Bash(git status:*)"), command), command
