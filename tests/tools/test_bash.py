"""Bash: runs in cwd, reports the exit code, times out by killing the process group, caps output.

The kill tests run twice: unconfined, and in the sandbox (where a command has its own process tree).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path

import pytest

from lamina.tools import BashTool, Deny, SandboxSettings
from tests.support.sandbox import BASH_SANDBOX
from tests.tools.conftest import Session

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="POSIX shell, process groups and /proc")


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


def _token(seconds: int) -> str:
    """A `sleep` argument no other process has: `seconds` and a random fraction (found in /proc by `running`)."""
    return f"{seconds}.{uuid.uuid4().int % 10**12:012d}"


def running(token: str) -> list[int]:
    """The live processes whose command line holds `token` (inside a sandbox's own process tree too)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


async def wait_gone(token: str, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not running(token):
            return True
        await asyncio.sleep(0.02)
    return False


@pytest.fixture(params=["unconfined", "sandboxed"])
def shell(request: pytest.FixtureRequest, session: Session) -> Session:
    """The session with Bash unconfined, then in the sandbox (skipped, saying why, where there is none)."""
    bash = BashTool(sandbox=SandboxSettings(enabled=request.param == "sandboxed"))
    if (problem := bash.sandbox_notice()) is not None:
        pytest.skip(problem)
    return session.with_tools([bash])


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
async def test_a_timeout_kills_the_command(shell: Session) -> None:
    marker, token = shell.root / "finished", _token(3)
    result = await shell.call("Bash", command=f"echo started; sleep {token}; touch {marker}", timeout=1)
    # killed: the shell that would run the last step is gone (awaited, not slept through), so it never gets to it
    assert await wait_gone(token)
    assert not marker.exists()
    assert result.is_error
    assert result.content.startswith("started\n")
    assert "timed out after 1 s" in result.content


@pytest.mark.slow
async def test_a_timeout_kills_the_whole_process_group(shell: Session) -> None:
    token = _token(30)
    result = await shell.call("Bash", command=f"sleep {token} & sleep {token} & wait", timeout=1)
    assert result.is_error
    assert await wait_gone(token)


@pytest.mark.slow
async def test_cancelling_the_call_kills_the_process_group(shell: Session) -> None:
    flag, token = shell.root / "started", _token(30)
    task = asyncio.create_task(shell.call("Bash", command=f"sleep {token} & echo up > {flag}; wait"))
    while not flag.exists() or not flag.read_text().strip():
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_gone(token)


@pytest.mark.slow
async def test_cancelling_while_the_shell_starts_kills_the_process_group(shell: Session) -> None:
    # The shell runs before its pipes are connected; a cancel in that window must still kill its group.
    flag, token = shell.root / "started", _token(300)
    task = asyncio.create_task(shell.call("Bash", command=f"sleep {token} & echo up > {flag}; wait"))
    for _ in range(10_000):
        await asyncio.sleep(0)  # one loop step at a time, so the start is caught half-way
        waited = time.monotonic()
        while not (flag.exists() and flag.read_text().strip()) and time.monotonic() - waited < 0.5:
            time.sleep(0.01)  # blocks the loop on purpose: the start cannot complete meanwhile
        if flag.exists() and flag.read_text().strip():
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(60):  # a hang bound, not a speed check: the old code waited the sleep out
            await task
    assert await wait_gone(token)


@pytest.mark.slow
async def test_a_background_process_holding_the_output_does_not_block_the_call(session: Session) -> None:
    unconfined = SandboxSettings(enabled=False)  # in the sandbox a background process ends with its command
    s = session.with_tools([BashTool(drain_seconds=1.0, sandbox=unconfined)])  # slack for a loaded machine
    pid_file = session.root / "bg.pid"
    result = await s.call("Bash", command=f"sleep 30 & echo $! > {pid_file}; echo main", timeout=20)
    try:
        assert alive(int(pid_file.read_text()))  # the call returned while the background job still ran
        assert result.content.startswith("main\n")
        assert "background processes still running" in result.content
    finally:
        os.kill(int(pid_file.read_text()), 9)


async def test_huge_output_keeps_head_and_tail_with_a_note(session: Session) -> None:
    s = session.with_tools([BashTool(max_output_bytes=4_000, sandbox=BASH_SANDBOX)])
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
