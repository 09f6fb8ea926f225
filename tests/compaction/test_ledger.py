"""The compaction ledger (SPEC F14): files, verbatim user constraints and open tasks, bounded, never silently."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lamina.compaction import (
    MAX_CONSTRAINTS,
    MAX_FILES,
    MAX_ITEM_CHARS,
    MAX_OPEN_TASKS,
    dropped_count,
    find_constraints,
    update_ledger,
)
from lamina.session.entries import AssistantMessage, Ledger, LogEntry, StateChange, ToolCall, ToolResult, UserMessage


def call(call_id: str, name: str, error: bool = False, **args: object) -> list[LogEntry]:
    return [
        ToolCall(call_id=call_id, name=name, input=dict(args)),
        ToolResult(call_id=call_id, name=name, content="failed" if error else "ok", is_error=error),
    ]


# --- constraints --------------------------------------------------------------------------------------


def test_constraints_are_kept_verbatim_across_two_updates_and_the_first_is_never_lost() -> None:
    first: list[LogEntry] = [
        UserMessage(text="Fix the login bug. NEVER push to main without asking. Thanks!"),
        AssistantMessage(text="You should always run the tests."),  # the assistant states no user rule
    ]
    ledger = update_ledger(Ledger(), first)
    assert ledger.constraints == ("NEVER push to main without asking.",)
    second = [
        UserMessage(text="Please use uv, not pip.\nDo not touch the migrations folder; Make sure CI is green."),
        UserMessage(text="never push to main without asking."),  # another case: another sentence
        UserMessage(text="NEVER push to main without asking."),  # repeated: kept once
    ]
    ledger = update_ledger(ledger, second)
    assert ledger.constraints == (
        "NEVER push to main without asking.",
        "Please use uv, not pip.",
        "Do not touch the migrations folder; Make sure CI is green.",
        "never push to main without asking.",
    )
    ledger = update_ledger(ledger, [UserMessage(text="Now refactor the parser.")])
    assert ledger.constraints[0] == "NEVER push to main without asking."


def test_every_rule_word_in_any_case_makes_a_constraint() -> None:
    text = (
        "Always use tabs. don't add dependencies! You MUST keep the public API. We should prefer dataclasses. "
        "Only edit src/. Avoid global state. I prefer short names. Please Use pathlib. make sure it builds. "
        "Don’t rename files. This sentence is fine. Is it done?"
    )
    assert find_constraints(text) == (
        "Always use tabs.",
        "don't add dependencies!",
        "You MUST keep the public API.",
        "We should prefer dataclasses.",
        "Only edit src/.",
        "Avoid global state.",
        "I prefer short names.",
        "Please Use pathlib.",
        "make sure it builds.",
        "Don’t rename files.",
    )


def test_sentences_split_sensibly() -> None:
    text = (
        "Use pytest, e.g. with -x. Never mock the db.\n"
        "- Always format with ruff\n"
        "1. do not log secrets\n"
        "```\n# never executed: code in a fence is not a rule\n```\n"
        "版本号不要改。请使用中文回答。"
    )
    assert find_constraints(text) == (
        "Never mock the db.",
        "Always format with ruff",
        "do not log secrets",
        "版本号不要改。",
        "请使用中文回答。",
    )


def test_a_constraint_too_long_to_be_a_rule_is_cut_with_a_mark() -> None:
    long = "Never " + "x" * 2 * MAX_ITEM_CHARS
    (constraint,) = find_constraints(long)
    assert constraint.startswith(long[:MAX_ITEM_CHARS])
    assert constraint.endswith(f"[…{len(long) - MAX_ITEM_CHARS} more characters]")


def test_capped_constraints_keep_the_most_recent_and_count_the_dropped() -> None:
    messages: list[LogEntry] = [UserMessage(text=f"Never do thing {n}.") for n in range(MAX_CONSTRAINTS + 30)]
    ledger = update_ledger(Ledger(), messages)
    dropped, kept = dropped_count(ledger.constraints)
    assert dropped == 30
    assert kept == tuple(f"Never do thing {n}." for n in range(30, MAX_CONSTRAINTS + 30))
    assert ledger.constraints[0].startswith("[ledger: 30 older constraints dropped")
    ledger = update_ledger(ledger, [UserMessage(text="Always do thing A. Always do thing B.")])
    dropped, kept = dropped_count(ledger.constraints)
    assert dropped == 32
    assert len(kept) == MAX_CONSTRAINTS
    assert kept[-2:] == ("Always do thing A.", "Always do thing B.")


VOCABULARY = ("the", "parser", "file", "tests", "quickly", "main", "branch", "code", "we", "it")
RULE_WORDS = ("never", "Always", "DON'T", "do not", "must", "should", "only", "avoid", "prefer", "please use")


@st.composite
def user_texts(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A user message of plain and rule sentences, and its rule sentences."""
    sentences: list[str] = []
    rules: list[str] = []
    for _ in range(draw(st.integers(1, 8))):
        words = draw(st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=6))
        if draw(st.booleans()):
            words.insert(draw(st.integers(0, len(words))), draw(st.sampled_from(RULE_WORDS)))
            sentence = " ".join(words) + draw(st.sampled_from([".", "!", "?"]))
            rules.append(sentence)
        else:
            sentence = " ".join(words) + "."
        sentences.append(sentence)
    separator = draw(st.sampled_from([" ", "\n", "  "]))
    return separator.join(sentences), rules


