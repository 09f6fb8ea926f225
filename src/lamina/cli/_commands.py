"""The slash commands of `lamina chat`: each a handler given the text after its name (I/O)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from lamina.agent import Agent
    from lamina.cli._turn_view import TurnView
    from lamina.cli._turns import ChatState
    from lamina.cli._user_input import LineReader
    from lamina.session import SessionStore

COMMANDS: Final = (
    "/help",
    "/model",
    "/effort",
    "/mode",
    "/plan",
    "/attach",
    "/compact",
    "/branch",
    "/rewind",
    "/context",
    "/sessions",
    "/output",
    "/quit",
    "/exit",
)
HELP_COLUMN: Final = 19
"""Where `/help`'s descriptions start (and their wrapped lines)."""
HELP: Final = """\
/help              this list
/model SPEC        switch the model (anthropic:ID, openai:ID, openai-responses:ID, openai-compat:URL#ID)
/effort [LEVEL]    show the reasoning settings, or set the effort of the next requests: none, minimal, low, \
medium, high, xhigh, max (as the model takes them), or default (left to the model)
/mode [MODE]       show or switch the permission mode: explore, plan, ask or execute
/plan [DECISION]   show the plan, or decide: accept, compact (Accept & Compact), reject FEEDBACK, cancel
/attach [PATH]     attach a file to your next message (image, PDF, Office, e-mail, calendar, text)
/compact [FOCUS]   compact the conversation now (the log keeps everything); `/compact --force [FOCUS]` \
compacts even a short one (all of it summarised, your words kept verbatim)
/branch [ENTRY]    go back to before your last message, put back in the input line (or branch at an entry \
of `lamina sessions show ID --tree`); the old path stays in the log
/rewind [N]        go back to before one of your recent messages (asks which; 1 is the latest), its text put \
back in the input line; Esc twice at an empty prompt goes back to the latest
/context           how full the context window is, and the next request's budget by tier
/sessions [N|ID]   recent sessions in this directory; with a number or an id, switch to that session
/output [N]        the last tool output in full (or the Nth, as a folded result names it)
/quit              leave (also Ctrl-D, or Ctrl-C twice)
Enter sends (during a turn it queues the message); Alt-Enter or Ctrl-J starts a new line; a long paste folds to \
[pasted N lines] and is sent whole. Ctrl-C cancels a running turn."""


@dataclass(frozen=True, slots=True)
class Leave:
    """A command that ends the chat in this session: quitting (`switch_to` None), or switching to another."""

    switch_to: str | None = None


@dataclass(frozen=True, slots=True)
class Chat:
    """What a slash command works on: the agent, the terminal, the chat's state, the store and the folder."""

    agent: Agent
    reader: LineReader
    view: TurnView
    state: ChatState
    store: SessionStore
    workspace: Path


async def command(text: str, chat: Chat) -> Leave | None:
    """Run a slash command; a `Leave` ends the chat in this session (quit, or switch to another one)."""
    from lamina.cli._console import err, safe

    name, _, arg = text.partition(" ")
    if name in ("/quit", "/exit"):
        return Leave()
    handler = _HANDLERS.get(name)
    if handler is None:
        err.print(f"unknown command {safe(repr(name))}; /help lists them (start with // to send a slash)")
        return None
    return await handler(chat, arg.strip())


async def _help(chat: Chat, arg: str) -> None:
    """`/help`: the commands and the keys."""
    from rich.text import Text

    from lamina.cli._console import err, fit

    for line in HELP.splitlines():  # a description's wrapped lines start under its column
        for row in fit(Text(line), err.width, hang=HELP_COLUMN if line.startswith("/") else 2):
            err.print(row, soft_wrap=True)


async def _mode(chat: Chat, mode: str) -> None:
    """`/mode [MODE]`: switch the permission mode (when given), then show it."""
    from lamina.cli._console import err, safe

    if mode:
        try:
            chat.agent.set_mode(mode)
        except ValueError:
            err.print(f"unknown mode {safe(repr(mode))}; use explore, plan, ask or execute")
            return
    err.print(f"[dim]mode {chat.agent.engine.settings.mode}[/dim]")


