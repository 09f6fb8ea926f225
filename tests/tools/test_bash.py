"""Bash: runs in cwd, reports the exit code, times out by killing the process group, caps output."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from lamina.tools import BashTool, Deny
from tests.tools.conftest import Session

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell and process groups")


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its new parent to reap it does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


async def wait_dead(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        await asyncio.sleep(0.02)
    return False


async def test_the_command_runs_in_the_session_cwd(session: Session) -> None:
    result = await session.call("Bash", command="pwd")
    assert not result.is_error
    assert result.content == f"{session.root}\n[exit code 0]"


async def test_stdout_and_stderr_are_combined_and_the_exit_code_reported(session: Session) -> None:
    result = await session.call("Bash", command="echo out; echo err >&2; exit 3")
    assert not result.is_error  # a failing command is a normal result; the model reads the code
    assert result.content == "out\nerr\n[exit code 3]"


async def test_there_is_no_stdin(session: Session) -> None:
    result = await session.call("Bash", command="cat; echo done")
    assert result.content == "done\n[exit code 0]"


@pytest.mark.slow
async def test_a_timeout_kills_the_command(session: Session) -> None:
    marker, pid_file = session.root / "finished", session.root / "shell.pid"
    command = f"echo started; echo $$ > {pid_file}; sleep 3; touch {marker}"
    result = await session.call("Bash", command=command, timeout=1)
    # killed: the shell that would run the last step is gone (awaited, not slept through), so it never gets to it
    assert await wait_dead(int(pid_file.read_text()))
    assert not marker.exists()
    assert result.is_error
    assert result.content.startswith("started\n")
    assert "timed out after 1 s" in result.content


@pytest.mark.slow
async def test_a_timeout_kills_the_whole_process_group(session: Session) -> None:
    pid_file = session.root / "child.pid"
    result = await session.call("Bash", command=f"sleep 30 & echo $! > {pid_file}; wait", timeout=1)
    assert result.is_error
    assert await wait_dead(int(pid_file.read_text()))


async def test_cancelling_the_call_kills_the_process_group(session: Session) -> None:
    pid_file = session.root / "child.pid"
    task = asyncio.create_task(session.call("Bash", command=f"sleep 30 & echo $! > {pid_file}; wait"))
    while not pid_file.exists() or not pid_file.read_text().strip():
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_dead(int(pid_file.read_text()))


@pytest.mark.slow
async def test_cancelling_while_the_shell_starts_kills_the_process_group(session: Session) -> None:
    # The shell runs before its pipes are connected; a cancel in that window must still kill its group.
    pid_file = session.root / "child.pid"
    task = asyncio.create_task(session.call("Bash", command=f"sleep 300 & echo $! > {pid_file}; wait"))
    for _ in range(10_000):
        await asyncio.sleep(0)  # one loop step at a time, so the start is caught half-way
        waited = time.monotonic()
        while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() - waited < 0.5:
            time.sleep(0.01)  # blocks the loop on purpose: the start cannot complete meanwhile
        if pid_file.exists() and pid_file.read_text().strip():
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(60):  # a hang bound, not a speed check: the old code waited the sleep out
            await task
    assert await wait_dead(int(pid_file.read_text()))


@pytest.mark.slow
async def test_a_background_process_holding_the_output_does_not_block_the_call(session: Session) -> None:
    s = session.with_tools([BashTool(drain_seconds=1.0)])  # slack for a loaded machine, not a time limit
    pid_file = session.root / "bg.pid"
    result = await s.call("Bash", command=f"sleep 30 & echo $! > {pid_file}; echo main", timeout=20)
    try:
        assert alive(int(pid_file.read_text()))  # the call returned while the background job still ran
        assert result.content.startswith("main\n")
        assert "background processes still running" in result.content
    finally:
        os.kill(int(pid_file.read_text()), 9)


async def test_huge_output_keeps_head_and_tail_with_a_note(session: Session) -> None:
    s = session.with_tools([BashTool(max_output_bytes=4_000)])
    result = await s.call("Bash", command="seq 1 200000")
    lines = result.content.splitlines()
    assert lines[:3] == ["1", "2", "3"]
    assert lines[-2:] == ["200000", "[exit code 0]"]
    omitted = len("".join(f"{i}\n" for i in range(1, 200_001))) - 4_000
    assert f"[… {omitted:,} bytes of output omitted from the middle …]" in lines
    assert len(result.content) < 4_200


async def test_a_timeout_above_the_maximum_is_a_validation_error(session: Session) -> None:
    s = session.with_tools([BashTool(max_timeout=10)])
    result = await s.call("Bash", command="true", timeout=11)
    assert result.is_error
    assert isinstance(result.decision, Deny) and result.decision.by == "validation"
    assert "timeout: at most 10 seconds" in result.content


async def test_the_spec_states_the_timeout_maximum(session: Session) -> None:
    spec = BashTool(max_timeout=42).spec
    assert spec.input_schema["properties"]["timeout"]["maximum"] == 42
    assert "at most 42" in spec.description


async def test_no_output_says_so(session: Session) -> None:
    result = await session.call("Bash", command="true")
    assert result.content == "(no output)\n[exit code 0]"


async def test_output_is_decoded_as_utf8_even_when_invalid(session: Session) -> None:
    result = await session.call("Bash", command=r"printf 'caf\xc3\xa9 \xff\n'")
    assert result.content == "café \ufffd\n[exit code 0]"
