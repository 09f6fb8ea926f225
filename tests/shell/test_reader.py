"""The shell reader's words, redirections and simple commands, and everything it fails closed on."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lamina.shell import read_command

UNDERSTOOD = [
    "git status",
    "git status -s && npm test; ls | wc -l || true &",
    "git  'status'  \"--short\"",
    "ls $HOME ${HOME} *.py ~/x {a,b} 2>&1 >/dev/null </dev/null 2>&-",
    "echo a\\\nb  # a comment; rm x",
    "cat '$(no)' \"\\$(no)\" \\$\\(no\\)",
    "echo $'plain'",
]
FAILS_CLOSED = {
    "echo $(touch C)": "command substitution",
    "echo `touch C`": "command substitution",
    "cat <(touch C)": "process substitution",
    "echo ${x:-y}": "parameter expansion with an operator",
    "echo ${x[1]}": "parameter expansion with an operator",
    "echo ${!x}": "parameter expansion with an operator",
    "echo ${x@P}": "parameter expansion with an operator",
    "echo $((1 + 2))": "arithmetic expansion",
    "echo $'a\\nb'": "ANSI-C quoting",
    'echo $"x"': "locale quoting",
    "if true; then ls; fi": "the keyword `if`",
    "while false; do ls; done": "the keyword `while`",
    "for i in a; do ls; done": "the keyword `for`",
    "case x in x) ls;; esac": "the keyword `case`",
    "{ ls; }": "a group",
    "(ls)": "a subshell",
    "f() { ls; }": "a function definition",
    "eval ls": "`eval`",
    "cat <<EOF\nx\nEOF": "a here-document",
    "cat <<< x": "a here-string",
    "[[ -f x ]]": "a test",
    "! ls": "`!` before a command",
    "export A=1": "`export`",
    "a=(1 2) ls": "an array assignment",
    "echo (": "cannot parse",
    "echo a\x00b": "a NUL character",
}


@pytest.mark.parametrize("command", UNDERSTOOD)
def test_plain_commands_are_understood(command: str) -> None:
    reading = read_command(command)
    assert reading.understood, reading.problems
    assert all(part.plain for part in reading.commands)


@pytest.mark.parametrize(("command", "problem"), FAILS_CLOSED.items())
def test_what_the_reader_does_not_fully_understand_is_named(command: str, problem: str) -> None:
    reading = read_command(command)
    assert not reading.understood
    assert any(problem in found for found in reading.problems), reading.problems


@pytest.mark.parametrize(
    ("command", "values"),
    [
        ("echo \"a b\" 'c d'", ["echo", "a b", "c d"]),
        ("echo 'a'\\''b'", ["echo", "a'b"]),
        ('\\rm r""m "r"m r\'\'m', ["rm", "rm", "rm", "rm"]),
        ("echo a\\\nb", ["echo", "ab"]),  # a line continuation inside a word joins it
        ('echo "\\$x" "a\\b" "\\"q\\""', ["echo", "$x", "a\\b", '"q"']),
        ("echo $'abc' x$HOME", ["echo", "abc", None]),
        ("find . -exec ls {} \\;", ["find", ".", "-exec", "ls", "{}", ";"]),
    ],
)
def test_words_are_what_bash_passes_on(command: str, values: list[str | None]) -> None:
    (part,) = read_command(command).commands
    assert [word.value for word in part.words] == values


def test_patterns_are_marked_and_quoted_ones_are_not() -> None:
    (part,) = read_command("ls *.py '*.py' ~/x '~/x' {a,b} '{a,b}' {} a\\*").commands
    assert [word.pattern for word in part.words[1:]] == [True, False, True, False, True, False, False, False]


@pytest.mark.parametrize(
    ("command", "harmless"),
    [
        ("ls >/dev/null", True),
        ("ls 2>/dev/null", True),
        ("ls &>/dev/null", True),
        ('ls >"/dev/null"', True),
        ("ls 2>&1", True),
        ("ls >&2", True),
        ("ls <&0", True),
        ("ls 2>&-", True),
        ("ls >1", False),
        ("ls 2>>2", False),
        ("ls &>1", False),
        ('ls >"&1"', False),
        ("ls >&file", False),
        ("ls >$x", False),
        ("ls </dev/null", True),
        ("ls <input", False),
        ("ls >/dev/null*", False),
    ],
)
def test_only_dev_null_and_descriptor_duplications_are_harmless(command: str, harmless: bool) -> None:
    (part,) = read_command(command).commands
    assert [redirect.harmless for redirect in part.redirects] == [harmless]


def test_a_redirection_in_the_middle_leaves_the_words_after_it_to_the_command() -> None:
    (part,) = read_command("sudo >log rm x").commands
    assert [word.value for word in part.words] == ["sudo", "rm", "x"]
    assert [(r.operator, r.target and r.target.value) for r in part.redirects] == [(">", "log")]


def test_every_command_in_the_tree_is_found_and_nested_ones_are_marked() -> None:
    reading = read_command("cat <<EOF | rm x\n$(touch y)\nEOF\nf() { ls; }; echo ${z:-$(pwd)}")
    found = {part.words[0].value: part.nested for part in reading.commands if part.words}
    assert found == {"cat": False, "rm": False, "touch": True, "ls": True, "echo": False, "pwd": True}


def test_quoting_tree_sitter_leaves_inside_a_word_is_a_parse_error() -> None:
    reading = read_command("echo ${z:-`rm x`}")  # tree-sitter-bash keeps the backquotes as text here
    assert reading.parse_error and not reading.understood


def test_assignments_and_their_values() -> None:
    part = read_command("A=1 B='x y' C=$(pwd) make").commands[0]
    assert [word.value for word in part.assignments] == ["A=1", "B=x y", None]
    assert not part.plain


def test_deep_nesting_is_a_parse_error_not_a_crash() -> None:
    reading = read_command("echo " + "$(" * 200 + "x" + ")" * 200)
    assert reading.parse_error and not reading.understood


def test_non_ascii_words_keep_their_text() -> None:
    (part,) = read_command("echo 'é' \"😀\" {\U000e0001 ü=1").commands
    assert [word.value for word in part.words] == ["echo", "é", "😀", "{\U000e0001", "ü=1"]


@pytest.mark.slow
def test_text_that_crashed_tree_sitter_bash_reads_in_a_process_that_lives() -> None:
    code = (
        "from lamina.shell import read_command\n"
        "for n in range(3000):\n"
        "    read_command.cache_clear()\n"
        "    read_command('{\\U000e0001'); read_command('&\\U000ac178A\\x80{\\U0005d9ec|\\U00071ff2')\n"
    )
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=False)
        assert done.returncode == 0, done.stderr


def test_a_node_boundary_inside_a_character_is_a_parse_error() -> None:
    reading = read_command("x <<\xa0\n\U00098139😀 ~$>&s!\xa0")  # the here-document's end is found mid-character
    assert reading.parse_error and not reading.understood
