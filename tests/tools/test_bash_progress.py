"""Bash reports its output to the context's `progress` as the command writes it, not when it ends."""

from __future__ import annotations

import sys

import pytest

from tests.support.sandbox import BASH_SANDBOX
from tests.tools.conftest import Session

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell")


async def test_output_is_reported_while_the_command_runs(session: Session) -> None:
    gate = session.root / "go"
    heard: list[str] = []

    def progress(output: str) -> None:
        heard.append(output)
        if "ready" in "".join(heard):  # the command waits for this: it is heard while it runs, or it times out
            gate.touch()

    session = session.with_context(progress=progress)
    result = await session.call(
        "Bash", command="echo ready; while [ ! -e go ]; do sleep 0.05; done; echo gone", timeout=20
    )
    assert not result.is_error, result.content
    assert heard[0] == ""  # the pipeline's word that the tool runs now
    assert "".join(heard) == "ready\ngone\n"
    assert result.content == "ready\ngone\n[exit code 0]"


async def test_progress_gets_all_of_the_output_whatever_the_cap(session: Session) -> None:
    from lamina.tools import BashTool

    heard: list[str] = []
    session = session.with_tools([BashTool(max_output_bytes=64, sandbox=BASH_SANDBOX)], progress=heard.append)
    result = await session.call("Bash", command="for i in $(seq 1 200); do echo line $i; done")
    assert "bytes of output omitted" in result.content  # the model gets the head and the tail
    assert "".join(heard).splitlines() == [f"line {i}" for i in range(1, 201)]


async def test_a_split_character_is_reported_whole(session: Session) -> None:
    heard: list[str] = []
    session = session.with_context(progress=heard.append)
    await session.call("Bash", command="printf '\\xc3'; sleep 0.2; printf '\\xa9\\n'")
    assert "".join(heard) == "é\n"


async def test_a_refused_call_reports_nothing(session: Session) -> None:
    from lamina.tools import PermissionMode

    heard: list[str] = []
    session = session.with_context(progress=heard.append, mode=PermissionMode.EXPLORE)
    result = await session.call("Bash", command="echo hi")
    assert result.is_error and heard == []
