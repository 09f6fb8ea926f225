"""`make run`: Lamina's main job on embedded defaults, with no API key and no server (I/O).

Creates a session store and a sample workspace in a temporary folder, records a realistic
multi-turn coding exchange, compacts nothing yet, branches, reopens the session the way a resume
does, forks it, and prints what it did at each step.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from lamina.session.entries import AssistantMessage, StateChange, ToolCall, ToolResult, Usage, UserMessage
from lamina.session.store import JsonlSession, LocalSessionStore

console = Console(highlight=False)


def _record_turn(session: JsonlSession, request: str, tool: tuple[str, dict[str, str], str], answer: str) -> None:
    session.append(UserMessage(text=request))
    session.append(AssistantMessage(text="Let me check.", model="scripted", usage=Usage(input=1800, output=30)))
    name, args, output = tool
    call = session.append(ToolCall(call_id=f"call-{session.loaded_count()}", name=name, input=dict(args)))
    session.append(ToolResult(call_id=call.call_id, name=name, content=output))
    session.append(AssistantMessage(text=answer, model="scripted", usage=Usage(input=120, output=60, cache_read=1800)))
    session.flush()  # the turn boundary: one fsync for the whole turn


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="lamina-demo-") as tmp:
        root = Path(tmp)
        workspace = root / "workspace"
        workspace.mkdir()
        (workspace / "app.py").write_text("def total(xs):\n    return sum(xs) + 1\n")
        store = LocalSessionStore(root / "store")
        console.print(f"[bold]1. create[/bold] a session in {store.root}")
        session = store.create(cwd=str(workspace))
        _record_turn(
            session,
            "total() returns the wrong number, can you look?",
            ("Read", {"path": "app.py"}, "def total(xs):\n    return sum(xs) + 1\n"),
            "total() adds 1 to the sum; that is the bug.",
        )
        fork_point = session.leaf_id
        session.append(StateChange(key="mode", value="execute", previous="explore", detail="user allowed edits"))
        _record_turn(
            session,
            "Fix it, and never touch the tests.",
            ("Edit", {"path": "app.py", "old": "sum(xs) + 1", "new": "sum(xs)"}, "edited app.py"),
            "Fixed: total() now returns sum(xs).",
        )
        console.print(f"   appended {len(session.entries())} entries over 2 turns; leaf {session.leaf_id}")

        assert fork_point is not None
        console.print(f"[bold]2. branch[/bold] from entry {fork_point} (after turn 1) and try another answer")
        session.branch(fork_point)
        _record_turn(
            session,
            "Instead, explain why the +1 might have been intended.",
            ("Grep", {"pattern": "total\\("}, "app.py:1:def total(xs):"),
            "It may have counted a header row; nothing in the code says so.",
        )
        session.close()

        console.print("[bold]3. reopen[/bold] the session the way a resume does")
        with store.open(session.id, writable=False) as reopened:
            table = Table("entry", "type", "on the leaf's path", box=None)
            on_path = {e.id for e in reopened.path()}
            for entry in reopened.entries():
                table.add_row(entry.id, type(entry).__name__, "yes" if entry.id in on_path else "")
            console.print(table)
            console.print(
                f"   provider view: {len(reopened.view().entries)} entries; problems: "
                f"{reopened.report.messages() or 'none'}"
            )

        console.print("[bold]4. fork[/bold] the first turn into a new session")
        with store.fork(session.id, fork_point) as forked:
            origin = forked.meta.forked_from
            assert origin is not None
            console.print(f"   {forked.id}: {len(forked.entries())} entries, forked from {origin.session_id}")

        console.print("[bold]5. list[/bold] the store (metadata only)")
        for row in store.list():
            console.print(f"   {row.id}  {row.entry_count:>3} entries  {row.title}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
