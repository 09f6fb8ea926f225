"""One host of the multi-host file test: takes turns on one PostgreSQL session, with a file folder of its own.

Run as `python -m tests.session.postgres._pg_file_host URL FILES SESSION LEASE`. It reads commands on stdin,
one a line, and answers each with one JSON line on stdout:
- `turn N`: open the session (waiting for the lease), check every file the log names (attachments
  through the engine, offloaded results through the path the model was shown, as the Read tool
  resolves it), then attach a file and offload a result of its own, end the turn and close;
  answers `{"checked": [names], "wrote": [names], "seconds_to_open": s}`.
- `big N`: like a turn, but it attaches a large file and says `{"putting": true}` before storing it
  (the test kills it there); the entry naming the file is recorded only once it is stored.
- `exit`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import time
from pathlib import Path

import msgspec

from lamina.attachments import NamedBytes
from lamina.engine import ContextEngine
from lamina.session import VIRTUAL_ROOT, AssistantMessage, ToolCall, ToolResult, UserMessage
from lamina.session.postgres import PostgresSession, PostgresSessionStore
from lamina.tokens import DEFAULT_ESTIMATOR
from lamina.tools import OffloadPolicy, StructTool, ToolContext, ToolExecution, ToolOutput, ToolPipeline


def result_text(host: str, turn: int) -> str:
    """The tool output a host offloads in a turn (large enough to be offloaded)."""
    return "".join(f"{host} turn {turn} line {i}: {'x' * 40}\n" for i in range(3000))


def attachment_text(host: str, turn: int) -> bytes:
    return f"notes of {host}, turn {turn}\n".encode() * 50


def big_text(host: str, number: int) -> bytes:
    """The 20 MB text file a host attaches in a `big` turn."""
    line = (hashlib.sha256(f"{host}{number}".encode()).hexdigest() + "\n").encode()
    return line * (20 * 1024 * 1024 // len(line))


def check_files(session: PostgresSession, engine: ContextEngine, cwd: Path) -> list[str]:
    """Every file the log names, read back and compared (raises AssertionError if one differs or is missing)."""
    checked: list[str] = []
    ctx = ToolContext(cwd=cwd, data_dir=session.data_dir, files=session)
    for entry in session.entries():
        if isinstance(entry, UserMessage):
            for ref in entry.attachments:
                data = engine.attachments.read(ref.sha256)
                assert hashlib.sha256(data).hexdigest() == ref.sha256, ref.name
                assert engine.attachments.read_text(ref), ref.name
                checked.append(f"attachments/{ref.sha256}")
        elif isinstance(entry, ToolResult) and entry.full_output_path:
            shown = entry.full_output_path
            assert shown.startswith(VIRTUAL_ROOT + "/data/"), shown
            local = ctx.path(shown)  # what Read and Grep open
            host, turn = entry.call_id.split("-")
            assert local.read_text() == result_text(host, int(turn)), shown
            checked.append(shown)
    return checked


class _ResultInput(msgspec.Struct):
    host: str
    turn: int


class _ResultTool(StructTool[_ResultInput]):
    """A tool whose output is a host's large result of a turn: the pipeline offloads it to the session's files."""

    name = "Bash"
    description = "The turn's output."
    read_only = True
    input_type = _ResultInput

    async def run(self, input: _ResultInput, ctx: ToolContext) -> ToolOutput:
        return ToolOutput(result_text(input.host, input.turn))


async def _offloaded(session: PostgresSession, call_id: str, host: str, number: int) -> ToolExecution:
    """The turn's result as the pipeline gives it to the model: offloaded, a preview naming its path."""
    policy = OffloadPolicy(threshold_tokens=2_000)
    ctx = ToolContext(
        cwd=Path.cwd(), data_dir=session.data_dir, offload=policy, estimator=DEFAULT_ESTIMATOR, files=session
    )
    return await ToolPipeline([_ResultTool()], ctx).execute(call_id, "Bash", {"host": host, "turn": number})


def turn(store: PostgresSessionStore, sid: str, host: str, number: int, *, big: bool) -> dict[str, object]:
    started = time.monotonic()
    with store.open(sid, wait=60.0) as session:
        opened = time.monotonic() - started
        engine = ContextEngine(session, stable_source=lambda: ())
        checked = check_files(session, engine, Path.cwd())
        wrote: list[str] = []
        if big:
            print(json.dumps({"putting": True}), flush=True)
            data = big_text(host, number)
            attachment = NamedBytes(f"big-{host}-{number}.txt", data)
        else:
            attachment = NamedBytes(f"notes-{host}-{number}.txt", attachment_text(host, number))
        engine.prepare_turn(f"turn {number} on {host}", attachments=[attachment])
        user = [e for e in session.entries_loaded() if isinstance(e, UserMessage)][-1]
        wrote.extend(f"attachments/{ref.sha256}" for ref in user.attachments)
        call_id = f"{host}-{number}"
        engine.record(ToolCall(call_id=call_id, name="Bash", input={"command": "cat big"}))
        offloaded = asyncio.run(_offloaded(session, call_id, host, number))
        assert offloaded.full_output_path is not None
        engine.record(
            ToolResult(
                call_id=call_id,
                name="Bash",
                content=offloaded.content,
                full_output_path=str(offloaded.full_output_path),
            )
        )
        wrote.append(str(offloaded.full_output_path))
        engine.record(AssistantMessage(text=f"done on {host}"))
        engine.end_turn()
    return {"checked": checked, "wrote": wrote, "seconds_to_open": opened}


def main(url: str, files: str, sid: str, lease: float) -> None:
    host = Path(files).name
    store = PostgresSessionStore(url, files_root=files, lease_seconds=lease)
    try:
        for line in sys.stdin:
            command, _, arg = line.strip().partition(" ")
            if command == "exit":
                return
            answer = turn(store, sid, host, int(arg), big=command == "big")
            print(json.dumps(answer), flush=True)
    finally:
        store.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]))
