"""The pre-tool-use pipeline: lookup, validation, path bounds, permission modes, rules, approval."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import msgspec
import pytest

from lamina.errors import UsageError
from lamina.tools import (
    Allow,
    Ask,
    BoundCall,
    Deny,
    PermissionMode,
    PermissionRequest,
    Rewrite,
    Rule,
    StructTool,
    ToolContext,
    ToolOutput,
    ToolPipeline,
    Verdict,
    default_tools,
)
from lamina.tools._builtin import MINI_TOOL_NAMES, mini_tools
from lamina.tools._read import ReadInput
from tests.tools.conftest import Session


class EchoInput(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    text: str
    times: int = 1


class EchoTool(StructTool[EchoInput]):
    """A tool that is not read-only and records every input it ran with."""

    name = "Echo"
    description = "Echo the text."
    input_type = EchoInput

    def __init__(self) -> None:
        self.seen: list[EchoInput] = []

    async def run(self, input: EchoInput, ctx: ToolContext) -> ToolOutput:
        self.seen.append(input)
        return ToolOutput(input.text * input.times)


class Fixed(Rule):
    """Answers the same verdict for every call and records what it saw."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        self.checked: list[BoundCall] = []
        self.finished: list[tuple[BoundCall, ToolOutput]] = []

    async def check(self, call: BoundCall) -> Verdict:
        self.checked.append(call)
        return self.verdict

    async def after(self, call: BoundCall, output: ToolOutput) -> None:
        self.finished.append((call, output))


class Approver:
    """An `ask` callback that records the requests and answers as told."""

    def __init__(self, answer: Allow | Deny) -> None:
        self.answer = answer
        self.requests: list[PermissionRequest] = []

    async def __call__(self, request: PermissionRequest) -> Allow | Deny:
        self.requests.append(request)
        return self.answer


# --- lookup and validation --------------------------------------------------------------------------


async def test_an_unknown_tool_is_an_error_result_listing_the_tools(session: Session) -> None:
    result = await session.call("Delete")
    assert result.is_error
    assert result.decision == Deny(result.content, by="lookup")
    assert result.content == "Unknown tool 'Delete'. Available tools: Read, Edit, Write, Glob, Grep, Bash, SubmitPlan."
    assert result.input is None


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        ({}, "path", "required field missing"),
        ({"path": "a.txt", "offset": "soon"}, "offset", "Expected `int | null`, got `str`"),
        ({"path": "a.txt", "offset": 0}, "offset", "Expected `int` >= 1"),
        ({"path": 7}, "path", "Expected `str`, got `int`"),
        ({"path": "a.txt", "lines": 3}, "lines", "unknown field (the fields are: path, offset, limit)"),
    ],
)
async def test_invalid_input_is_an_error_result_naming_the_field(
    session: Session, raw: dict[str, Any], field: str, words: str
) -> None:
    session.put("a.txt")
    result = await session.pipeline.execute("c", "Read", raw)
    assert result.is_error
    assert result.decision == Deny(result.content, by="validation")
    assert result.content.startswith(f"Invalid input for Read: {field}: ")
    assert words in result.content


async def test_input_that_is_not_an_object_is_an_error_result(session: Session) -> None:
    raw: Any = ["a.txt"]
    result = await session.pipeline.execute("c", "Read", raw)
    assert result.is_error
    assert "the input must be a JSON object" in result.content


async def test_rules_see_the_validated_input(session: Session) -> None:
    rule = Fixed(Allow())
    s = session.with_tools(default_tools(), rules=[rule])
    s.put("a.txt", "1\n2\n3\n")
    await s.call("Read", path="a.txt", offset="2")  # lax: a numeric string becomes an int
    (call,) = rule.checked
    assert call.input == ReadInput(path="a.txt", offset=2)
    assert call.paths == (s.root / "a.txt",)
    assert call.tool.read_only
    assert call.context is s.pipeline.context


async def test_rules_do_not_see_invalid_or_out_of_bounds_calls(session: Session) -> None:
    rule = Fixed(Allow())
    s = session.with_tools(default_tools(), rules=[rule])
    await s.call("Read", offset=1)
    await s.call("Read", path="../../etc/passwd")
    assert rule.checked == []


# --- rules --------------------------------------------------------------------------------------------


async def test_a_denied_call_still_gets_an_error_result_and_does_not_run(session: Session) -> None:
    echo = EchoTool()
    s = session.with_tools([echo], rules=[Fixed(Deny("Read the skill first."))])
    result = await s.call("Echo", text="hi")
    assert result.is_error
    assert result.content == "Read the skill first."
    assert result.decision == Deny("Read the skill first.", by="rule:Fixed")
    assert result.input == EchoInput(text="hi")
    assert echo.seen == []


async def test_the_first_deny_stops_later_rules(session: Session) -> None:
    later = Fixed(Allow())
    s = session.with_tools([EchoTool()], rules=[Fixed(Deny("no")), later])
    await s.call("Echo", text="hi")
    assert later.checked == []


