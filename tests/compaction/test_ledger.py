"""The compaction ledger (SPEC F14): files with one canonical path each and open tasks, bounded, never silently."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lamina.compaction import MAX_FILES, dropped_count, update_ledger
from lamina.compaction._ledger import MAX_OPEN_TASKS, canonical_path
from lamina.session import AssistantMessage, Ledger, LogEntry, StateChange, ToolCall, ToolResult, UserMessage


def call(call_id: str, name: str, error: bool = False, **args: object) -> list[LogEntry]:
    return [
        ToolCall(call_id=call_id, name=name, input=dict(args)),
        ToolResult(call_id=call_id, name=name, content="failed" if error else "ok", is_error=error),
    ]


# --- no sentence classification ---------------------------------------------------------------------


def test_the_ledger_picks_no_sentences_out_of_what_the_user_said() -> None:
    """Regression: rules were picked by keywords (missing preferences, facts, other languages and
    retractions, pinning quotes and questions). The user's words lane keeps the words instead."""
    entries: list[LogEntry] = [
        UserMessage(text="NEVER push to main without asking. I'd rather you use pytest."),
        UserMessage(text='The README says: "Contributors must sign the CLA." Should we always use async?'),
        AssistantMessage(text="Understood."),
    ]
    ledger = update_ledger(Ledger(), entries)
    assert ledger.constraints == ()
    # an older ledger's constraints are carried over unchanged, so an older session keeps them
    older = Ledger(constraints=("Never use eval.",))
    assert update_ledger(older, entries).constraints == ("Never use eval.",)


# --- files ----------------------------------------------------------------------------------------------


def test_files_read_and_modified_come_from_tool_calls() -> None:
    entries = [
        *call("1", "Read", path="src/app.py"),
        *call("2", "Grep", pattern="def main", path="src/"),
        *call("3", "Glob", pattern="**/*.md"),  # no path: nothing read in particular
        *call("4", "Bash", command="cat README.md docs/a.md | head -n 20 notes.txt 2>/dev/null && pytest -x"),
        *call("5", "Bash", command="tail -f logs/app.log > out.txt; FOO=1 less 'my file.txt'; cat src/*.py"),
        *call("6", "Edit", path="src/app.py", old_string="a", new_string="b"),
        *call("7", "Write", path="src/new.py", content="x"),
        *call("8", "Write", error=True, path="src/failed.py", content="x"),
        *call("9", "Read", error=True, path="missing.py"),
        *call("10", "Bash", command="echo 'unbalanced"),
        *call("11", "Read", path="src/app.py"),  # read again: now the most recent
    ]
    ledger = update_ledger(Ledger(), entries)
    assert ledger.files_read == (
        "src",
        "README.md",
        "docs/a.md",
        "notes.txt",
        "logs/app.log",
        "my file.txt",
        "src/app.py",
    )
    assert ledger.files_modified == ("out.txt", "src/app.py", "src/new.py")  # a redirection writes `out.txt`


def test_a_shell_command_writes_what_its_redirections_and_known_writers_name() -> None:
    entries = [
        *call("1", "Bash", command="cd src && sed -i 's/a/b/' app.py && touch new.py && cp app.py ../backup.py"),
        *call("2", "Bash", command="sudo tee -a log.txt < notes.md; git config core.pager less"),
        *call("3", "Bash", command="echo x > $OUT; cat ~/notes.md *.py"),  # not named exactly: not listed
    ]
    ledger = update_ledger(Ledger(), entries)
    assert ledger.files_read == ("src/app.py", "notes.md")
    assert ledger.files_modified == ("src/app.py", "src/new.py", "backup.py", "log.txt", ".git/config")