async def _model(chat: Chat, spec: str) -> None:
    """`/model [SPEC]`: show the model, or switch to `spec` (the previous provider is closed)."""
    from lamina.cli._console import err, safe
    from lamina.cli._session import (
        close_provider,
        compaction_summariser,
        make_provider,
        model_name,
        note_provider_switch,
    )
    from lamina.errors import LaminaError
    from lamina.providers import discover_capabilities

    if not spec:
        found = chat.agent.provider.capabilities
        err.print(f"[dim]model {safe(chat.state.spec)} · window {found.context_window:,} ({safe(found.source)})[/dim]")
        return
    try:
        provider = make_provider(spec, chat.state.settings)
    except LaminaError as exc:
        err.print(f"[red]error:[/red] {safe(exc)}")
        return
    await discover_capabilities(provider)
    previous, chat.agent.provider = chat.agent.provider, provider
    chat.agent.summariser = compaction_summariser(provider, chat.state.settings, chat.agent.engine.session.id)
    await close_provider(previous)
    moved = spec != chat.agent.engine.settings.recorded.model
    chat.agent.engine.settings.set_model(spec)  # a resumed session runs on it
    chat.state.spec = spec
    chat.view.model = model_name(spec)
    err.print(f"[dim]model {safe(spec)}[/dim]")
    for note in note_provider_switch(chat.agent) if moved else []:
        err.print(f"[dim]{safe(note)}[/dim]")


async def _effort(chat: Chat, level: str) -> None:
    """`/effort [LEVEL]`: set the next requests' effort (when given; recorded), then show the reasoning settings."""
    import dataclasses

    from lamina.cli._console import err, safe
    from lamina.cli._reasoning_settings import reasoning_text, with_effort
    from lamina.cli._session import record_reasoning, set_reasoning
    from lamina.errors import UsageError

    settings = chat.state.settings
    if level:
        try:
            config = with_effort(settings.reasoning, level)
            taken = set_reasoning(chat.agent.provider, config)
        except UsageError as exc:
            err.print(f"[red]error:[/red] {safe(exc)}")
            return
        chat.state.settings = settings = dataclasses.replace(settings, reasoning=config)
        record_reasoning(chat.agent, config)
        if not taken:
            err.print(f"[dim]({safe(chat.state.spec)} takes no reasoning settings: recorded for the next model)[/dim]")
    err.print(f"[dim]reasoning {safe(reasoning_text(settings.reasoning))}[/dim]")


async def _plan(chat: Chat, arg: str) -> None:
    """`/plan [DECISION]`: show the plan, or carry out a decision on it (and ask again after a rejection)."""
    from lamina.cli._plan_decisions import decide_plans, plan_decision, print_plan

    if not arg:
        print_plan(chat.agent)
        return
    decision, _, rest = arg.partition(" ")
    ran = await plan_decision(chat.agent, chat.reader, chat.view, chat.state, decision.lower(), rest.strip())
    await decide_plans(chat.agent, chat.reader, chat.view, chat.state, ran)


async def _attach(chat: Chat, arg: str) -> None:
    """`/attach [PATH]`: queue a file for the next message (when given), then show the queue."""
    from lamina.cli._console import err, safe

    path = (chat.workspace / Path(arg).expanduser()) if arg else None
    if path is not None and not path.is_file():
        err.print(f"no file {safe(arg)}")
    elif path is not None:
        chat.state.attachments.append(path)
    queued = ", ".join(p.name for p in chat.state.attachments) or "nothing"
    err.print(f"[dim]attached to your next message: {safe(queued)}[/dim]")


