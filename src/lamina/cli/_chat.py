"""`lamina chat`: an interactive session in the current directory (I/O).

Ctrl-C while a turn runs cancels the turn (the log stays well-formed: open tool calls get an
"interrupted" result); at the prompt, Ctrl-C clears the line and a second one in a row quits, as
does Ctrl-D. Heavy modules are imported when the command runs, so `lamina --help` stays fast.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, TypeVar

import typer

if TYPE_CHECKING:
    from lamina.agent import Agent, TurnOutcome
    from lamina.cli._config import Settings
    from lamina.cli._reader import LineReader
    from lamina.cli._view import TurnView
    from lamina.session import SessionStore

_T = TypeVar("_T")

COMMANDS: Final = (
    "/help",
    "/model",
    "/mode",
    "/plan",
    "/attach",
    "/compact",
    "/branch",
    "/context",
    "/sessions",
    "/quit",
    "/exit",
)
HELP: Final = """\
/help              this list
/model SPEC        switch the model (anthropic:ID, openai:ID, openai-responses:ID, openai-compat:URL#ID)
/mode [MODE]       show or switch the permission mode: explore, plan, ask or execute
/plan [DECISION]   show the plan, or decide: accept, compact (Accept & Compact), reject FEEDBACK, cancel
/attach [PATH]     attach a file to your next message (image, PDF, Office, e-mail, calendar, text)
/compact [FOCUS]   compact the conversation now (the log keeps everything)
/branch [ENTRY]    go back to before your last message, put back in the input line (or branch at an entry
                   of `lamina sessions show ID --tree`); the old path stays in the log
/context           how full the context window is, and the next request's budget by tier
/sessions          recent sessions in this directory
/quit              leave (also Ctrl-D, or Ctrl-C twice)
Enter sends; Alt-Enter or Ctrl-J starts a new line; a paste is one message. Ctrl-C cancels a running turn."""


ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="anthropic:ID | openai:ID | openai-responses:ID | openai-compat:URL#ID | scripted:FILE "
        "(default: the config file, else anthropic:claude-sonnet-5)",
    ),
]
ModeOption = Annotated[
    str | None,
    typer.Option("--mode", help="Permission mode of a new session: explore, plan, ask or execute (default: ask)."),
]
ResumeOption = Annotated[
    str | None,
    typer.Option("--resume", help="Continue this session id; without an id, pick one from a list.", show_default=False),
]
ContinueOption = Annotated[
    bool, typer.Option("--continue", "-c", help="Continue the latest session started in this directory.")
]
PresetOption = Annotated[
    str | None, typer.Option("--preset", help="System prompt preset: default, mini or custom (default: default).")
]
CustomPresetOption = Annotated[
    Path | None,
    typer.Option(
        "--custom-preset", help="TOML file of the custom preset (implies --preset custom).", show_default=False
    ),
]


def chat(
    ctx: typer.Context,
    model: ModelOption = None,
    resume: ResumeOption = None,
    continue_: ContinueOption = False,
    mode: ModeOption = None,
    preset: PresetOption = None,
    custom_preset: CustomPresetOption = None,
) -> None:
    """Chat with an agent in the current directory (API keys from the usual environment variables)."""
    import asyncio

    from lamina.cli._config import settings_or_abort
    from lamina.cli._console import abort, err
    from lamina.cli._session import clean_up_empty_sessions, latest_session
    from lamina.cli._store import store_or_abort
    from lamina.errors import LaminaError

    workspace = Path.cwd()
    store = store_or_abort(ctx)
    settings = settings_or_abort(workspace, model=model, mode=mode, preset=preset, custom_preset=custom_preset)
    if resume is not None and continue_:
        abort("use --resume ID or --continue, not both")
    session_id = resume or None
    try:
        if continue_:
            session_id = latest_session(store, workspace)
            if session_id is None:
                err.print("[dim]no earlier session in this directory: starting a new one[/dim]")
        elif resume == "":
            session_id = _pick_session(store, workspace)
        clean_up_empty_sessions(store)
        asyncio.run(_chat(store, settings, workspace=workspace, session_id=session_id))
    except LaminaError as exc:
        abort(str(exc))
    except KeyboardInterrupt:  # outside a turn and outside the prompt: between the two
        err.print("\n[dim]interrupted[/dim]")
    finally:
        store.close()  # a database store's connections; nothing for a folder


def _pick_session(store: SessionStore, workspace: Path) -> str | None:
    """`--resume` without an id: list this directory's sessions (else all) and ask for a number."""
    from lamina.cli._console import abort, err, safe
    from lamina.cli._session import is_listed, when

    rows = [r for r in store.list() if is_listed(r) and r.problem is None]
    here = [r for r in rows if r.cwd == str(workspace)]
    rows = (here or rows)[:20]
    if not rows:
        err.print("[dim]no sessions to resume: starting a new one[/dim]")
        return None
    for number, row in enumerate(rows, 1):
        err.print(f"{number:>3}  {safe(when(row.updated_at))}  [dim]{safe(row.id)}[/dim]  {safe(row.title)}")
    answer = typer.prompt("resume which", default="1", err=True)
    try:
        return rows[int(answer) - 1].id
    except (ValueError, IndexError):
        abort(f"not a number between 1 and {len(rows)}: {answer!r}")


async def _chat(store: SessionStore, settings: Settings, *, workspace: Path, session_id: str | None) -> None:
    import sys

    from lamina.agent import SkillCatalogue
    from lamina.cli._approval import Approver
    from lamina.cli._console import err, safe
    from lamina.cli._reader import PipeReader, TerminalReader, history_path
    from lamina.cli._session import make_provider, model_name, remove_if_empty, session_agent
    from lamina.cli._view import TurnView

    provider = make_provider(settings.model, settings)
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    reader: LineReader
    if interactive:
        catalogue = SkillCatalogue(workspace)
        reader = TerminalReader(COMMANDS, lambda: [s.name for s in catalogue.scan.skills], history=history_path())
    else:
        reader = PipeReader(lambda text: err.print(text, end="", markup=False))
    view = TurnView(model=model_name(settings.model), spinner=interactive and err.is_terminal)
    state = _State(settings)
    async with session_agent(
        store,
        provider,
        settings,
        workspace=workspace,
        session_id=session_id,
        ask=Approver(reader.answer),
        interactive=interactive,
        on_event=view,
        on_compaction=view.compaction,
    ) as agent:
        state.session_id = agent.engine.session.id
        resumed = " (resumed)" if session_id else ""
        err.print(
            f"[dim]session {safe(state.session_id)}{resumed} · {safe(settings.model)} · mode {agent.engine.mode}"
            " · /help for commands[/dim]"
        )
        try:
            await _resume_plan(agent, reader, view, state)
            await _loop(agent, reader, view, state, store=store, workspace=workspace)
        finally:
            view.finish()
    if remove_if_empty(store, state.session_id):
        return
    err.print(f"[dim]resume with: lamina chat --resume {safe(state.session_id)} --model {safe(state.spec)}[/dim]")


class _State:
    """What slash commands change during a chat."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.spec = settings.model
        self.session_id = ""
        self.attachments: list[Path] = []
        """Files `/attach` queued for the next message."""
        self.draft = ""
        """Text to put back in the input at the next prompt (the unsent draft kept with an accepted plan)."""


async def _loop(
    agent: Agent, reader: LineReader, view: TurnView, state: _State, *, store: SessionStore, workspace: Path
) -> None:
    from lamina.attachments import dropped_files
    from lamina.cli._console import err

    chat = _Chat(agent, reader, view, state, store, workspace)
    armed = False  # a Ctrl-C at the prompt arms quitting; the next one quits
    while True:
        draft, state.draft = state.draft, ""
        try:
            line = await reader.message(draft)
        except EOFError:
            return
        except KeyboardInterrupt:
            if armed:
                return
            armed = True
            err.print("[dim](Ctrl-C again or Ctrl-D to quit)[/dim]")
            continue
        armed = False
        text = line.strip()
        if not text:
            continue
        if text.startswith("/") and not text.startswith("//"):
            if await _command(text, chat):
                return
            continue
        message = line.rstrip()
        attachments, state.attachments = state.attachments, []
        message, dropped = dropped_files(message[1:] if text.startswith("//") else message)  # files dragged in
        outcome = await _turn(agent, view, message, [*attachments, *dropped])
        await _decide_plans(agent, reader, view, state, outcome)


async def _cancellable(work: Coroutine[Any, Any, _T], view: TurnView) -> _T | None:
    """Run a coroutine as a task that Ctrl-C (SIGINT) cancels; None when it was cancelled."""
    import asyncio
    import signal

    from lamina.cli._console import err

    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    loop.add_signal_handler(signal.SIGINT, task.cancel)
    try:
        return await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # we are being cancelled ourselves, not just the turn
        view.finish()
        err.print("[yellow]⏹ interrupted[/yellow] [dim](the turn was cancelled; the session is intact)[/dim]")
        return None
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        view.finish()


async def _turn(agent: Agent, view: TurnView, text: str, attachments: Sequence[Path] = ()) -> TurnOutcome | None:
    return await _drive(agent, view, agent.run_turn(text, attachments))


async def _drive(agent: Agent, view: TurnView, work: Coroutine[Any, Any, TurnOutcome | None]) -> TurnOutcome | None:
    """Run a turn (or a plan's execution) that Ctrl-C can cancel; errors are printed, the footer follows."""
    from lamina.cli._console import err, safe
    from lamina.errors import LaminaError

    view.waiting()
    try:
        outcome = await _cancellable(work, view)
    except LaminaError as exc:
        view.finish()
        err.print(f"[red]error:[/red] {safe(exc)}")
        return None
    if outcome is not None:
        view.footer(
            outcome,
            context_tokens=agent.engine.calibrated_context_tokens(),
            context_window=agent.provider.capabilities.context_window,
        )
    return outcome


# -- plans ---------------------------------------------------------------------------------------------

PLAN_QUESTION: Final = "plan: [a]ccept · accept & [c]ompact · [r]eject · Enter: decide later (/plan) › "
"""Asked after a turn that submitted a plan; text after the letter is kept as your draft."""


async def _resume_plan(agent: Agent, reader: LineReader, view: TurnView, state: _State) -> None:
    """On opening a session: an accepted plan goes on where it stopped; an open one is announced."""
    from lamina.cli._console import err, safe
    from lamina.cli._view import plan_line
    from lamina.engine import OPEN_STATES, next_step

    plan = agent.plan
    if plan is None:
        return
    if next_step(plan) is not None:
        err.print(f"[magenta]◆ plan[/magenta] {safe(repr(plan.title))} was accepted: carrying on where it stopped")
        state.draft = plan.draft_input or ""
        outcome = await _drive(agent, view, agent.resume_plan())
        await _decide_plans(agent, reader, view, state, outcome)
    elif plan.state in OPEN_STATES:
        err.print(f"[magenta]◆ plan[/magenta] {safe(plan_line(plan))}")


async def _decide_plans(
    agent: Agent, reader: LineReader, view: TurnView, state: _State, outcome: TurnOutcome | None
) -> None:
    """After a turn that submitted a plan: show it and ask for the decision (again after a rejection)."""
    while outcome is not None and outcome.stop_reason == "plan_submitted":
        _print_plan(agent)
        try:
            answer = await reader.answer(PLAN_QUESTION)
        except (EOFError, KeyboardInterrupt):
            return
        choice, _, rest = answer.strip().partition(" ")
        decision = {"a": "accept", "c": "compact", "r": "reject"}.get(choice.lower(), choice.lower())
        if decision not in ("accept", "compact", "reject"):
            return  # later: /plan decides
        outcome = await _plan_decision(agent, reader, view, state, decision, rest.strip())


async def _plan_decision(
    agent: Agent, reader: LineReader, view: TurnView, state: _State, decision: str, arg: str
) -> TurnOutcome | None:
    """Carry out one decision on the plan; the outcome of the turn it ran, if any."""
    from lamina.cli._console import err, safe
    from lamina.errors import LaminaError

    work: Coroutine[Any, Any, TurnOutcome | None]
    try:
        match decision:
            case "accept" | "compact":
                work = agent.accept_plan(compact=decision == "compact", draft=arg or None)
            case "reject":
                feedback = arg or (await reader.answer("what should change? ")).strip()
                if not feedback:
                    err.print("[dim]not rejected: give the feedback the plan should follow[/dim]")
                    return None
                work = agent.reject_plan(feedback)
            case "cancel":
                agent.cancel_plan("cancelled by the user")
                return None
            case _:
                err.print(f"unknown plan decision {safe(repr(decision))}; use accept, compact, reject or cancel")
                return None
    except (LaminaError, EOFError, KeyboardInterrupt) as exc:
        err.print(f"[red]error:[/red] {safe(exc)}" if isinstance(exc, LaminaError) else "")
        return None
    outcome = await _drive(agent, view, work)
    if decision != "reject" and arg:
        state.draft = arg  # back in the input once the plan ran
    return outcome


def _print_plan(agent: Agent) -> None:
    """`/plan`: the latest plan, its state, its file and its text."""
    from lamina.cli._console import err, out, safe
    from lamina.cli._view import plan_line

    plan = agent.plan
    if plan is None:
        err.print("[dim]no plan in this session yet (plan mode: /mode plan, then ask for one)[/dim]")
        return
    err.print(f"[magenta]◆ plan[/magenta] {safe(plan_line(plan))}")
    if plan.plan_path:
        err.print(f"[dim]{safe(plan.plan_path)}[/dim]")
    out.print(safe(plan.text.rstrip()))
    if plan.draft_input:
        err.print(f"[dim]your draft kept with it: {safe(plan.draft_input)}[/dim]")


@dataclass(frozen=True, slots=True)
class _Chat:
    """What a slash command works on: the agent, the terminal, the chat's state, the store and the folder."""

    agent: Agent
    reader: LineReader
    view: TurnView
    state: _State
    store: SessionStore
    workspace: Path


async def _command(text: str, chat: _Chat) -> bool:
    """Run a slash command; True means quit."""
    from lamina.cli._console import err, safe

    name, _, arg = text.partition(" ")
    if name in ("/quit", "/exit"):
        return True
    handler = _HANDLERS.get(name)
    if handler is None:
        err.print(f"unknown command {safe(repr(name))}; /help lists them (start with // to send a slash)")
        return False
    await handler(chat, arg.strip())
    return False


async def _help(chat: _Chat, arg: str) -> None:
    """`/help`: the commands and the keys."""
    from lamina.cli._console import err, safe

    err.print(safe(HELP))


async def _mode(chat: _Chat, mode: str) -> None:
    """`/mode [MODE]`: switch the permission mode (when given), then show it."""
    from lamina.cli._console import err, safe

    if mode:
        try:
            chat.agent.set_mode(mode)
        except ValueError:
            err.print(f"unknown mode {safe(repr(mode))}; use explore, plan, ask or execute")
            return
    err.print(f"[dim]mode {chat.agent.engine.mode}[/dim]")


async def _model(chat: _Chat, spec: str) -> None:
    """`/model [SPEC]`: show the model, or switch to `spec` (the previous provider is closed)."""
    from lamina.cli._console import err, safe
    from lamina.cli._session import close_provider, make_provider, model_name
    from lamina.errors import LaminaError

    if not spec:
        err.print(f"[dim]model {safe(chat.state.spec)}[/dim]")
        return
    try:
        provider = make_provider(spec, chat.state.settings)
    except LaminaError as exc:
        err.print(f"[red]error:[/red] {safe(exc)}")
        return
    previous, chat.agent.provider = chat.agent.provider, provider
    await close_provider(previous)
    chat.state.spec = spec
    chat.view.model = model_name(spec)
    err.print(f"[dim]model {safe(spec)}[/dim]")


async def _plan(chat: _Chat, arg: str) -> None:
    """`/plan [DECISION]`: show the plan, or carry out a decision on it (and ask again after a rejection)."""
    if not arg:
        _print_plan(chat.agent)
        return
    decision, _, rest = arg.partition(" ")
    ran = await _plan_decision(chat.agent, chat.reader, chat.view, chat.state, decision.lower(), rest.strip())
    await _decide_plans(chat.agent, chat.reader, chat.view, chat.state, ran)


async def _attach(chat: _Chat, arg: str) -> None:
    """`/attach [PATH]`: queue a file for the next message (when given), then show the queue."""
    from lamina.cli._console import err, safe

    path = (chat.workspace / Path(arg).expanduser()) if arg else None
    if path is not None and not path.is_file():
        err.print(f"no file {safe(arg)}")
    elif path is not None:
        chat.state.attachments.append(path)
    queued = ", ".join(p.name for p in chat.state.attachments) or "nothing"
    err.print(f"[dim]attached to your next message: {safe(queued)}[/dim]")


async def _compact(chat: _Chat, focus: str) -> None:
    """`/compact [FOCUS]`: compact now (Ctrl-C cancels it)."""
    from lamina.cli._console import err, safe
    from lamina.errors import LaminaError

    chat.view.waiting("compacting…")
    try:
        outcome = await _cancellable(chat.agent.compact(focus or None), chat.view)
    except LaminaError as exc:
        chat.view.finish()
        err.print(f"[red]error:[/red] {safe(exc)}")
        return
    if outcome is not None:
        err.print(f"[dim]{safe(outcome.message)}[/dim]")


async def _branch_command(chat: _Chat, entry_id: str) -> None:
    """`/branch [ENTRY]`: see `_branch`."""
    _branch(chat.agent, chat.state, entry_id)


async def _context(chat: _Chat, arg: str) -> None:
    """`/context`: see `_print_context`."""
    _print_context(chat.agent)


async def _sessions(chat: _Chat, arg: str) -> None:
    """`/sessions`: this folder's latest sessions with messages, the current one marked."""
    from lamina.cli._console import err, safe
    from lamina.cli._session import is_listed, when

    rows = [r for r in chat.store.list() if is_listed(r) and r.cwd == str(chat.workspace)][:10]
    for row in rows:
        mark = "*" if row.id == chat.state.session_id else " "
        err.print(f"{mark} {safe(when(row.updated_at))}  [dim]{safe(row.id)}[/dim]  {safe(row.title)}")
    if not rows:
        err.print("[dim]no sessions with messages in this directory yet[/dim]")


_HANDLERS: Final[dict[str, Callable[[_Chat, str], Awaitable[None]]]] = {
    "/help": _help,
    "/model": _model,
    "/mode": _mode,
    "/plan": _plan,
    "/attach": _attach,
    "/compact": _compact,
    "/branch": _branch_command,
    "/context": _context,
    "/sessions": _sessions,
}
"""The slash commands but `/quit` and `/exit`, each with its handler (given the text after the name)."""


def _branch(agent: Agent, state: _State, entry_id: str) -> None:
    """`/branch [ENTRY]`: branch the session; a user message's text goes back in the input line.

    Without an entry: before the user's latest message in the provider view (Claude Code's rewind).
    """
    from lamina.cli._console import err, safe
    from lamina.errors import LaminaError
    from lamina.session import UserMessage

    if not entry_id:
        mine = (e for e in reversed(agent.engine.view) if isinstance(e, UserMessage) and not e.by_lamina)
        last = next(mine, None)
        if last is None:
            err.print("no message of yours to go back to; give an entry id (lamina sessions show ID --tree)")
            return
        entry_id = last.id
    try:
        created = agent.branch(entry_id)
    except LaminaError as exc:
        err.print(f"[red]error:[/red] {safe(exc)}")
        return
    err.print(f"[dim]branched at {safe(created.entry_id)}: {safe(created.note)}[/dim]")
    if created.offered_text is not None:
        state.draft = created.offered_text
        err.print("[dim]your message is back in the input line: send it again or edit it[/dim]")


def _print_context(agent: Agent) -> None:
    """`/context`: the live session's context use, its state, and the budget by tier of the next request.

    The budget comes from a preview of the next turn, so `/context` writes nothing to the log.
    """
    from lamina.cli._budget_tables import print_budget
    from lamina.cli._console import err, safe
    from lamina.errors import LaminaError
    from lamina.reports import NEXT_MESSAGE

    engine = agent.engine
    window = agent.provider.capabilities.context_window
    tokens = engine.calibrated_context_tokens()
    threshold = max(0, window - agent.compaction_reserve)
    err.print(f"context   ~{tokens:,} tokens of {window:,} ({100 * tokens / window:.0f}%)")
    err.print(f"compacts  above {threshold:,} tokens (reserve {agent.compaction_reserve:,})")
    boundary = engine.boundary
    err.print(f"summary   {'none yet' if boundary is None else safe(f'{boundary.trigger} compaction')}")
    err.print(f"mode      {engine.mode}")
    skills = ", ".join(engine.skills_in_use) or "none"
    err.print(f"skills    {safe(skills)}")
    sources = ", ".join(engine.active_sources) or "none"
    err.print(f"sources   {safe(sources)}")
    pending = ", ".join(o.kind for o in engine.pending_one_shots) or "none"
    err.print(f"one-shots {safe(pending)} pending")
    try:
        budget = agent.budget()
    except LaminaError as exc:  # the workspace's stable parts could not be read
        err.print(f"[red]error:[/red] budget by tier: {safe(exc)}")
        return
    print_budget(
        budget,
        err,
        note=f" of the next request, with {safe(NEXT_MESSAGE)} standing for your message.",
    )
