"""`make run`: Lamina's main job on embedded defaults, with no API key and no server (I/O).

Generates a sample workspace in a temporary folder, shows what an agent would see there
(`lamina context`), then runs a real multi-turn session end to end: the scripted provider plays
the model, the built-in tools really run, the cache simulator bills every request. The session
covers plan mode and a plan approved with "Accept & Compact" (the conversation is compacted, the
user's words kept verbatim, then the plan runs in the fresh context, in execute mode), tool calls,
a large tool result offloaded to the session's data folder and a resume from disk. It ends with a
per-turn table and where the session is kept. Lines wrap at spaces; tools show as in `lamina chat`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from rich.table import Table
from rich.text import Text

from lamina.agent import Agent, AgentEvent, AgentOptions, TurnOutcome, open_agent
from lamina.cachesim import AnthropicCacheSimulator
from lamina.cli._console import fit, out, safe
from lamina.cli._turn_view import TurnView
from lamina.compaction import DeterministicSummariser
from lamina.placement import AnthropicTarget
from lamina.providers import ScriptedProvider, ScriptedResponse, ScriptedToolCall, TextDelta
from lamina.session import SessionStore, open_store

__all__ = [
    "PIPED_WIDTH",
    "PLAN",
    "SAMPLE_FILES",
    "TARGET",
    "console",
    "demo_store",
    "main",
    "say",
]

console = out
"""The demo prints through the CLI's one stdout console, as `lamina context` (its report) does."""
PIPED_WIDTH: Final = 100
"""The width when nothing names one: no terminal on stdin, stdout or stderr, no `COLUMNS`."""
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
    lines = [f"2026-11-29 {_clock(10 * 3600 + i)} INFO step {i} compiled module_{i}.py in 12ms" for i in range(4000)]
    lines[1234] = "2026-11-29 10:20:34 WARNING deprecated call total(xs, strict=True) in report.py:88"
    (workspace / "build.log").write_text("\n".join(lines) + "\n")
    report = [f"def section_{i}(rows):\n    return [total(r) for r in rows if r]  # part {i}\n" for i in range(300)]
    (workspace / "report.py").write_text("from app import total\n\n" + "\n".join(report))
    return workspace


def _clock(seconds: int) -> str:
    """`HH:MM:SS` of a number of seconds after midnight (a sample log's times)."""
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


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


def say(markup: str, *, indent: int = 0, hang: int = 2) -> None:
    """Print a markup line wrapped at spaces to the console's width, never inside a word (but in a terminal).

    Piped, a word longer than the line (a path) is left whole on its own line; wrapped lines are
    indented by `indent` + `hang`.

    Args:
        markup: Rich markup; untrusted parts already passed through `safe`.
        indent: Spaces before the first line.
        hang: More spaces before each wrapped line.
    """
    for line in fit(Text.from_markup(markup), console.width, indent=indent, hang=hang, fold=console.is_terminal):
        console.print(line, soft_wrap=True)


class _Events:
    """The agent's events shown by the chat's view (the demo prints the model's text itself, after each turn)."""

    def __init__(self, store_root: Path) -> None:
        self.store_root = store_root
        self.view = TurnView(model=TARGET.model, spinner=False, console=console, indent=3)  # paths whole: openable

    def __call__(self, event: AgentEvent) -> None:
        if not isinstance(event, TextDelta):
            self.view(event)


def _width() -> int:
    """The demo's width: the terminal's, else `COLUMNS` or a terminal rich found, else `PIPED_WIDTH`."""
    if console.is_terminal or os.environ.get("COLUMNS", "").isdigit():
        return console.width
    for fd in (0, 2):
        try:
            return os.get_terminal_size(fd).columns or PIPED_WIDTH
        except OSError:
            continue
    return PIPED_WIDTH


@contextmanager
def _layout() -> Iterator[None]:
    """While the demo runs, the console wraps at its width (it soft-wraps for the other commands)."""
    width, fixed = console.width, console.fixed_wrap
    console.width, console.soft_wrap = _width(), False
    try:
        yield
    finally:
        console.width, console.fixed_wrap = width, fixed


def _show_context(workspace: Path) -> None:
    from lamina.cli._context_report import show_context

    show_context(workspace, "anthropic", None, None, show_text=False, as_json=False)