async def _compact(chat: Chat, arg: str) -> None:
    """`/compact [--force] [FOCUS]`: compact now, `--force` even a conversation that fits (Ctrl-C cancels it)."""
    from lamina.cli._console import err, safe
    from lamina.cli._turns import cancellable
    from lamina.errors import LaminaError

    first, _, rest = arg.partition(" ")
    force = first == "--force"
    focus = rest.strip() if force else arg
    chat.view.waiting("compacting…")
    try:
        outcome = await cancellable(chat.agent.compact(focus or None, force=force), chat.view)
    except LaminaError as exc:
        chat.view.finish()
        err.print(f"[red]error:[/red] {safe(exc)}")
        return
    if outcome is not None:
        hint = " (/compact --force compacts it anyway)" if outcome.status == "nothing_to_compact" else ""
        err.print(f"[dim]{safe(outcome.message)}{hint}[/dim]")


async def _branch_command(chat: Chat, entry_id: str) -> None:
    """`/branch [ENTRY]`: see `_branch`."""
    _branch(chat.agent, chat.state, entry_id)


async def _context(chat: Chat, arg: str) -> None:
    """`/context`: see `_print_context`."""
    _print_context(chat.agent)


async def _rewind(chat: Chat, arg: str) -> None:
    """`/rewind [N]`: branch before one of the user's recent messages (asked for without `N`; 1 is the latest)."""
    from lamina.cli._console import err
    from lamina.cli._resume_picker import print_rewind_choices, rewind_choices

    choices = rewind_choices(chat.agent.engine.view)
    if not choices:
        err.print("no message of yours to go back to since the last compaction (/branch ENTRY goes further back)")
        return
    if not arg:
        print_rewind_choices(choices)
    number = _number(arg, len(choices)) if arg else await _ask_number(chat.reader, len(choices))
    if number is not None:
        _branch(chat.agent, chat.state, choices[number - 1].id, brief=not chat.state.verbose)


def _number(answer: str, count: int) -> int | None:
    """`answer` as a number from 1 to `count`, or None (and one line saying so)."""
    from lamina.cli._console import err, safe

    if answer.isdigit() and 1 <= int(answer) <= count:
        return int(answer)
    err.print(f"not a number between 1 and {count}: {safe(repr(answer))}")
    return None


async def _output(chat: Chat, arg: str) -> None:
    """`/output [N]`: a tool call's output whole, the last one or the Nth."""
    from lamina.cli._console import err, safe

    if arg and not arg.isdigit():
        err.print(f"not an output number: {safe(repr(arg))} (/output, or /output N as a folded result names it)")
    elif not chat.view.show_output(int(arg) if arg else None):
        err.print(f"[dim]no tool output {safe(arg) + ' ' if arg else ''}in this chat[/dim]")


async def _ask_number(reader: LineReader, count: int) -> int | None:
    """Ask for a number from 1 to `count` until one fits; None when the answer is empty (or Ctrl-C, Ctrl-D)."""
    from lamina.cli._console import err

    while True:
        try:
            answer = (await reader.answer(f"rewind to before which (1-{count}, Enter: none): ")).strip()
        except (EOFError, KeyboardInterrupt):
            answer = ""
        if not answer:
            err.print("[dim]not rewound[/dim]")
            return None
        number = _number(answer, count)
        if number is not None:
            return number


async def _sessions(chat: Chat, arg: str) -> Leave | None:
    """`/sessions [N|ID]`: this folder's latest sessions, the current one marked; with N or an id, switch to it."""
    from lamina.cli._console import err, safe
    from lamina.cli._resume_picker import chosen_row, print_session_rows, session_rows

    rows = session_rows(chat.store, chat.workspace, limit=10, everywhere=False)
    if not arg:
        if rows:
            print_session_rows(rows, current=chat.state.session_id)
            err.print("[dim]/sessions N (or an id) switches to that session[/dim]")
        else:
            err.print("[dim]no sessions with messages in this directory yet[/dim]")
        return None
    row = chosen_row(rows, arg)
    if row is None and arg.isdigit():
        err.print(f"not a number between 1 and {len(rows)}: {safe(repr(arg))} (/sessions lists them)")
        return None
    target = row.summary.id if row is not None else arg
    if target == chat.state.session_id:
        err.print("[dim]that is this session[/dim]")
        return None
    problem = _cannot_open(chat.store, target)
    if problem is not None:
        err.print(f"[red]error:[/red] {safe(problem)}" + ("" if rows else " (/sessions lists them)"))
        return None
    err.print(f"[dim]leaving session {safe(chat.state.session_id)} for {safe(target)}[/dim]")
    return Leave(switch_to=target)


