"""The line editor's completion: slash commands at the start, skill names after `[skill:`."""

from __future__ import annotations

from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from lamina.cli._commands import _HANDLERS, COMMANDS, HELP
from lamina.cli._user_input import _Completer


def _complete(text: str) -> list[str]:
    completer = _Completer(COMMANDS, lambda: ["review", "release-notes", "deploy"])
    return [c.text for c in completer.get_completions(Document(text), CompleteEvent(completion_requested=True))]


def test_slash_commands_complete_at_the_start_only() -> None:
    assert _complete("/co") == ["/compact", "/context"]
    assert _complete("/q") == ["/quit"]
    assert _complete("say /co") == []


def test_every_command_completed_has_a_handler_and_a_line_of_help() -> None:
    assert set(COMMANDS) == {*_HANDLERS, "/quit", "/exit"}
    assert all(f"\n{name} " in f"\n{HELP}" for name in COMMANDS if name != "/exit")


def test_skill_names_complete_after_the_mention_prefix() -> None:
    assert _complete("please use [skill:re") == ["release-notes]", "review]"]
    assert _complete("[skill:") == ["deploy]", "release-notes]", "review]"]
    assert _complete("[skill:review] done") == []