async def test_a_rewrite_changes_the_input_the_tool_sees(session: Session) -> None:
    echo = EchoTool()
    seen_later = Fixed(Allow())
    rewrite = Fixed(Rewrite(EchoInput(text="rewritten", times=2)))
    s = session.with_tools([echo], rules=[rewrite, seen_later])
    result = await s.call("Echo", text="original")
    assert echo.seen == [EchoInput(text="rewritten", times=2)]
    assert result.content == "rewrittenrewritten"
    assert result.input == EchoInput(text="rewritten", times=2)
    assert seen_later.checked[0].input == EchoInput(text="rewritten", times=2)


async def test_a_rewrite_given_as_a_mapping_is_validated(session: Session) -> None:
    echo = EchoTool()
    s = session.with_tools([echo], rules=[Fixed(Rewrite({"text": "x", "times": "3"}))])
    result = await s.call("Echo", text="original")
    assert result.content == "xxx"
    with pytest.raises(UsageError, match="rule:Fixed rewrote the input of Echo to an invalid one"):
        await session.with_tools([echo], rules=[Fixed(Rewrite({"nope": 1}))]).call("Echo", text="a")


async def test_a_rewrite_is_held_to_the_path_bounds(session: Session) -> None:
    secret = session.put("secret.txt", "secret\n", base=session.outside)
    s = session.with_tools(default_tools(), rules=[Fixed(Rewrite(ReadInput(path=str(secret))))])
    s.put("a.txt")
    result = await s.call("Read", path="a.txt")
    assert result.is_error
    assert isinstance(result.decision, Deny) and result.decision.by == "path_bounds"
    assert "secret\n" not in result.content


async def test_after_hears_success_and_failure_of_allowed_calls_only(session: Session) -> None:
    rule = Fixed(Allow())
    s = session.with_tools(default_tools(), rules=[rule])
    s.put("a.txt", "x\n")
    await s.call("Read", path="a.txt")
    await s.call("Read", path="missing.txt")
    await s.call("Read", path="../outside/x")  # denied before the rules: no `after`
    assert [(call.input.path, output.is_error) for call, output in rule.finished] == [
        ("a.txt", False),
        ("missing.txt", True),
    ]


async def test_after_is_not_called_for_a_call_a_rule_denied(session: Session) -> None:
    watcher = Fixed(Allow())
    s = session.with_tools([EchoTool()], rules=[watcher, Fixed(Deny("no"))])
    await s.call("Echo", text="a")
    assert watcher.finished == []


async def test_a_rule_added_later_runs_after_the_others(session: Session) -> None:
    first, second = Fixed(Allow()), Fixed(Deny("second says no"))
    pipeline = ToolPipeline([EchoTool()], session.pipeline.context, rules=[first])
    pipeline.add_rule(second)
    assert pipeline.rules == (first, second)
    result = await pipeline.execute("c", "Echo", {"text": "a"})
    assert result.content == "second says no"
    assert len(first.checked) == 1


async def test_a_tool_that_raises_still_leaves_an_error_result(session: Session) -> None:
    class Broken(EchoTool):
        async def run(self, input: EchoInput, ctx: ToolContext) -> ToolOutput:
            raise KeyError("oops")

    result = await session.with_tools([Broken()]).call("Echo", text="a")
    assert result.is_error
    assert result.content == "Echo failed: KeyError: 'oops'"


# --- permission modes and approval ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "input"),
    [
        ("Write", {"path": "new.txt", "content": "x"}),
        ("Edit", {"path": "a.txt", "old_string": "keep", "new_string": "changed"}),
        ("Bash", {"command": "touch made-by-bash"}),
    ],
)
async def test_explore_mode_blocks_tools_that_are_not_read_only(
    session: Session, name: str, input: dict[str, Any]
) -> None:
    s = session.with_context(mode=PermissionMode.EXPLORE)
    s.put("a.txt", "keep\n")
    result = await s.pipeline.execute("c", name, input)
    assert result.is_error
    assert result.decision == Deny(result.content, by="permission_mode")
    assert f"{name} is not available in explore mode" in result.content
    assert "Read, Glob, Grep" in result.content
    assert sorted(p.name for p in s.root.iterdir()) == ["a.txt"]
    assert (s.root / "a.txt").read_text() == "keep\n"


async def test_explore_mode_runs_read_only_tools(session: Session) -> None:
    s = session.with_context(mode=PermissionMode.EXPLORE)
    s.put("a.txt", "x\n")
    assert not (await s.call("Read", path="a.txt")).is_error
    assert not (await s.call("Glob", pattern="*")).is_error
    assert not (await s.call("Grep", pattern="x")).is_error


async def test_ask_mode_calls_the_callback_and_runs_when_allowed(session: Session) -> None:
    approver = Approver(Allow())
    s = session.with_context(mode=PermissionMode.ASK, ask=approver)
    result = await s.call("Write", call_id="w1", path="a.txt", content="x")
    assert not result.is_error
    assert (s.root / "a.txt").read_text() == "x"
    (request,) = approver.requests
    assert request.asked_by == "permission_mode"
    assert request.call.call_id == "w1"
    assert request.call.name == "Write"
    assert request.question == 'Allow Write {"path":"a.txt","content":"x"}?'


