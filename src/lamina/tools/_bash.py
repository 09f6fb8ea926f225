"""Bash: run a shell command in the session's working directory (I/O: processes).

The command runs under `bash -c` in cwd, in a process group of its own that a timeout kills
whole; stdout and stderr are combined, capped at `max_output_bytes` (head and tail), and reported
as they come to the context's `progress`. On Linux it runs in the sandbox (`SandboxSettings`,
bubblewrap) where the machine allows it. See docs/tools.md, "Bash", and docs/security.md.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final

import msgspec

from lamina.context import ToolSpec
from lamina.errors import UsageError
from lamina.tools._base import StructTool, ToolContext, ToolInputError, ToolOutput
from lamina.tools._environment import clean_environment
from lamina.tools._sandbox import SandboxSettings, confine, sandbox_problem

DEFAULT_TIMEOUT: Final = 120.0
MAX_TIMEOUT: Final = 600.0
DEFAULT_MAX_OUTPUT_BYTES: Final = 256 * 1024
DRAIN_SECONDS: Final = 1.0
"""After the shell exits, how long to wait for background processes that still hold its output."""
_KILL_WAIT: Final = 5.0


class BashInput(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    command: Annotated[str, msgspec.Meta(min_length=1)]
    timeout: Annotated[float, msgspec.Meta(gt=0, description="Seconds before it is killed.")] | None = None


class BashTool(StructTool[BashInput]):
    """Runs a shell command in the session's working directory."""

    name = "Bash"
    input_type = BashInput

    def __init__(
        self,
        *,
        default_timeout: float = DEFAULT_TIMEOUT,
        max_timeout: float = MAX_TIMEOUT,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        drain_seconds: float = DRAIN_SECONDS,
        sandbox: SandboxSettings | None = None,
        on_notice: Callable[[str], None] | None = None,
    ) -> None:
        """Set up the tool.

        Args:
            default_timeout: Seconds a call runs when it sets no `timeout`.
            max_timeout: The most a call may set.
            max_output_bytes: The output kept (head and tail).
            drain_seconds: After the shell exits, how long to wait for background processes holding its output.
            sandbox: How commands are confined; None: `SandboxSettings()` (confined where the machine allows it).
            on_notice: Hears `sandbox_notice()` once, as the first command runs unconfined although the
                sandbox is enabled (the agent turns it into a warning event); settable later.

        Raises:
            UsageError: A size or a timeout is out of range.
        """
        if max_output_bytes < 2 or default_timeout <= 0 or max_timeout <= 0:
            raise UsageError(
                "need max_output_bytes >= 2 and positive timeouts, got "
                f"{max_output_bytes=}, {default_timeout=}, {max_timeout=}"
            )
        self.max_timeout = max_timeout
        self.default_timeout = min(default_timeout, max_timeout)
        self.max_output_bytes = max_output_bytes
        self.drain_seconds = drain_seconds
        self.sandbox = SandboxSettings() if sandbox is None else sandbox
        self.on_notice = on_notice
        self._checked = False
        self._description = (
            "Run a bash command in the working directory (no stdin); returns stdout and stderr together and the "
            f"exit code. Killed after timeout seconds (default {self.default_timeout:g}, at most {max_timeout:g})."
        )

    @property
    def description(self) -> str:  # type: ignore[override]  # worked out from the sandbox's state
        if not self.sandbox.enabled or sandbox_problem(self.sandbox) is not None:
            return self._description
        network = "network on" if self.sandbox.network else "no network"
        return f"{self._description} Sandboxed: {network}; cwd writable, not .git."  # short: every request carries it

    def sandbox_notice(self) -> str | None:
        """Why commands run unconfined although the sandbox is enabled, or None (confined, or turned off).

        The first call tries bubblewrap once (a short process); later calls reuse the answer.
        """
        problem = sandbox_problem(self.sandbox)
        if problem is None:
            return None
        return (
            f"Bash runs without its sandbox: {problem}. Commands can write wherever you can and reach the network; "
            "turning the sandbox off ([sandbox] enabled = false) runs them so without this notice."
        )

    async def _first_notice(self) -> str:
        """On the first call: tell `on_notice` that commands run unconfined, or the result says it (nobody listens)."""
        if not self.sandbox.enabled or self._checked:
            return ""
        notice = await asyncio.to_thread(self.sandbox_notice)  # the first call tries bubblewrap: not on the loop
        self._checked = True
        if notice is None:
            return ""
        if self.on_notice is None:
            return notice
        self.on_notice(notice)  # never unconfined silently
        return ""

    @property
    def spec(self) -> ToolSpec:
        base = super().spec
        schema = dict(base.input_schema)
        properties = dict(schema["properties"])
        properties["timeout"] = {**properties["timeout"], "maximum": self.max_timeout}
        schema["properties"] = properties
        return ToolSpec(name=base.name, description=base.description, input_schema=schema)

    def validate(self, raw: Mapping[str, Any]) -> BashInput:
        input = super().validate(raw)
        if input.timeout is not None and input.timeout > self.max_timeout:
            raise ToolInputError("timeout", f"at most {self.max_timeout:g} seconds, got {input.timeout:g}")
        return input

    async def run(self, input: BashInput, ctx: ToolContext) -> ToolOutput:
        timeout = min(input.timeout or self.default_timeout, self.max_timeout)
        unconfined = await self._first_notice()
        output = _ProcessOutput(self.max_output_bytes, ctx.progress)
        loop = asyncio.get_running_loop()
        spawn = asyncio.ensure_future(_spawn(loop, output, input.command, ctx, self.sandbox))
        try:
            transport, _ = await asyncio.shield(spawn)
        except OSError as exc:
            return ToolOutput(f"Could not start the shell: {exc.strerror or exc}", is_error=True)
        except asyncio.CancelledError:
            # The shell may already run the command while its pipes are still being connected;
            # cancelling the start would kill only the shell, so finish it and take the group down.
            with contextlib.suppress(Exception):
                started, _ = await spawn
                _kill_group(started)
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(asyncio.shield(output.exited), _KILL_WAIT)
                started.close()
            raise
        timed_out = detached = False
        try:
            try:
                await asyncio.wait_for(asyncio.shield(output.exited), timeout)
            except TimeoutError:
                timed_out = True
                _kill_group(transport)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(output.exited), _KILL_WAIT)
            try:
                await asyncio.wait_for(asyncio.shield(output.closed), self.drain_seconds)
            except TimeoutError:
                detached = True  # a background process still holds the output: stop reading
        except BaseException:
            _kill_group(transport)  # cancelled: take the command down with us
            # and see it exit, so the process is reaped (not left running as far as Python knows)
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(output.exited), _KILL_WAIT)
            raise
        finally:
            transport.close()
        text = output.text()
        if timed_out:
            return ToolOutput(
                f"{text}\n[timed out after {timeout:g} s; the command and its child processes were killed]",
                is_error=True,
            )
        code = transport.get_returncode()
        notes = [f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"]
        if detached:
            notes.append("background processes still running; their further output is not shown")
        if unconfined:
            notes.append(unconfined)
        return ToolOutput(f"{text}\n[{'; '.join(notes)}]")


class _ProcessOutput(asyncio.SubprocessProtocol):
    """Collects a process's output, keeping only its head and its tail, and signals exit and EOF.

    Every chunk is also passed on, decoded, to `progress` (all of it, whatever the cap).
    """

    def __init__(self, cap: int, progress: Callable[[str], None] | None = None) -> None:
        loop = asyncio.get_running_loop()
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.progress = progress
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if self.progress is not None:
            text = self.decoder.decode(data)
            if text:
                self.progress(text)
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.tail_cap:  # trim now and then, not on every chunk
                del self.tail[: -self.tail_cap]

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        rest = self.decoder.decode(b"", final=True)  # a character cut short at the end
        if rest and self.progress is not None:
            self.progress(rest)
        if not self.closed.done():
            self.closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)

    def text(self) -> str:
        if not self.total:
            return "(no output)"
        tail = bytes(self.tail[-self.tail_cap :])
        omitted = self.total - len(self.head) - len(tail)
        head = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(bytes(self.head), final=omitted <= 0)
        if omitted <= 0:
            return (head + tail.decode("utf-8", errors="replace")).rstrip("\n")
        while tail and 0x80 <= tail[0] < 0xC0:  # start the tail on a whole character
            tail = tail[1:]
        gap = f"\n[… {omitted:,} bytes of output omitted from the middle …]\n"
        return (head + gap + tail.decode("utf-8", errors="replace")).rstrip("\n")