@given(st.lists(user_texts(), min_size=1, max_size=4))
def test_every_rule_sentence_is_kept_verbatim_in_order(messages: list[tuple[str, list[str]]]) -> None:
    entries: list[LogEntry] = [UserMessage(text=text) for text, _ in messages]
    expected = list(dict.fromkeys(rule for _, rules in messages for rule in rules))
    ledger = update_ledger(Ledger(), entries[:1])
    ledger = update_ledger(ledger, entries[1:])
    assert list(ledger.constraints) == expected
    assert all(any(c in text for text, _ in messages) for c in ledger.constraints)


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
        "src/",
        "README.md",
        "docs/a.md",
        "notes.txt",
        "logs/app.log",
        "my file.txt",
        "src/app.py",
    )
    assert ledger.files_modified == ("src/app.py", "src/new.py")


def test_files_are_capped_to_the_most_recent() -> None:
    entries = [e for n in range(MAX_FILES + 5) for e in call(str(n), "Read", path=f"f{n}.py")]
    ledger = update_ledger(Ledger(files_read=("old.py",)), entries)
    assert len(ledger.files_read) == MAX_FILES
    assert ledger.files_read[-1] == f"f{MAX_FILES + 4}.py"
    assert "old.py" not in ledger.files_read


# --- open tasks -------------------------------------------------------------------------------------------


def test_open_tasks_from_checklists_todos_and_unanswered_requests() -> None:
    entries: list[LogEntry] = [
        UserMessage(text="Plan:\n- [ ] parse the config\n- [ ] write tests\n- [x] read the code"),
        AssistantMessage(text="TODO: handle empty files\n- [x] parse the config"),
        StateChange(key="mode", value="plan"),
        UserMessage(text="Also add a --json flag"),
    ]
    ledger = update_ledger(Ledger(), entries)
    assert ledger.open_tasks == (
        "write tests",
        "TODO: handle empty files",
        "Unanswered user request: Also add a --json flag",
    )
    ledger = update_ledger(ledger, [AssistantMessage(text="Added it.\n- [x] write tests")])
    assert ledger.open_tasks == ("TODO: handle empty files",)


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
    previous = Ledger(constraints=("Always be brief.",))
    assert update_ledger(previous, entries) == update_ledger(previous, list(entries))
    assert previous == Ledger(constraints=("Always be brief.",))
    assert update_ledger(previous, []) == previous
