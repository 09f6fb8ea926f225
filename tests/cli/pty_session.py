"""Drive `lamina chat` in a pseudo-terminal (pexpect) against the local wire server."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

import pexpect
from typer.testing import CliRunner

import lamina
from lamina.cli import app
from tests.wire.fixtures import API_KEY
from tests.wire.script import WireResponse
from tests.wire.server import WireServer, _Handler

SRC = str(Path(lamina.__file__).parents[1])
PROMPT_READY = re.compile(r"\x1b\[\?2004h")
"""prompt_toolkit turns bracketed paste on when it starts reading a line."""


def paste(text: str) -> str:
    """`text` as a terminal sends a paste (bracketed paste mode)."""
    return f"\x1b[200~{text}\x1b[201~"


def chat_env(tmp_path: Path, wire: WireServer, unset: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment `Chat` runs `lamina` in: the wire server's keys, the test's store, config and state."""
    env = {
        **os.environ,
        "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "ANTHROPIC_BASE_URL": wire.url,
        "ANTHROPIC_API_KEY": API_KEY,
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "TERM": "xterm",
        "PROMPT_TOOLKIT_NO_CPR": "1",
        "LAMINA_STORE": str(tmp_path / "store"),
    }
    for name in ("NO_COLOR", "COLUMNS", "LINES"):  # pytest-xdist's workers set COLUMNS=80: the pty's size wins
        env.pop(name, None)
    for name in unset:  # `model=None, unset=("ANTHROPIC_API_KEY",)`: no model given and no key to use
        env.pop(name, None)
    return env


def run_here(tmp_path: Path, wire: WireServer, text: str, model: str = "anthropic:claude-sonnet-5") -> str:
    """`lamina run TEXT` in this process (typer's runner) in `Chat`'s environment and folder; its answer.

    For a session a test only sets up before the chat under test: a process costs a second or two of CPU.
    """
    with contextlib.chdir(tmp_path / "ws"):
        result = CliRunner().invoke(app, ["run", text, "--model", model], env=chat_env(tmp_path, wire))
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


class Chat:
    """One `lamina chat` (or other `command`) process in a pty; `expect` fails with the transcript so far."""

    def __init__(
        self,
        tmp_path: Path,
        wire: WireServer,
        *args: str,
        model: str | None = "anthropic:claude-sonnet-5",
        command: str = "chat",
        unset: tuple[str, ...] = (),
        columns: int = 200,
    ) -> None:
        self.columns = columns
        self.transcript = tmp_path / f"transcript-{len(list(tmp_path.glob('transcript-*')))}.txt"
        env = chat_env(tmp_path, wire, unset)
        chosen = ["--model", model] if model is not None else []
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "lamina.cli", command, *chosen, *args],
            cwd=str(tmp_path / "ws"),
            env=env,
            encoding="utf-8",
            timeout=60,
            dimensions=(50, columns),
        )
        self._log = self.transcript.open("w")
        self.child.logfile_read = self._log

    def expect(self, pattern: str | re.Pattern[str]) -> None:
        try:
            self.child.expect(re.escape(pattern) if isinstance(pattern, str) else pattern)
        except (pexpect.TIMEOUT, pexpect.EOF) as exc:
            self._log.flush()
            raise AssertionError(f"{pattern!r} not seen; transcript:\n{self.transcript.read_text()}") from exc

    def prompt(self) -> None:
        self.expect(PROMPT_READY)

    def send(self, text: str) -> None:
        self.child.send(text)

    def say(self, text: str) -> None:
        """Wait for the prompt, then type `text` and Enter."""
        self.prompt()
        self.child.send(text + "\r")

    def screen(self) -> list[str]:
        """What the terminal shows now (scrollback included), as `tests.cli.screen.screen` draws it."""
        from tests.cli.screen import screen

        if not self._log.closed:
            self._log.flush()
        with self.transcript.open(newline="") as raw:  # the pty's carriage returns kept
            return screen(raw.read(), self.columns)

    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.transcript.read_text()

    def finish(self) -> int:
        """Wait for the process to end; its exit status."""
        try:
            self.child.expect(pexpect.EOF)
        except pexpect.TIMEOUT as exc:
            self.child.kill(9)
            raise AssertionError(f"lamina chat did not exit; transcript:\n{self.output()}") from exc
        self.child.close()
        self._log.close()
        status = self.child.exitstatus
        return -1 if status is None else status


class HoldingWire(WireServer):
    """A wire server that can stop halfway through a streamed answer until `release()` (for Ctrl-C tests)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.gate: threading.Event | None = None
        """The gate the next streamed answer waits at (the handler takes it: one answer is held)."""
        self._held: threading.Event | None = None

    def hold_next_stream(self) -> None:
        self.gate = self._held = threading.Event()

    def release(self) -> None:
        if self._held is not None:  # the handler has taken `gate` already: release the one it waits at
            self._held.set()

    def start(self) -> Self:
        handler = type("HoldingHandler", (_HoldingHandler,), {"wire": self})
        self._httpd = httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        serve = functools.partial(httpd.serve_forever, poll_interval=0.02)
        self._thread = threading.Thread(target=serve, name="wire-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release()
        super().stop()


class _HoldingHandler(_Handler):
    wire: HoldingWire

    def _send(self, response: WireResponse) -> None:
        gate = self.wire.gate
        if gate is None or response.content_type != "text/event-stream":
            super()._send(response)
            return
        self.wire.gate = None
        first_delta = response.body.index(b"content_block_delta")
        cut = response.body.index(b"\n\n", first_delta) + 2  # the first text delta goes out, then nothing
        self.send_response(response.status)
        self.send_header("content-type", response.content_type)
        self.send_header("content-length", str(len(response.body)))
        self.end_headers()
        try:
            self.wfile.write(response.body[:cut])
            self.wfile.flush()
            gate.wait(30)
            self.wfile.write(response.body[cut:])
            self.wfile.flush()
        except OSError:  # the client went away (the turn was cancelled)
            self.close_connection = True
