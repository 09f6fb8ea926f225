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
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from tests.wire.script import ToolUse

from benchmarks._peers import (
    ModelServer,
    PeerFailed,
    PeerRequest,
    PeerRun,
    PeerUnavailable,
    write_files,
)
from benchmarks._scenario import AGENTS_MD, ModelStep, ScriptedTurn

__all__ = ["MODEL", "PeerFailed", "PeerRequest", "PeerRun", "PeerUnavailable", "claude_binary", "run_claude_code"]

MODEL = "claude-sonnet-4-5"
_TURN_TIMEOUT_S = 300.0


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


def _calls(workspace: Path, step: ModelStep) -> list[ToolUse]:
    return [ToolUse("Read", {"file_path": str(workspace / r.path)}) for r in step.reads]


def _is_main(path: str, body: Mapping[str, Any]) -> bool:
    return bool(body.get("tools")) and body.get("model") == MODEL


def run_claude_code(
    script: Sequence[ScriptedTurn],
    *,
    progress: Callable[[str], None],
    through: Callable[[str], AbstractContextManager[str]] | None = None,
) -> PeerRun:
    """Run Claude Code through `script`; the captured requests in order.

    `through(url)` puts something between Claude Code and the server (`lamina proxy`): the address it gives is used.
    """
    binary = claude_binary()
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="lamina-bench-cc-") as tmp:
        workspace, home = Path(tmp) / "ws", Path(tmp) / "home"
        home.mkdir()
        workspace.mkdir()
        (workspace / "CLAUDE.md").write_text(AGENTS_MD)
        write_files(workspace, script)
        with ModelServer(workspace, _calls, _is_main) as server, (through or nullcontext)(server.url) as url:
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": str(home),
                "ANTHROPIC_BASE_URL": url or server.url,
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
            return server.run(version)
