"""The Bash sandbox, with real commands in bubblewrap: what a confined command can and cannot write or reach.

Every test here runs real processes (slow). Where this machine cannot make a sandbox (no bubblewrap,
or the kernel refuses user namespaces) the confinement tests skip, naming why; the fallback tests
run everywhere.
"""

from __future__ import annotations

import os
import queue
import shutil
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lamina.tools import BashTool, SandboxSettings
from tests.tools.conftest import Session

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Bash sandbox is bubblewrap, on Linux"),
]

PROBLEM = BashTool().sandbox_notice()
needs_sandbox = pytest.mark.skipif(PROBLEM is not None, reason=f"no sandbox on this machine: {PROBLEM}")


def confined(session: Session, **settings: object) -> Session:
    return session.with_tools([BashTool(sandbox=SandboxSettings(**settings))])  # type: ignore[arg-type]


@pytest.fixture
def repo(session: Session) -> Session:
    """The session's workspace as a git repository with a `.lamina/config.toml` and a sources folder."""
    subprocess.run(["git", "init", "-q", str(session.root)], check=True)
    session.put(".lamina/config.toml", 'mode = "ask"\n')
    session.put("sources/docs/source.toml", 'kind = "mcp"\n')
    return session


@needs_sandbox
async def test_the_workspace_and_the_session_data_folder_are_writable(session: Session) -> None:
    session.data.mkdir()
    s = confined(session)
    result = await s.call("Bash", command=f"mkdir -p src && echo hi > src/a.txt && echo log > {session.data}/b.txt")
    assert result.content == "(no output)\n[exit code 0]"
    assert (session.root / "src" / "a.txt").read_text() == "hi\n"
    assert (session.data / "b.txt").read_text() == "log\n"


@needs_sandbox
async def test_writing_outside_the_workspace_fails(session: Session) -> None:
    s = confined(session)
    beside_python = _host_folder() / f"lamina-sandbox-probe-{os.getpid()}"  # a real folder, not /tmp
    try:
        result = await s.call("Bash", command=f"touch {beside_python}")
        assert "Read-only file system" in result.content
        assert not beside_python.exists()
    finally:
        beside_python.unlink(missing_ok=True)
    # next to the workspace (under /tmp here): the command has a /tmp of its own, so nothing reaches the host
    result = await s.call("Bash", command=f"mkdir -p {session.outside} && echo x > {session.outside}/f")
    assert not (session.outside / "f").exists()


@needs_sandbox
@pytest.mark.parametrize(
    "command",
    [
        "echo '[core]\n\tfsmonitor = touch pwned' >> .git/config",
        "echo 'touch pwned' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
        "echo '* filter=x' > .git/info/attributes",
        "echo ../evil > .git/commondir",  # git would read ../evil/config
        "git update-index --add --cacheinfo 160000,4b825dc642cb6eb9a060e54bf8d69288fbee4904,sub",  # a submodule
        "mkdir -p .git/modules/sub && echo '[core]' > .git/modules/sub/config",
        "echo 'mode = \"execute\"' > .lamina/config.toml",
        "mkdir -p .lamina/skills/x",
        "echo 'command = \"touch pwned\"' > sources/docs/source.toml",
        "mkdir sources/evil",
        "mv .git .git-old && mkdir .git",
        "mv .lamina .lamina-old && mkdir .lamina",
        "rm -rf .git",
    ],
)
async def test_git_lamina_and_sources_stay_read_only(repo: Session, command: str) -> None:
    # from a script, which the shell reader cannot see into: the kernel alone stands in the way (the
    # reader asks about the same command written out: tests/tools/test_protected.py)
    repo.put("run.sh", command + "\n")
    before = {p: p.read_bytes() for p in repo.root.rglob("*") if p.is_file()}
    result = await confined(repo).call("Bash", command="bash run.sh")
    assert "[exit code 0]" not in result.content
    assert "Read-only file system" in result.content or "busy" in result.content
    assert {p: p.read_bytes() for p in repo.root.rglob("*") if p.is_file()} == before
    assert not (repo.root / ".git-old").exists() and not (repo.root / ".lamina-old").exists()


@needs_sandbox
async def test_git_reads_work_and_its_writes_are_refused(repo: Session) -> None:
    repo.put("a.txt", "a\n")
    reads = await confined(repo).call("Bash", command="git status --short && git diff && git log --oneline -1 || true")
    assert "?? a.txt" in reads.content
    repo.put("run.sh", "git add a.txt\n")  # past the shell reader, to the kernel
    commit = await confined(repo).call("Bash", command="bash run.sh")
    assert "index.lock': Read-only file system" in commit.content


