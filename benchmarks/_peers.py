"""Peer harnesses run for real through the scripted session: what they share, and pi and Codex CLI.

Each peer is pointed at a local server speaking its provider's wire format (the test suite's
`WireServer`, streaming included), which plays the model: it answers each request of the scripted
conversation with the next scripted step (the same text, and a call that reads the same file as
Lamina's run), and every file the model reads is on disk with the same content, so the peer's own
tool returns it. One peer process per user turn, resuming its session from the second on. Every
request body it sends is captured with the scripted time of the model call it stands for, so all
harnesses are billed by the same cache simulator on the same clock. Requests of another kind (no
tools, another model) are answered briefly and billed too.

- pi (`@mariozechner/pi-coding-agent`): `pi -p --mode json --provider anthropic --model M
  [--session ID] TEXT`, `HOME/.pi/agent/models.json` pointing `anthropic` at the server (Anthropic
  Messages format); it reads with its `read` tool and AGENTS.md holds the rules.
- Codex CLI (`@openai/codex`): `codex exec --json` then `codex exec resume --json THREAD TEXT`, a
  custom model provider in `CODEX_HOME/config.toml` whose `base_url` is the server (Responses
  format); it reads with `exec_command` (`cat PATH`) and AGENTS.md holds the rules.

Both are installed by `make peers` into `.peers/` (ignored by git); when Node.js or a package is
missing the peer is skipped with the reason (`PeerUnavailable`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
from tests.wire.script import Reply, ToolUse, WireResponse
from tests.wire.server import ROUTES, WireServer

from benchmarks._scenario import AGENTS_MD, ModelStep, ScriptedModel, ScriptedTurn

PEERS_DIR = Path(__file__).resolve().parent.parent / ".peers"
"""Where `make peers` installs the npm packages (ignored by git)."""
TURN_TIMEOUT_S = 300.0
PI_MODEL = "claude-sonnet-4-5"
CODEX_MODEL = "gpt-5.5"


class PeerUnavailable(Exception):
    """The peer cannot run here (not installed); the message says why."""


class PeerFailed(RuntimeError):
    """The peer ran but did not follow the script (a turn failed or left answers unused)."""


@dataclass(frozen=True, slots=True)
class PeerRequest:
    """One request body a peer sent, with the scripted time of the model call it stands for."""

    t_start: float
    body: Mapping[str, Any]
    main: bool
    """A request of the scripted conversation (not a side request of another kind)."""
    turn: int


@dataclass(frozen=True, slots=True)
class PeerRun:
    version: str
    requests: tuple[PeerRequest, ...]
    rereads: tuple[str, ...] = ()
    """The paths the scripted model read again because their content was no longer in the peer's request."""


ToolCalls = Callable[[Path, ModelStep], list[ToolUse]]
"""The tool calls a peer's model makes for a scripted step (reads of its files, in the peer's tools)."""
IsMain = Callable[[str, Mapping[str, Any]], bool]
"""Whether a request (path, body) belongs to the scripted conversation."""