async def test_ask_mode_denial_is_an_error_result_with_the_users_message(session: Session) -> None:
    s = session.with_context(mode=PermissionMode.ASK, ask=Approver(Deny("Not that file; use b.txt.")))
    result = await s.call("Write", path="a.txt", content="x")
    assert result.is_error
    assert result.decision == Deny("Not that file; use b.txt.", by="user")
    assert not (s.root / "a.txt").exists()


async def test_ask_mode_does_not_ask_for_read_only_tools(session: Session) -> None:
    approver = Approver(Deny("no"))
    s = session.with_context(mode=PermissionMode.ASK, ask=approver)
    s.put("a.txt")
    assert not (await s.call("Read", path="a.txt")).is_error
    assert approver.requests == []


async def test_ask_mode_without_a_callback_denies(session: Session) -> None:
    s = session.with_context(mode=PermissionMode.ASK, ask=None)
    result = await s.call("Bash", command="touch x")
    assert result.is_error
    assert "needs the user's approval" in result.content
    assert not (s.root / "x").exists()


async def test_the_user_approves_the_final_input_after_rules(session: Session) -> None:
    approver = Approver(Allow())
    rewrite = Fixed(Rewrite(EchoInput(text="final")))
    s = session.with_tools([EchoTool()], rules=[rewrite], mode=PermissionMode.ASK, ask=approver)
    await s.call("Echo", text="first")
    assert [r.call.input for r in approver.requests] == [EchoInput(text="final")]


async def test_the_user_is_not_asked_about_a_call_a_rule_denies(session: Session) -> None:
    approver = Approver(Allow())
    s = session.with_tools([EchoTool()], rules=[Fixed(Deny("no"))], mode=PermissionMode.ASK, ask=approver)
    await s.call("Echo", text="a")
    assert approver.requests == []


async def test_a_rule_may_ask_even_in_execute_mode(session: Session) -> None:
    approver = Approver(Deny(""))
    s = session.with_tools([EchoTool()], rules=[Fixed(Ask("Really echo?"))], ask=approver)
    result = await s.call("Echo", text="a")
    assert [(r.question, r.asked_by) for r in approver.requests] == [("Really echo?", "rule:Fixed")]
    assert result.content == "The user declined this Echo call."


async def test_switching_the_mode_applies_to_the_next_call(session: Session) -> None:
    pipeline = session.pipeline
    pipeline.context = dataclasses.replace(pipeline.context, mode=PermissionMode.EXPLORE)
    assert (await pipeline.execute("c", "Write", {"path": "a", "content": ""})).is_error
    pipeline.context = dataclasses.replace(pipeline.context, mode=PermissionMode.EXECUTE)
    assert not (await pipeline.execute("c", "Write", {"path": "a", "content": ""})).is_error


# --- tool sets and specs --------------------------------------------------------------------------------


def test_the_mini_set_is_read_edit_write_glob_grep_bash(session: Session) -> None:
    assert (
        tuple(t.spec.name for t in mini_tools()) == MINI_TOOL_NAMES == ("Read", "Edit", "Write", "Glob", "Grep", "Bash")
    )
    assert [t.spec.name for t in default_tools()] == [*MINI_TOOL_NAMES, "SubmitPlan"]
    assert [t.read_only for t in mini_tools()] == [True, False, False, True, True, False]


def test_specs_follow_registration_order_and_carry_object_schemas(session: Session) -> None:
    specs = session.pipeline.specs()
    assert [s.name for s in specs] == [*MINI_TOOL_NAMES, "SubmitPlan"]
    for spec in specs:
        assert spec.description
        assert spec.input_schema["type"] == "object"
        assert spec.input_schema["additionalProperties"] is False
        assert "$ref" not in str(spec.input_schema)
    read = specs[0].input_schema
    assert read["required"] == ["path"]
    assert read["properties"]["offset"] == {
        "description": "First line (1-based).",
        "type": "integer",
        "minimum": 1,
    }


def test_specs_cannot_be_corrupted_by_a_caller(session: Session) -> None:
    schema = session.pipeline.specs()[0].input_schema
    schema["properties"]["path"]["type"] = "integer"
    assert session.pipeline.specs()[0].input_schema["properties"]["path"]["type"] == "string"


def test_two_tools_with_one_name_are_refused(session: Session) -> None:
    with pytest.raises(UsageError, match="two tools are named 'Echo'"):
        ToolPipeline([EchoTool(), EchoTool()], session.pipeline.context)


def test_the_context_resolves_its_paths_and_defaults_its_roots(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    ctx = ToolContext(cwd=tmp_path / "link", data_dir=tmp_path / "data")
    assert ctx.cwd == (tmp_path / "real").resolve()
    assert ctx.allowed_roots == (ctx.cwd,)
    assert ctx.readable_roots == (ctx.cwd, (tmp_path / "data").resolve())
    assert ctx.mode is PermissionMode.ASK