async def _session(
    store: SessionStore, workspace: Path, provider: ScriptedProvider, events: _Events
) -> list[tuple[str, TurnOutcome]]:
    rows: list[tuple[str, TurnOutcome]] = []

    async def turn(agent: Agent, label: str, text: str) -> None:
        console.print()
        say(f"[bold]{label}[/bold] [dim](mode {agent.engine.settings.mode})[/dim]  {safe(text)}")
        outcome = await agent.run_turn(text)
        say(f"[bold]model:[/bold] {safe(outcome.text)}", indent=3)
        rows.append((label, outcome))

    summariser = DeterministicSummariser()  # offline: no model call for the summary
    agent = open_agent(
        store,
        provider,
        workspace=workspace,
        options=AgentOptions(mode="plan", on_event=events, summariser=summariser, keep_tokens=400),
    )
    session_id = agent.engine.session.id
    await turn(agent, "turn 1", "total() returns the wrong number. Can you find out why? Don't change anything yet.")
    plan = agent.plan
    assert plan is not None
    console.print()
    say(f"[bold]the plan[/bold] [dim]({safe(plan.plan_path)})[/dim]")
    for line in plan.text.rstrip().splitlines():
        say(safe(line), indent=3)
    console.print()
    say("[bold]Accept & Compact[/bold]: compact first, then run the plan in the fresh context")
    executed = await agent.accept_plan(compact=True, draft="Is there anything worrying in build.log?")
    boundary = agent.engine.boundary
    if boundary is not None:
        say("the user's words, verbatim after the summary:", indent=3)
        for words in boundary.lane.messages:
            say(f"[dim]turn {words.turn}:[/dim] {safe(words.text)}", indent=5)
    if executed is not None:
        say(f"[bold]model:[/bold] {safe(executed.text)}", indent=3)
        rows.append(("plan", executed))
    draft = (agent.plan.draft_input if agent.plan else None) or "Is there anything worrying in build.log?"
    say(f"[dim]the unsent draft kept with the plan comes back: {safe(draft)}[/dim]", indent=3)
    say(f"[dim]the plan ran in execute mode; the session is back in {agent.engine.settings.mode} mode[/dim]", indent=3)
    say("[bold]/mode execute[/bold] [dim](the user moves the mode; the plan never does)[/dim]")
    agent.set_mode("execute")
    await turn(agent, "turn 2", draft)
    agent.engine.session.close()

    console.print()
    say(f"[bold]resume[/bold] session {safe(session_id)} from disk (a new process would do the same)")
    resumed = open_agent(
        store,
        provider,
        workspace=workspace,
        session_id=session_id,
        options=AgentOptions(on_event=events, summariser=summariser),
    )
    say(f"loaded {resumed.engine.session.loaded_count()} entries; mode {resumed.engine.settings.mode}", indent=3)
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


def demo_store(explicit: str | None = None) -> Path | None:
    """The store the user asked the demo to keep its session in, if any.

    Args:
        explicit: The `--store` given, if any.

    Returns:
        `explicit`, else `$LAMINA_STORE`, else None (the demo makes a temporary store).
    """
    explicit = explicit or os.environ.get("LAMINA_STORE")
    return Path(explicit) if explicit else None


def _command(parts: list[str], indent: int) -> list[str]:
    """A shell command as markup lines that fit the console, continued with a backslash (safe to paste)."""
    width = console.width - indent - 2
    lines = [safe(parts[0])]
    used = len(parts[0])
    for part in parts[1:]:
        if used + 1 + len(part) > width:
            lines[-1] += " \\"
            lines.append("    " + safe(part))
            used = 4 + len(part)
        else:
            lines[-1] += " " + safe(part)
            used += 1 + len(part)
    return lines


def _where_kept(store: Path, session_id: str, *, temporary: bool, kept: bool) -> None:
    """Say where the session is kept, and how to open it in `lamina serve` (a temporary store: only when `kept`)."""
    lamina = Path(sys.executable).parent / "lamina"
    try:
        command = str(lamina.relative_to(Path.cwd())) if lamina.exists() else "lamina"
    except ValueError:
        command = str(lamina)
    if not kept:
        console.rule("Where the session was kept")
        say(
            "The session was in a temporary store, removed now. To inspect it in the browser with lamina serve, "
            f"run the demo with --keep: {safe(command)} demo --keep",
            indent=2,
        )
        return
    console.rule("Where the session is kept (inspect it with lamina serve)")
    if temporary:
        say(
            f"The session is kept in {safe(store)}, a temporary folder (delete it when done: rm -r {safe(store)}).",
            indent=2,
        )
    else:
        say(f"The session is kept in your store {safe(store)}, with the others.", indent=2)
    say("Inspect it in the browser (read-only; Ctrl-C stops the server):", indent=2)
    for line in _command([command, "--store", str(store), "serve", "--session", session_id, "--open"], indent=4):
        console.print(f"    {line}", soft_wrap=True)
    say(f"then open http://127.0.0.1:8765/sessions/{safe(session_id)}", indent=2)


def main(store: str | None = None, *, keep: bool = False) -> int:
    """Run the demo session and print what it shows.

    The session is kept (for `lamina serve`) in the store the user named (see `demo_store`); else
    it is written to a new temporary folder, removed at the end unless `keep` (then the demo says
    where it is, and how to delete it).

    Args:
        store: The session folder to keep the session in.
        keep: Keep the temporary store (`lamina demo --keep`).

    Returns:
        The exit code, 0.
    """
    chosen = demo_store(store)
    store_root = chosen if chosen is not None else Path(tempfile.mkdtemp(prefix="lamina-demo-store-"))
    try:
        with _layout():
            session_id = _run(store_root)
            _where_kept(store_root, session_id, temporary=chosen is None, kept=chosen is not None or keep)
    finally:
        if chosen is None and not keep:
            shutil.rmtree(store_root, ignore_errors=True)
    return 0


def _run(store_root: Path) -> str:
    """The demo in a temporary sample workspace (removed after); the session's id."""
    with tempfile.TemporaryDirectory(prefix="lamina-demo-") as tmp:
        workspace = _sample_workspace(Path(tmp))
        sessions = open_store(store_root)
        console.rule("What an agent sees in the sample workspace (lamina context)")
        _show_context(workspace)
        console.rule("A scripted session: real tools, simulated cache billing")
        clock = [time.time()]

        def tick() -> float:
            clock[0] += 20.0  # each model call starts 20 s after the previous one
            return clock[0]

        provider = ScriptedProvider(_script(), target=TARGET, simulator=AnthropicCacheSimulator(), clock=tick)
        rows = asyncio.run(_session(sessions, workspace, provider, _Events(store_root)))
        console.rule("Per turn (cache reads and writes from the cache simulator)")
        console.print(_table(rows))
        fixed = (workspace / "app.py").read_text()
        console.print()
        say(f"app.py now: {safe(repr(fixed.strip()))}")
        return rows[0][1].turn.session_id