def test_each_file_has_one_canonical_path_resolved_against_the_workspace() -> None:
    entries = [
        *call("1", "Read", path="./src/app.py"),
        *call("2", "Read", path="/home/me/ws/src/app.py"),
        *call("3", "Bash", command="cat src//app.py"),
        *call("4", "Edit", path="src/../src/app.py", old_string="a", new_string="b"),
        *call("5", "Write", path="/home/me/ws/src/app.py", content="x"),
        *call("6", "Read", path="../other/README.md"),
        *call("7", "Read", path="/etc/hosts"),
    ]
    ledger = update_ledger(Ledger(files_read=("/home/me/ws/old.py",)), entries, workspace="/home/me/ws/")
    assert ledger.files_read == ("old.py", "src/app.py", "/home/me/other/README.md", "/etc/hosts")
    assert ledger.files_modified == ("src/app.py",)
    assert canonical_path("a//b/./c.py") == "a/b/c.py"
    assert canonical_path("//srv/x.py") == "/srv/x.py"
    assert canonical_path("/ws", "/ws") == "."
    assert canonical_path("  ") == ""


def test_files_are_capped_to_the_most_recent() -> None:
    entries = [e for n in range(MAX_FILES + 5) for e in call(str(n), "Read", path=f"f{n}.py")]
    ledger = update_ledger(Ledger(files_read=("old.py",)), entries)
    assert len(ledger.files_read) == MAX_FILES
    assert ledger.files_read[-1] == f"f{MAX_FILES + 4}.py"
    assert "old.py" not in ledger.files_read


# --- open tasks -------------------------------------------------------------------------------------------


def test_open_tasks_from_checklists_and_todos_and_no_request_filed_as_unanswered() -> None:
    entries: list[LogEntry] = [
        UserMessage(text="Plan:\n- [ ] parse the config\n- [ ] write tests\n- [x] read the code"),
        AssistantMessage(text="TODO: handle empty files\n- [x] parse the config"),
        StateChange(key="mode", value="plan"),
        UserMessage(text="Also add a --json flag"),  # answered in the kept part: not an open task
    ]
    ledger = update_ledger(Ledger(), entries)
    assert ledger.open_tasks == ("write tests", "TODO: handle empty files")
    ledger = update_ledger(ledger, [AssistantMessage(text="Added it.\n- [x] write tests")])
    assert ledger.open_tasks == ("TODO: handle empty files",)
    # an older ledger's "unanswered" items (which filed answered requests too) are dropped
    older = Ledger(open_tasks=("Unanswered user request: Also add a --json flag", "TODO: x"))
    assert update_ledger(older, []).open_tasks == ("TODO: x",)


def test_open_tasks_are_capped_with_a_note() -> None:
    text = "\n".join(f"- [ ] task {n}" for n in range(MAX_OPEN_TASKS + 3))
    ledger = update_ledger(Ledger(), [UserMessage(text=text), AssistantMessage(text="ok")])
    dropped, tasks = dropped_count(ledger.open_tasks)
    assert dropped == 3
    assert tasks[0] == "task 3"
    assert len(tasks) == MAX_OPEN_TASKS


def test_update_ledger_is_deterministic_and_pure() -> None:
    entries = [
        UserMessage(text="Never use eval. - [ ] x"),
        *call("1", "Edit", path="a.py", old_string="", new_string=""),
    ]
    previous = Ledger(files_read=("b.py",), open_tasks=("TODO: y",))
    assert update_ledger(previous, entries) == update_ledger(previous, list(entries))
    assert previous == Ledger(files_read=("b.py",), open_tasks=("TODO: y",))
    assert update_ledger(previous, []) == previous


SEGMENTS = st.lists(
    st.text(alphabet="abcxyz_-.", min_size=1, max_size=6).filter(lambda s: s not in (".", "..")), min_size=1, max_size=5
)


@pytest.mark.slow
@given(SEGMENTS)
def test_every_spelling_of_a_workspace_path_is_one_path(segments: list[str]) -> None:
    relative = "/".join(segments)
    workspace = "/home/me/ws"
    spellings = [relative, f"./{relative}", "//".join(segments), f"{workspace}/{relative}", f"{workspace}//{relative}"]
    canonical = {canonical_path(p, workspace) for p in spellings}
    assert canonical == {canonical_path(relative)}
    assert canonical_path(canonical_path(relative, workspace), workspace) == canonical_path(relative, workspace)