class ModelServer(WireServer):
    """The wire server playing the model: main requests get the queued steps in order, side requests "OK"."""

    def __init__(self, workspace: Path, calls: ToolCalls, is_main: IsMain, *, reasoning: bool = False) -> None:
        super().__init__()
        self.workspace = workspace
        self.reasoning = reasoning
        """Main answers come with reasoning (`Reply.reasoning`): thinking, or an encrypted reasoning item."""
        self.captured: list[PeerRequest] = []
        self._calls = calls
        self._is_main = is_main
        self._model = ScriptedModel(())
        self.rereads: list[str] = []
        self._turn = -1
        self._t = 0.0
        self._serial = threading.Lock()

    def queue(self, turn: int, steps: Sequence[ModelStep]) -> None:
        with self._serial:
            self.rereads += self._model.rereads
            self._turn = turn
            self._model = ScriptedModel(steps)
            self._t = steps[0].t

    @property
    def unused(self) -> int:
        with self._serial:
            return len(self._model)

    def run(self, version: str) -> PeerRun:
        """What the server captured, as a peer's run."""
        with self._serial:
            return PeerRun(version, tuple(self.captured), (*self.rereads, *self._model.rereads))

    def answer(self, path: str, headers: Mapping[str, str], raw: bytes) -> WireResponse:
        with self._serial:
            try:
                body = msgspec.json.decode(raw) if raw else None
            except msgspec.DecodeError:
                body = None
            if ROUTES.get(path.split("?", 1)[0]) is None:  # not an API (`count_tokens`): a 404 takes no answer
                return super().answer(path, headers, raw)
            main = isinstance(body, dict) and self._is_main(path, body)
            if main and self._model:
                self._t = self._model.t
                step = self._model.answer(raw.decode("utf-8", "replace") if self._model.checks else "")
                thought = f"Planning: {step.text} " * 8 if self.reasoning else ""
                self.script(Reply(text=step.text, tool_calls=self._calls(self.workspace, step), reasoning=thought))
            else:
                main = False
                self.script(Reply(text="OK."))
            response = super().answer(path, headers, raw)
            if response.status == 200 and isinstance(body, dict):
                self.captured.append(PeerRequest(self._t, body, main, self._turn))
            return response


def write_files(workspace: Path, script: Sequence[ScriptedTurn]) -> None:
    """Every file the scripted model reads, with its content."""
    for scripted in script:
        for step in scripted.steps:
            for read in step.reads:
                target = workspace / read.path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(read.content)


def _base_env(home: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8"}


def _binary(name: str) -> Path:
    if shutil.which("node") is None:
        raise PeerUnavailable("Node.js is not installed (node not on PATH)")
    binary = PEERS_DIR / "node_modules" / ".bin" / name
    if not binary.exists():
        raise PeerUnavailable(f"{name} is not installed in {PEERS_DIR.name}/ (run `make peers`)")
    return binary


def _version(binary: Path, env: Mapping[str, str]) -> str:
    done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60, env=dict(env))
    return (done.stdout.strip() or done.stderr.strip()).splitlines()[-1] if (done.stdout or done.stderr) else "?"


def _run_turn(
    name: str, command: list[str], workspace: Path, env: Mapping[str, str], server: ModelServer, turn: int
) -> str:
    done = subprocess.run(
        command,
        cwd=workspace,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TURN_TIMEOUT_S,
    )
    if done.returncode != 0 or server.unused:
        raise PeerFailed(
            f"{name} turn {turn}: exit {done.returncode}, {server.unused} scripted answers unused; "
            f"stderr: {done.stderr.strip()[-500:]!r}; stdout: {done.stdout.strip()[-500:]!r}"
        )
    return done.stdout


def _events(stdout: str) -> list[dict[str, Any]]:
    events = []
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


# --- pi ------------------------------------------------------------------------------------------------


def _pi_calls(workspace: Path, step: ModelStep) -> list[ToolUse]:
    return [ToolUse("read", {"path": str(workspace / r.path)}) for r in step.reads]


def _pi_main(path: str, body: Mapping[str, Any]) -> bool:
    return path.startswith("/v1/messages") and bool(body.get("tools")) and body.get("model") == PI_MODEL