def _cannot_open(store: SessionStore, session_id: str) -> str | None:
    """Why the chat could not continue `session_id` (no such session, another writer has it), or None."""
    from lamina.errors import LaminaError

    try:
        store.open(session_id).close()
    except LaminaError as exc:
        return str(exc)
    return None


_HANDLERS: Final[dict[str, Callable[[Chat, str], Awaitable[Leave | None]]]] = {
    "/help": _help,
    "/model": _model,
    "/effort": _effort,
    "/mode": _mode,
    "/plan": _plan,
    "/attach": _attach,
    "/compact": _compact,
    "/branch": _branch_command,
    "/rewind": _rewind,
    "/context": _context,
    "/sessions": _sessions,
    "/output": _output,
}
"""The slash commands but `/quit` and `/exit`, each with its handler (given the text after the name)."""


def _branch(agent: Agent, state: ChatState, entry_id: str, *, brief: bool = False) -> None:
    """`/branch [ENTRY]`: branch the session; a user message's text goes back in the input line.

    Without an entry: before the user's latest message in the provider view (Claude Code's rewind).
    `brief` (a rewind, unless `--verbose`): one line, the entry ids and what the model sees left
    to the inspector.
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
    if created.offered_text is not None:
        state.draft = created.offered_text
    if brief:
        err.print("[dim]rewound: your message is back in the input line (send it again or edit it)[/dim]")
        return
    err.print(f"[dim]branched at {safe(created.entry_id)}: {safe(created.note)}[/dim]")
    if created.offered_text is not None:
        err.print("[dim]your message is back in the input line: send it again or edit it[/dim]")


def _print_context(agent: Agent) -> None:
    """`/context`: the live session's context use, its state, and the budget by tier of the next request.

    One total: the next request's size, counted part by part as the budget by tier counts it (the
    table's total is the same figure). It comes from a preview of the next turn, so `/context`
    writes nothing to the log. When the budget cannot be built, the engine's running estimate stands in.
    """
    from lamina.cli._budget_tables import print_budget
    from lamina.cli._console import err, safe
    from lamina.compaction import scaled_reserve
    from lamina.errors import LaminaError
    from lamina.reports import NEXT_MESSAGE, BudgetReport

    engine = agent.engine
    window = agent.provider.capabilities.context_window
    budget: BudgetReport | None = None
    try:
        budget = agent.budget()
    except LaminaError as exc:  # the workspace's stable parts could not be read
        err.print(f"[red]error:[/red] budget by tier: {safe(exc)}")
    tokens = budget.total if budget is not None else engine.compactor.calibrated_context_tokens()
    what = "the next request, the total of the budget by tier below" if budget is not None else "estimated"
    reserve = scaled_reserve(agent.compaction_reserve, window)
    threshold = max(0, window - reserve)
    err.print(f"context   ~{tokens:,} tokens of {window:,} ({100 * tokens / window:.0f}%): {what}")
    err.print(f"window    {safe(agent.provider.capabilities.source or 'defaults')}")
    err.print(f"compacts  above {threshold:,} tokens (reserve {reserve:,})")
    boundary = engine.boundary
    err.print(f"summary   {'none yet' if boundary is None else safe(f'{boundary.trigger} compaction')}")
    err.print(f"mode      {engine.settings.mode}")
    skills = ", ".join(engine.settings.skills_in_use) or "none"
    err.print(f"skills    {safe(skills)}")
    sources = ", ".join(engine.settings.active_sources) or "none"
    err.print(f"sources   {safe(sources)}")
    pending = ", ".join(o.kind for o in engine.pending_one_shots) or "none"
    err.print(f"one-shots {safe(pending)} pending")
    if budget is not None:
        print_budget(
            budget,
            err,
            note=f" of the next request, with {safe(NEXT_MESSAGE)} standing for your message; the total is the"
            " context line's figure.",
        )
