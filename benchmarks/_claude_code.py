"""The Claude Code peer of the cache benchmark: the CLI bundled in the claude-agent-sdk wheel, run for real.

Claude Code is pointed (`ANTHROPIC_BASE_URL`) at a local server speaking the Anthropic wire
format (the test suite's `WireServer`), which plays the model: it answers each main request with
the next scripted step of the session (the same text and the same Read calls as Lamina's run),
and every file the model reads is on disk with the same content, so Claude Code's own Read tool
returns the same answers. One `claude -p` call per user turn, `--resume` from the second on.
Every request body Claude Code sends is captured with the scripted time of the model call it
stands for, so both agents can be billed by the same cache simulator over the same clock.
CLAUDE.md holds what AGENTS.md holds for Lamina (Claude Code reads CLAUDE.md) and is edited at the
same turn. Side requests (other models, no tools) are answered briefly and billed too.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
from tests.wire.script import Reply, ToolUse, WireResponse
from tests.wire.server import WireServer

from benchmarks._scenario import AGENTS_MD, ModelStep, ScriptedTurn

MODEL = "claude-sonnet-4-5"
_TURN_TIMEOUT_S = 300.0


class PeerUnavailable(Exception):
    """The peer cannot run here (the extra is not installed); the message says why."""


class PeerFailed(RuntimeError):
    """The peer ran but did not follow the script (a turn failed or left answers unused)."""


@dataclass(frozen=True, slots=True)
class PeerRequest:
    """One request body Claude Code sent, with the scripted time of the model call it stands for."""

    t_start: float
    body: Mapping[str, Any]
    main: bool
    """A request of the scripted conversation (not a side request of another kind)."""
    turn: int


@dataclass(frozen=True, slots=True)
class PeerRun:
    version: str
    requests: tuple[PeerRequest, ...]


def claude_binary() -> Path:
    """The `claude` executable bundled in the claude-agent-sdk wheel; `PeerUnavailable` when missing."""
    spec = importlib.util.find_spec("claude_agent_sdk")
    if spec is None or not spec.submodule_search_locations:
        raise PeerUnavailable("claude-agent-sdk is not installed (pip install 'lamina[claude]')")
    for location in spec.submodule_search_locations:
        binary = Path(location) / "_bundled" / "claude"
        if binary.is_file() and os.access(binary, os.X_OK):
            return binary
    raise PeerUnavailable("the claude-agent-sdk wheel has no bundled CLI (_bundled/claude) on this platform")


class _ModelServer(WireServer):
    """The wire server playing the model: main requests get the queued steps in order, side requests "OK"."""

    def __init__(self, workspace: Path) -> None:
        super().__init__()
        self.workspace = workspace
        self.captured: list[PeerRequest] = []
        self._answers: deque[ModelStep] = deque()
        self._turn = -1
        self._t = 0.0
        self._serial = threading.Lock()

    def queue(self, turn: int, steps: Sequence[ModelStep]) -> None:
        with self._serial:
            self._turn = turn
            self._answers.extend(steps)
            self._t = steps[0].t

    @property
    def unused(self) -> int:
        with self._serial:
            return len(self._answers)

    def answer(self, path: str, headers: Mapping[str, str], raw: bytes) -> WireResponse:
        with self._serial:
            try:
                body = msgspec.json.decode(raw) if raw else None
            except msgspec.DecodeError:
                body = None
            main = isinstance(body, dict) and bool(body.get("tools")) and body.get("model") == MODEL
            if main and self._answers:
                step = self._answers.popleft()
                self._t = step.t
                calls = [ToolUse("Read", {"file_path": str(self.workspace / r.path)}) for r in step.reads]
                self.script(Reply(text=step.text, tool_calls=calls))
            else:
                main = False
                self.script(Reply(text="OK."))
            response = super().answer(path, headers, raw)
            if response.status == 200 and isinstance(body, dict):
                self.captured.append(PeerRequest(self._t, body, main, self._turn))
            return response


def run_claude_code(script: Sequence[ScriptedTurn], *, progress: Callable[[str], None]) -> PeerRun:
    """Run Claude Code through `script`; the captured requests in order."""
    binary = claude_binary()
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="lamina-bench-cc-") as tmp:
        workspace, home = Path(tmp) / "ws", Path(tmp) / "home"
        home.mkdir()
        workspace.mkdir()
        (workspace / "CLAUDE.md").write_text(AGENTS_MD)
        for scripted in script:
            for step in scripted.steps:
                for read in step.reads:
                    target = workspace / read.path
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(read.content)
        with _ModelServer(workspace) as server:
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": str(home),
                "ANTHROPIC_BASE_URL": server.url,
                "ANTHROPIC_API_KEY": "sk-bench-local",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_ERROR_REPORTING": "1",
            }
            session_id: str | None = None
            for scripted in script:
                if scripted.agents_md is not None:
                    (workspace / "CLAUDE.md").write_text(scripted.agents_md)
                server.queue(scripted.index, scripted.steps)
                command = [str(binary), "-p", scripted.prompt, "--output-format", "json", "--model", MODEL]
                command += ["--allowedTools", "Read"]
                if session_id is not None:
                    command += ["--resume", session_id]
                done = subprocess.run(
                    command, cwd=workspace, env=env, capture_output=True, text=True, timeout=_TURN_TIMEOUT_S
                )
                if done.returncode != 0 or server.unused:
                    raise PeerFailed(
                        f"Claude Code turn {scripted.index}: exit {done.returncode}, {server.unused} scripted answers "
                        f"unused; stderr: {done.stderr.strip()[:500]!r}; stdout: {done.stdout.strip()[:500]!r}"
                    )
                session_id = str(json.loads(done.stdout)["session_id"])
                if scripted.index % 10 == 9:
                    progress(f"Claude Code: {scripted.index + 1} of {len(script)} turns")
            return PeerRun(version, tuple(server.captured))