def run_pi(script: Sequence[ScriptedTurn], *, progress: Callable[[str], None], reasoning: bool = False) -> PeerRun:
    """Run pi through `script` (Anthropic Messages format); the captured requests in order.

    With `reasoning`, pi asks for thinking (`--thinking medium`) and every answer comes with it.
    """
    binary = _binary("pi")
    with tempfile.TemporaryDirectory(prefix="lamina-bench-pi-") as tmp:
        workspace, home = Path(tmp) / "ws", Path(tmp) / "home"
        (home / ".pi" / "agent").mkdir(parents=True)
        workspace.mkdir()
        (workspace / "AGENTS.md").write_text(AGENTS_MD)
        write_files(workspace, script)
        env = {**_base_env(home), "ANTHROPIC_API_KEY": "sk-bench-local", "PI_OFFLINE": "1"}
        version = f"pi {_version(binary, env)}"
        with ModelServer(workspace, _pi_calls, _pi_main, reasoning=reasoning) as server:
            models = {"providers": {"anthropic": {"baseUrl": server.url}}}
            (home / ".pi" / "agent" / "models.json").write_text(json.dumps(models))
            session: str | None = None
            for scripted in script:
                if scripted.agents_md is not None:
                    (workspace / "AGENTS.md").write_text(scripted.agents_md)
                server.queue(scripted.index, scripted.steps)
                command = [str(binary), "-p", "--mode", "json", "--provider", "anthropic", "--model", PI_MODEL]
                if reasoning:
                    command += ["--thinking", "medium"]
                if session is not None:
                    command += ["--session", session]
                stdout = _run_turn("pi", [*command, scripted.prompt], workspace, env, server, scripted.index)
                if session is None:
                    session = next((str(e["id"]) for e in _events(stdout) if e.get("type") == "session"), None)
                    if session is None:
                        raise PeerFailed(f"pi printed no session id: {stdout[:300]!r}")
                if scripted.index % 10 == 9:
                    progress(f"pi: {scripted.index + 1} of {len(script)} turns")
            return server.run(version)


# --- Codex CLI -------------------------------------------------------------------------------------------


def _codex_calls(workspace: Path, step: ModelStep) -> list[ToolUse]:
    return [ToolUse("exec_command", {"cmd": f"cat {r.path}"}) for r in step.reads]


def _codex_main(path: str, body: Mapping[str, Any]) -> bool:
    return path.startswith("/v1/responses") and bool(body.get("tools")) and body.get("model") == CODEX_MODEL


def run_codex(script: Sequence[ScriptedTurn], *, progress: Callable[[str], None], reasoning: bool = False) -> PeerRun:
    """Run Codex CLI through `script` (OpenAI Responses format); the captured requests in order.

    With `reasoning`, Codex asks for reasoning (`model_reasoning_effort="medium"`) and every answer
    comes with an encrypted reasoning item, which Codex sends back.
    """
    binary = _binary("codex")
    with tempfile.TemporaryDirectory(prefix="lamina-bench-codex-") as tmp:
        workspace, home = Path(tmp) / "ws", Path(tmp) / "home"
        codex_home = home / ".codex"
        codex_home.mkdir(parents=True)
        workspace.mkdir()
        (workspace / "AGENTS.md").write_text(AGENTS_MD)
        write_files(workspace, script)
        env = {**_base_env(home), "CODEX_HOME": str(codex_home), "STUB_API_KEY": "sk-bench-local"}
        version = _version(binary, env)
        with ModelServer(workspace, _codex_calls, _codex_main, reasoning=reasoning) as server:
            (codex_home / "config.toml").write_text(
                'model_provider = "stub"\n'
                "[model_providers.stub]\n"
                'name = "stub"\n'
                f'base_url = "{server.openai_url}"\n'
                'wire_api = "responses"\n'
                'env_key = "STUB_API_KEY"\n'
            )
            options = ["--json", "--skip-git-repo-check", "-m", CODEX_MODEL, "-c", 'sandbox_mode="read-only"']
            if reasoning:
                options += ["-c", 'model_reasoning_effort="medium"']
            thread: str | None = None
            for scripted in script:
                if scripted.agents_md is not None:
                    (workspace / "AGENTS.md").write_text(scripted.agents_md)
                server.queue(scripted.index, scripted.steps)
                if thread is None:
                    command = [str(binary), "exec", *options, scripted.prompt]
                else:
                    command = [str(binary), "exec", "resume", *options, thread, scripted.prompt]
                stdout = _run_turn("Codex", command, workspace, env, server, scripted.index)
                if thread is None:
                    events = _events(stdout)
                    thread = next((str(e["thread_id"]) for e in events if e.get("type") == "thread.started"), None)
                    if thread is None:
                        raise PeerFailed(f"Codex printed no thread id: {stdout[:300]!r}")
                if scripted.index % 10 == 9:
                    progress(f"Codex: {scripted.index + 1} of {len(script)} turns")
            return server.run(version)