@needs_sandbox
async def test_a_missing_lamina_folder_cannot_be_made_by_a_command(session: Session) -> None:
    session.put("run.sh", "mkdir -p .lamina && echo 'mode = \"execute\"' > .lamina/c\n")  # past the reader
    result = await confined(session).call("Bash", command="bash run.sh")
    assert "Read-only file system" in result.content
    assert list((session.root / ".lamina").iterdir()) == []  # made empty by Lamina, before the command


@pytest.fixture
def listener() -> Iterator[tuple[int, queue.Queue[bytes]]]:
    """A TCP server on a loopback port of the host: its port, and what each connection sent (as its thread reads it)."""
    server = socket.create_server(("127.0.0.1", 0))
    heard: queue.Queue[bytes] = queue.Queue()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                heard.put(conn.recv(100))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], heard
    server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept (closing alone leaves it waiting)
    server.close()
    thread.join(5)
    assert not thread.is_alive()


@needs_sandbox
async def test_there_is_no_network_unless_allowed(session: Session, listener: tuple[int, queue.Queue[bytes]]) -> None:
    port, heard = listener
    command = f"echo hello >/dev/tcp/127.0.0.1/{port} && echo sent"
    refused = await confined(session).call("Bash", command=command)
    assert "sent" not in refused.content and "Connection refused" in refused.content
    allowed = await confined(session, network=True).call("Bash", command=command)
    assert allowed.content == "sent\n[exit code 0]"
    # the server's thread reads the connection on its own time: wait for it (a loaded machine is slow to schedule it)
    assert heard.get(timeout=30) == b"hello\n" and heard.empty()


@needs_sandbox
async def test_unix_sockets_are_refused_unless_the_network_is_allowed(session: Session) -> None:
    path = session.root / "agent.sock"  # a local service's socket the command can see (as it sees /run)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    try:
        code = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({str(path)!r}); print('connected')"
        command = f"{_python()} -c {_quote(code)}"
        refused = await confined(session).call("Bash", command=command)
        # the line it prints when connected (from 3.13 on, the traceback quotes the -c source, print included)
        assert "PermissionError" in refused.content and "connected" not in refused.content.splitlines()
        allowed = await confined(session, network=True).call("Bash", command=command)
        assert allowed.content == "connected\n[exit code 0]"
    finally:
        server.close()


def _outside_tmp(path: str | None) -> bool:
    return path is not None and not Path(path).resolve().is_relative_to("/tmp")  # the sandbox has its own /tmp


def _host_folder() -> Path:
    """A folder of the host that this process may write and a sandboxed command can see (not under /tmp)."""
    for folder in (Path(sys.executable).parent, Path.home(), Path.cwd()):
        if _outside_tmp(str(folder)) and os.access(folder, os.W_OK):
            return folder
    pytest.skip("no writable folder outside /tmp to try")


def _python() -> str:
    """A Python a sandboxed command can run (this one, unless it lives under /tmp, hidden in the sandbox)."""
    found = next((p for p in (sys.executable, shutil.which("python3")) if _outside_tmp(p)), None)
    if found is None:
        pytest.skip("every Python here lives under /tmp, which the sandbox replaces with its own")
    return str(Path(found).resolve())  # a venv's link may itself be under /tmp


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


