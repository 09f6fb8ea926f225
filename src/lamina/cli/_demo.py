"""`make run`: Lamina's main job on embedded defaults, with no API key and no server (I/O).

Generates a sample workspace in a temporary folder, shows what an agent would see there
(`lamina context`), then runs a real multi-turn session end to end: the scripted provider plays
the model, the built-in tools really run, the cache simulator bills every request. The session
covers plan mode and a plan approved with "Accept & Compact" (the conversation is compacted, the
user's words kept verbatim, then the plan runs in the fresh context, in execute mode), tool calls,
a large tool result offloaded to the session's data folder and a resume from disk. It ends with a
per-turn table.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from lamina.agent import Agent, AgentEvent, PlanUpdate, ToolFinished, ToolStarted, TurnOutcome, open_agent
from lamina.cachesim import AnthropicCacheSimulator
from lamina.cli._console import safe
from lamina.cli._view import plan_line
from lamina.compaction import DeterministicSummariser
from lamina.placement import AnthropicTarget
from lamina.providers import ScriptedProvider, ScriptedResponse, ScriptedToolCall
from lamina.session import SessionStore, open_store

__all__ = [
    "PLAN",
    "SAMPLE_FILES",
    "TARGET",
    "console",
    "demo_store",
    "main",
]

console = Console(highlight=False, emoji=False)
TARGET = AnthropicTarget(model="claude-sonnet-5")

SAMPLE_FILES = {
    "AGENTS.md": "# Rules\n- Run `python test_app.py` after every change.\n- Never edit the tests to make them pass.\n",
    "app.py": "def total(xs):\n    return sum(xs) + 1\n",
    "test_app.py": "from app import total\n\nassert total([1, 2, 3]) == 6, total([1, 2, 3])\nprint('ok')\n",
    "MEMORY.md": "# Project memory\n- total() is used by the billing report; keep it pure.\n",
}


def _sample_workspace(root: Path) -> Path:
    workspace = root / "workspace"
    workspace.mkdir()
    for name, text in SAMPLE_FILES.items():
        (workspace / name).write_text(text)
    lines = [
        f"2026-11-29 10:{i // 60:02d}:{i % 60:02d} INFO step {i} compiled module_{i}.py in 12ms" for i in range(4000)
    ]
    lines[1234] = "2026-11-29 10:20:34 WARNING deprecated call total(xs, strict=True) in report.py:88"
    (workspace / "build.log").write_text("\n".join(lines) + "\n")
    report = [f"def section_{i}(rows):\n    return [total(r) for r in rows if r]  # part {i}\n" for i in range(300)]
    (workspace / "report.py").write_text("from app import total\n\n" + "\n".join(report))
    return workspace


def _script() -> list[ScriptedResponse]:
    def call(name: str, **args: object) -> ScriptedToolCall:
        return ScriptedToolCall(name=name, input=args)

    return [
        # turn 1 (plan mode): look, do not touch, submit a plan
        ScriptedResponse(
            text="Let me read the project rules and the code first.",
            tool_calls=(call("Read", path="AGENTS.md"), call("Read", path="app.py")),
        ),
        ScriptedResponse(text="And where it is used.", tool_calls=(call("Read", path="report.py"),)),
        ScriptedResponse(
            text="total() adds 1 to the sum: that is the bug. Here is my plan.",
            tool_calls=(call("SubmitPlan", title="Fix total()", text=PLAN),),
        ),
        # the plan, dispatched after "Accept & Compact" (execute mode): fix and test
        ScriptedResponse(
            text="Carrying out the plan: the rules first, then the fix.",
            tool_calls=(
                call("Read", path="AGENTS.md"),
                call("Edit", path="app.py", old_string="sum(xs) + 1", new_string="sum(xs)"),
            ),
        ),
        ScriptedResponse(
            text="Running the tests, as AGENTS.md asks.", tool_calls=(call("Bash", command="python test_app.py"),)
        ),
        ScriptedResponse(text="Fixed: total() returns sum(xs) and the test passes."),
        # turn 2: a large tool result goes to the data folder
        ScriptedResponse(text="Reading the build log.", tool_calls=(call("Bash", command="cat build.log"),)),
        ScriptedResponse(text="The log is large; searching it.", tool_calls=(call("Grep", pattern="WARNING"),)),
        ScriptedResponse(text="One warning: a deprecated call total(xs, strict=True) in report.py:88."),
        # turn 3, after a resume from disk
        ScriptedResponse(text="We fixed total() (it added 1), ran the tests, and found one deprecation warning."),
    ]


PLAN = (
    "# Fix total()\n\n"
    "total() returns sum(xs) + 1; the billing report (report.py) relies on the plain sum.\n\n"
    "1. In app.py, return sum(xs).\n"
    "2. Run `python test_app.py` (AGENTS.md asks for it after every change).\n"
)


def _on_event(event: AgentEvent) -> None:
    match event:
        case PlanUpdate(plan=plan):
            console.print(f"   [magenta]◆ plan[/magenta] {safe(plan_line(plan))}")
        case ToolStarted(name=name, input=args):
            console.print(f"   [cyan]→ {safe(name)}[/cyan] {safe(dict(args))}")
        case ToolFinished(name=name, is_error=is_error, content=content, full_output_path=path):
            first = content.strip().splitlines()[0][:90] if content.strip() else ""
            mark = "[red]✗[/red]" if is_error else "[green]✓[/green]"
            where = f" [dim](full output in {safe(path)})[/dim]" if path else ""
            console.print(f"   {mark} {safe(name)}: {safe(first)}{where}")
        case _:
            pass


def _show_context(workspace: Path) -> None:
    from lamina.cli._console import out
    from lamina.cli._context_report import show_context

    width = out.width
    if not out.is_terminal:
        out.width = max(width, 110)  # piped: as wide as the report's tables need, not 80 columns
    try:
        show_context(workspace, "anthropic", None, None, show_text=False, as_json=False)
    finally:
        out.width = width


async def _session(store: SessionStore, workspace: Path, provider: ScriptedProvider) -> list[tuple[str, TurnOutcome]]:
    rows: list[tuple[str, TurnOutcome]] = []

    async def turn(agent: Agent, label: str, text: str) -> None:
        console.print(f"\n[bold]{label}[/bold] [dim](mode {agent.engine.mode})[/dim]  {safe(text)}")
        outcome = await agent.run_turn(text)
        console.print(f"   [bold]model:[/bold] {safe(outcome.text)}")
        rows.append((label, outcome))

    summariser = DeterministicSummariser()  # offline: no model call for the summary
    agent = open_agent(
        store,
        provider,
        workspace=workspace,
        mode="plan",
        on_event=_on_event,
        summariser=summariser,
        keep_tokens=400,
    )
    session_id = agent.engine.session.id
    await turn(agent, "turn 1", "total() returns the wrong number. Can you find out why? Don't change anything yet.")
    plan = agent.plan
    assert plan is not None
    console.print(f"\n[bold]the plan[/bold] [dim]({safe(plan.plan_path)})[/dim]")
    for line in plan.text.rstrip().splitlines():
        console.print(f"   {safe(line)}")
    console.print("\n[bold]Accept & Compact[/bold]: compact first, then run the plan in the fresh context")
    executed = await agent.accept_plan(compact=True, draft="Is there anything worrying in build.log?")
    boundary = agent.engine.boundary
    if boundary is not None:
        console.print("   the user's words, verbatim after the summary:")
        for words in boundary.lane.messages:
            console.print(f"     [dim]turn {words.turn}:[/dim] {safe(words.text)}")
    if executed is not None:
        console.print(f"   [bold]model:[/bold] {safe(executed.text)}")
        rows.append(("plan", executed))
    draft = (agent.plan.draft_input if agent.plan else None) or "Is there anything worrying in build.log?"
    console.print(f"   [dim]the unsent draft kept with the plan comes back: {safe(draft)}[/dim]")
    await turn(agent, "turn 2", draft)
    agent.engine.session.close()

    console.print(f"\n[bold]resume[/bold] session {safe(session_id)} from disk (a new process would do the same)")
    resumed = open_agent(
        store, provider, workspace=workspace, session_id=session_id, on_event=_on_event, summariser=summariser
    )
    console.print(f"   loaded {resumed.engine.session.loaded_count()} entries; mode {resumed.engine.mode}")
    await turn(resumed, "turn 3", "Summarise what we did today.")
    resumed.engine.session.close()
    return rows


def _table(rows: list[tuple[str, TurnOutcome]]) -> Table:
    table = Table("turn", "model calls", "input", "cache read", "cache write", "output", "tools run", box=None)
    for label, outcome in rows:
        u = outcome.usage
        table.add_row(
            label,
            str(len(outcome.usages)),
            f"{u.input:,}",
            f"{u.cache_read:,}",
            f"{u.cache_write:,}",
            f"{u.output:,}",
            safe(", ".join(outcome.tools_run) or "-"),
        )
    return table


def demo_store(explicit: str | None = None) -> Path:
    """Where the demo keeps its session for `lamina serve`.

    Args:
        explicit: The `--store` given, if any.

    Returns:
        `explicit`, else `$LAMINA_STORE`, else a folder under the temp dir.
    """
    explicit = explicit or os.environ.get("LAMINA_STORE")
    return Path(explicit) if explicit else Path(tempfile.gettempdir()) / "lamina-demo" / "store"


def _serve_hint(store: Path, session_id: str) -> None:
    lamina = Path(sys.executable).parent / "lamina"
    command = str(lamina) if lamina.exists() else "lamina"
    console.rule("Inspect this session in the browser (lamina serve)")
    console.print(f"  {safe(command)} --store {safe(str(store))} serve --session {safe(session_id)} --open")
    console.print(f"  then open http://127.0.0.1:8765/sessions/{safe(session_id)} (read-only; Ctrl-C stops the server)")


def main(store: str | None = None) -> int:
    """Run the demo session and print what it shows.

    Args:
        store: The session folder to keep the session in (see `demo_store`).

    Returns:
        The exit code, 0.
    """
    store_root = demo_store(store)
    with tempfile.TemporaryDirectory(prefix="lamina-demo-") as tmp:
        root = Path(tmp)
        workspace = _sample_workspace(root)
        sessions = open_store(store_root)
        console.rule("What an agent sees in the sample workspace (lamina context)")
        _show_context(workspace)
        console.rule("A scripted session: real tools, simulated cache billing")
        clock = [time.time()]

        def tick() -> float:
            clock[0] += 20.0  # each model call starts 20 s after the previous one
            return clock[0]

        provider = ScriptedProvider(_script(), target=TARGET, simulator=AnthropicCacheSimulator(), clock=tick)
        rows = asyncio.run(_session(sessions, workspace, provider))
        console.rule("Per turn (cache reads and writes from the cache simulator)")
        console.print(_table(rows))
        fixed = (workspace / "app.py").read_text()
        console.print(f"\napp.py now: {safe(repr(fixed.strip()))}")
        session_id = rows[0][1].turn.session_id
    _serve_hint(store_root, session_id)
    return 0
