"""Properties of the shell reader over generated commands: nothing hides a program, nothing slips past an allow rule."""

from __future__ import annotations

import shlex

from hypothesis import given
from hypothesis import strategies as st

from lamina.shell import could_run, file_uses, read_command
from tests.shell.commands import PROGRAMS, hidden_command


@given(st.sampled_from(PROGRAMS).flatmap(lambda program: st.tuples(st.just(program), hidden_command(program))))
def test_a_program_behind_any_form_is_seen(found: tuple[str, str]) -> None:
    program, command = found
    assert could_run(read_command(command), (program,)) is not None, command


@given(hidden_command())
def test_what_the_reader_understands_has_no_command_inside_another(command: str) -> None:
    reading = read_command(command)
    if reading.understood:
        assert not any(part.nested for part in reading.commands), command
    if any(part.nested for part in reading.commands):
        assert not reading.understood


@given(st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=30))
def test_a_quoted_argument_is_one_word_with_exactly_its_text(text: str) -> None:
    (part,) = read_command(f"echo {shlex.quote(text)} end").commands
    assert [word.value for word in part.words] == ["echo", text, "end"]
    assert not part.words[1].pattern


@given(st.text(max_size=80))
def test_any_text_reads_without_an_exception(text: str) -> None:
    reading = read_command(text)
    file_uses(reading)
    could_run(reading, ("rm",))
    assert reading.understood == (not reading.problems)