@needs_sandbox
async def test_the_environment_has_no_keys(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai-0123456789")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_0123456789abcdefghij")
    monkeypatch.setenv("DATABASE_URL", "postgresql://app:hunter2@db/app")
    monkeypatch.setenv("LAMINA_SANDBOX_TEST_PLAIN", "kept")
    result = await confined(session).call("Bash", command="env")
    names = {line.partition("=")[0] for line in result.content.splitlines()}
    assert not names & {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GITHUB_TOKEN", "DATABASE_URL"}
    assert {"PATH", "HOME", "LAMINA_SANDBOX_TEST_PLAIN"} <= names
    assert "sk-test" not in result.content and "hunter2" not in result.content
    assert "TMPDIR=/tmp" in result.content.splitlines()


@needs_sandbox
async def test_a_command_has_no_capabilities_and_cannot_remount(session: Session) -> None:
    result = await confined(session).call("Bash", command="grep CapEff /proc/self/status; mount -o remount,rw /")
    assert "CapEff:\t0000000000000000" in result.content
    assert "[exit code 0]" not in result.content


@needs_sandbox
async def test_a_command_sees_only_its_own_processes(session: Session) -> None:
    result = await confined(session).call("Bash", command=f"kill -0 {os.getpid()} && echo reached")
    assert "reached" not in result.content  # Lamina's own process is not there to signal (or to trace)


@needs_sandbox
async def test_a_background_process_ends_with_its_command(session: Session) -> None:
    from tests.tools.test_bash import _token, wait_gone

    token = _token(300)
    result = await confined(session).call("Bash", command=f"(setsid sleep {token} &) ; echo main", timeout=20)
    assert result.content == "main\n[exit code 0]"
    assert await wait_gone(token)


@needs_sandbox
def test_the_model_is_told_of_the_sandbox() -> None:
    assert BashTool().spec.description.endswith(" Sandboxed: no network; cwd writable, not .git.")
    assert BashTool(sandbox=SandboxSettings(network=True)).spec.description.endswith(
        " Sandboxed: network on; cwd writable, not .git."
    )


@needs_sandbox
async def test_extra_writable_folders_from_the_settings(session: Session, tmp_path: Path) -> None:
    extra = tmp_path / "cache"
    extra.mkdir()
    result = await confined(session, writable=(extra,)).call("Bash", command=f"echo c > {extra}/x")
    assert result.content == "(no output)\n[exit code 0]"
    assert (extra / "x").read_text() == "c\n"


async def test_without_bubblewrap_commands_run_unconfined_and_it_says_why(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai-0123456789")
    bash = BashTool(sandbox=SandboxSettings(program="lamina-no-such-bwrap"))
    notice = bash.sandbox_notice()
    assert notice is not None and "lamina-no-such-bwrap" in notice and "apt-get install bubblewrap" in notice
    assert "sandbox" not in bash.spec.description.lower()  # the model is not told of a sandbox it does not have
    s = session.with_tools([bash])
    result = await s.call("Bash", command=f"echo out > {session.outside}/f; env")
    assert (session.outside / "f").read_text() == "out\n"  # today's behaviour: unconfined
    assert "OPENAI_API_KEY" not in result.content  # but the environment is still cleaned


@pytest.fixture
def refusing_bwrap(tmp_path: Path) -> Path:
    """bubblewrap run where the kernel refuses new user namespaces (a namespace whose limit is 0)."""
    real = next((p for p in ("/usr/bin/bwrap", "/bin/bwrap") if os.access(p, os.X_OK)), None)
    if real is None:
        pytest.skip("bubblewrap is not installed, so there is none to refuse")
    test = subprocess.run(["unshare", "-U", "-r", "true"], capture_output=True)
    if test.returncode != 0:
        pytest.skip(f"cannot make a user namespace to set its limit: {test.stderr.decode().strip()}")
    wrapper = tmp_path / "bwrap"
    limit = "echo 0 > /proc/sys/user/max_user_namespaces"
    wrapper.write_text(f'#!/bin/sh\nexec unshare -U -r sh -c \'{limit} && exec {real} "$@"\' sh "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


async def test_when_the_kernel_refuses_namespaces_it_says_so(session: Session, refusing_bwrap: Path) -> None:
    bash = BashTool(sandbox=SandboxSettings(program=str(refusing_bwrap)))
    notice = bash.sandbox_notice()
    assert notice is not None and "user namespaces" in notice and "max_" in notice  # bubblewrap's own words
    s = session.with_tools([bash])
    first = await s.call("Bash", command=f"echo out > {session.outside}/f")
    assert first.content == f"(no output)\n[exit code 0; {notice}]"  # nobody listens for the notice: the result says it
    assert (session.outside / "f").exists()
    second = await s.call("Bash", command="true")
    assert second.content == "(no output)\n[exit code 0]"  # once


async def test_turned_off_there_is_no_notice_and_no_confinement(session: Session) -> None:
    bash = BashTool(sandbox=SandboxSettings(enabled=False, program="lamina-no-such-bwrap"))
    assert bash.sandbox_notice() is None
    result = await session.with_tools([bash]).call("Bash", command=f"echo out > {session.outside}/f")
    assert (session.outside / "f").read_text() == "out\n"
    assert result.content == "(no output)\n[exit code 0]"


async def test_the_notice_goes_to_a_listener_once_and_not_into_the_results(session: Session) -> None:
    heard: list[str] = []
    bash = BashTool(sandbox=SandboxSettings(program="lamina-no-such-bwrap"), on_notice=heard.append)
    s = session.with_tools([bash])
    results = [await s.call("Bash", command="true") for _ in range(2)]
    assert [r.content for r in results] == ["(no output)\n[exit code 0]"] * 2
    assert heard == [bash.sandbox_notice()]


def test_under_ci_bubblewrap_is_installed() -> None:
    if not os.environ.get("CI"):
        pytest.skip("checked under CI only, where `make test` installs Debian's bubblewrap as root")
    assert shutil.which("bwrap") is not None, "no bubblewrap: `make test` installs it (Debian's bubblewrap package)"
