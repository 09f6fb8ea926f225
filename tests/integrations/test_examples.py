"""Each framework example, run as a user would: two processes (the second resumes), a tool, a compaction.

With no arguments, each runs in a temporary store it removes, and prints its questions and answers.

Every model call the framework made is checked as the model received it: Lamina's stable parts
first (system rules, then the project's AGENTS.md), the turn's volatile tail at the end of the
newest user message, tool output neutralised, and after the compaction the summary and the user's
own earlier messages verbatim.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lamina.integrations._thread import RULES

ROOT = Path(__file__).parents[2]
EXAMPLES = ROOT / "examples"


@dataclass
class Request:
    """One model call in a shape common to the three frameworks."""

    system: str
    messages: list[tuple[str, list[str]]]
    """(role, texts) in order; `role` is user, assistant or tool."""

    @property
    def text(self) -> str:
        return self.system + "\n".join(t for _, texts in self.messages for t in texts)


def _agents(raw: dict[str, Any]) -> Request:
    messages: list[tuple[str, list[str]]] = []
    for item in raw["input"]:
        if item.get("type") == "function_call_output":
            messages.append(("tool", [item["output"]]))
        elif item.get("type") == "function_call":
            messages.append(("assistant", [item["arguments"]]))
        else:
            content = item["content"]
            texts = [content] if isinstance(content, str) else [p["text"] for p in content]
            messages.append((item["role"], texts))
    return Request(raw["instructions"] or "", messages)


def _pydantic_ai(raw: dict[str, Any]) -> Request:
    messages: list[tuple[str, list[str]]] = []
    for message in raw["messages"]:
        for part in message["parts"]:
            kind = part["part_kind"]
            if kind == "user-prompt":
                if messages and messages[-1][0] == "user":
                    messages[-1][1].append(part["content"])
                else:
                    messages.append(("user", [part["content"]]))
            elif kind == "tool-return":
                messages.append(("tool", [part["content"]]))
            else:
                messages.append(("assistant", [json.dumps(part.get("content") or part.get("args"))]))
    return Request(raw["instructions"] or "", messages)


def _langgraph(raw: dict[str, Any]) -> Request:
    system = ""
    messages: list[tuple[str, list[str]]] = []
    roles = {"human": "user", "ai": "assistant", "tool": "tool"}
    for message in raw["messages"]:
        content = message["content"]
        texts = [content] if isinstance(content, str) else [p["text"] for p in content]
        if message["type"] == "system":
            system += "\n".join(texts)
        else:
            messages.append((roles[message["type"]], texts))
    return Request(system, messages)


FRAMEWORKS = {
    "openai_agents_session": _agents,
    "pydantic_ai_history": _pydantic_ai,
    "langgraph_checkpointer": _langgraph,
}


def _run(example: str, store: Path, *options: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{example}.py"), str(store), "--json", *options],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _check_call(call: Request, *, first_of_turn: bool) -> None:
    """One model call as the model received it: the stable prefix first, tool output neutralised, the tail last."""
    # the stable prefix first: Lamina's rules in the system text, the project's AGENTS.md opening the input
    assert RULES.text in call.system
    assert call.messages[0][0] == "user"
    assert call.messages[0][1][0].startswith('<untrusted source="AGENTS.md" authority="project_file">')
    # tool output is data: neither a block closer nor a role marker survives
    assert "<|im_start|>" not in call.text and "</untrusted> <|" not in call.text
    if first_of_turn:  # the first call of a turn: the newest user message ends with the turn's tail
        role, texts = call.messages[-1]
        assert role == "user"
        assert texts[-1].startswith("<date_time>"), texts[-1]
        assert texts[-2].startswith("What is the weather in city")
    else:  # the tool loop: the tail stays where it was, the tool output comes last
        assert call.messages[-1][0] == "tool"
        assert "[U+003C]|im_start|>" in call.messages[-1][1][0]


@pytest.mark.slow
@pytest.mark.parametrize("example", sorted(FRAMEWORKS))
def test_example_runs_a_tool_compacts_and_resumes_in_a_new_process(example: str, tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = _run(example, store, "--turns", "4")
    second = _run(example, store, "--resume", first["session_id"], "--first-turn", "4", "--turns", "3")
    assert second["session_id"] == first["session_id"]
    assert len(first["answers"]) == 4 and len(second["answers"]) == 3
    assert all(a.startswith("Sunny in city") for a in first["answers"] + second["answers"])
    convert = FRAMEWORKS[example]
    calls = [convert(r) for r in first["requests"]] + [convert(r) for r in second["requests"]]
    assert len(calls) == 14  # a tool call and an answer per turn

    for index, call in enumerate(calls):
        _check_call(call, first_of_turn=index % 2 == 0)

    # the second process starts from the first one's history
    resumed = calls[8]
    assert "city 3" in resumed.text
    # a compaction ran, and the user's own words survived it verbatim, in order, in the lane
    assert first["compacted"] or second["compacted"]
    last = calls[-1]
    assert "<compaction_summary>" in last.text and "<pinned>" in last.text
    pinned = last.text[last.text.index("<pinned>") :]
    assert pinned.index("Rule 0: keep answers under 10 words.") < pinned.index("Rule 1: keep answers under 11 words.")


@pytest.mark.slow
@pytest.mark.parametrize("example", sorted(FRAMEWORKS))
def test_example_runs_with_no_arguments_in_a_temporary_store(example: str, tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TMPDIR": str(temp)}
    env.pop("LAMINA_STORE", None)
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{example}.py")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("session ") and "a temporary store (removed now" in lines[0]
    for turn in range(3):  # three turns by default, each a question, a tool call and the answer
        assert f"  turn {turn}: What is the weather in city {turn}?" in lines[1 + 2 * turn]
        assert lines[2 + 2 * turn] == f"    answer: Sunny in city {turn}, 21 C."
    assert lines[7] in ("compaction ran: yes", "compaction ran: no")
    assert lines[8].startswith("model calls: 6,")
    assert list(temp.iterdir()) == []  # the temporary store and its workspace are gone
    assert [p.name for p in tmp_path.iterdir()] == ["tmp"]  # nothing written where it ran


@pytest.mark.slow
def test_an_example_refuses_resume_without_a_store() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, str(EXAMPLES / "pydantic_ai_history.py"), "--resume", "20260101-000000-abcdef"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=240, check=False)
    assert done.returncode == 2 and "--resume needs the store the session is in" in done.stderr
