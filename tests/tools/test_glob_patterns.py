"""Any pattern a model writes for Glob or Grep's filter matches as documented or is one error result, never raised."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lamina.tools import OffloadPolicy, PermissionMode, ToolContext, ToolPipeline, default_tools
from tests.support.sandbox import BASH_SANDBOX
from tests.tools.conftest import Session

FILES = ("a.py", "b].txt", "]", "sub/c.py", "sub/.hidden.md", "x1.md")


def _pipeline(root: Path) -> ToolPipeline:
    for name in FILES:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("text\n", encoding="utf-8")
    ctx = ToolContext(cwd=root, data_dir=root.parent / "data", mode=PermissionMode.EXPLORE, offload=OffloadPolicy())
    return ToolPipeline(default_tools(sandbox=BASH_SANDBOX), ctx)


async def test_a_bracket_first_in_a_class_is_a_member_not_a_crash(session: Session) -> None:
    for name in ("]", "a", "b"):
        session.put(name)
    result = await session.call("Glob", pattern="[]a]")
    assert not result.is_error
    assert result.content.splitlines() == ["]", "a"]


async def test_negated_and_posix_classes_match_as_in_bash(session: Session) -> None:
    for name in ("]", "a", "1"):
        session.put(name)
    assert (await session.call("Glob", pattern="[!]]")).content.splitlines() == ["1", "a"]
    assert (await session.call("Glob", pattern="[[:alpha:]]")).content.splitlines() == ["a"]


async def test_grep_filters_by_the_same_dialect(session: Session) -> None:
    session.put("]", "needle\n")
    session.put("a", "needle\n")
    session.put("b", "needle\n")
    result = await session.call("Grep", pattern="needle", glob="[]a]", output_mode="files_with_matches")
    assert result.content.splitlines() == ["]", "a"]


async def test_a_pattern_expanding_too_far_is_one_error_result(session: Session) -> None:
    result = await session.call("Glob", pattern="{1..100000}")
    assert result.is_error
    assert "more than 1,000 alternatives" in result.content


_PATTERN = st.text(alphabet=st.sampled_from("ab]/*?[{},.!^:-\\1"), min_size=1, max_size=20) | st.text(min_size=1)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=_PATTERN, tool=st.sampled_from(["Glob", "Grep"]))
def test_any_pattern_is_a_result_never_an_exception(pattern: str, tool: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder, "project")
        root.mkdir()
        pipeline = _pipeline(root.resolve())
        raw = {"pattern": pattern} if tool == "Glob" else {"pattern": "text", "glob": pattern}
        result = asyncio.run(pipeline.execute("call-1", tool, raw))
    assert isinstance(result.content, str)
    if result.is_error:
        assert result.content.strip()