async def _spawn(
    loop: asyncio.AbstractEventLoop, output: _ProcessOutput, command: str, ctx: ToolContext, sandbox: SandboxSettings
) -> tuple[asyncio.SubprocessTransport, asyncio.BaseProtocol]:
    options: dict[str, Any] = {
        "stdin": subprocess.DEVNULL,
        "stdout": subprocess.PIPE,
        "stderr": subprocess.STDOUT,
        "cwd": ctx.cwd,
    }
    if sys.platform == "win32":  # no sandbox (the notice says so); the environment is still cleaned
        env = clean_environment(os.environ) if sandbox.enabled else None
        return await loop.subprocess_shell(lambda: output, command, env=env, **options)
    options["start_new_session"] = True  # its own process group, so a timeout can kill every child
    shell = shutil.which("bash") or "/bin/sh"
    launch = confine(
        (shell, "-c", command),
        sandbox,
        cwd=ctx.cwd,
        workspace=ctx.allowed_roots,
        writable=(*ctx.writable_roots, ctx.data_dir),
        readable=ctx.readable_roots,
    )
    try:
        return await loop.subprocess_exec(
            lambda: output, *launch.argv, env=launch.env, pass_fds=launch.pass_fds, **options
        )
    finally:
        launch.close()


def _kill_group(transport: asyncio.SubprocessTransport) -> None:
    with contextlib.suppress(OSError):  # already gone
        if hasattr(os, "killpg"):
            os.killpg(transport.get_pid(), signal.SIGKILL)  # the group id is the shell's pid (new session)
        elif transport.get_returncode() is None:
            transport.kill()
