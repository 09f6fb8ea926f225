"""`lamina chat`: an interactive session in the current directory (I/O).

Ctrl-C while a turn runs cancels the turn (the log stays well-formed: open tool calls get an
"interrupted" result); at the prompt, Ctrl-C clears the line and a second one in a row quits, as
does Ctrl-D, and Ctrl-O opens the model's folded thinking. Heavy modules are imported when the
command runs, so `lamina --help` stays fast.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lamina.cli._trust_commands import TRUST_OPTION_HELP

if TYPE_CHECKING:
    from prompt_toolkit.key_binding import KeyBindings

    from lamina.agent import Agent
    from lamina.cli._config import Settings
    from lamina.cli._turn_view import TurnView
    from lamina.cli._turns import ChatState
    from lamina.cli._user_input import LineReader
    from lamina.session import SessionStore

ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="anthropic:ID | openai:ID | openai-responses:ID | openai-compat:URL#ID | scripted:FILE | demo "
        "(demo: a scripted session in a sample workspace, no API key; default: the config file, "
        "else anthropic:claude-sonnet-5)",
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
TrustOption = Annotated[bool, typer.Option("--trust", help=TRUST_OPTION_HELP)]
AdoptOption = Annotated[
    bool,
    typer.Option(
        "--adopt-bundle-settings",
        help="Resume an imported session on the model, mode and preset its bundle recorded (not adopted by default).",
    ),
]
ThinkingOption = Annotated[
    str | None,
    typer.Option(
        "--thinking",
        help="Thinking: off, adaptive, or a budget in tokens (N, at least 1024; Anthropic). Default: the config file.",
        show_default=False,
    ),
]
EffortOption = Annotated[
    str | None,
    typer.Option(
        "--effort",
        help="Reasoning effort: none, minimal, low, medium, high, xhigh or max (as the model takes them).",
        show_default=False,
    ),
]
ReasoningSummaryOption = Annotated[
    str | None,
    typer.Option(
        "--reasoning-summary",
        help="Reasoning summaries to return (OpenAI Responses): auto, concise or detailed.",
        show_default=False,
    ),
]
MaxOutputOption = Annotated[
    int | None,
    typer.Option(
        "--max-output-tokens",
        metavar="N",
        help="The most tokens an answer may have (every provider; default: the config file, else the provider's own).",
        min=1,
        show_default=False,
    ),
]
VerboseOption = Annotated[
    bool,
    typer.Option("--verbose", "-v", help="Show internals too: a rewind's entry ids and what the model is sent."),
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
    trust: TrustOption = False,
    adopt_bundle_settings: AdoptOption = False,
    thinking: ThinkingOption = None,
    effort: EffortOption = None,
    reasoning_summary: ReasoningSummaryOption = None,
    max_output_tokens: MaxOutputOption = None,
    verbose: VerboseOption = False,
) -> None:
    """Chat with an agent in the current directory (API keys from the usual environment variables)."""
    import asyncio
    import functools
    import os

    from lamina.cli._config import settings_or_abort
    from lamina.cli._console import abort, err
    from lamina.cli._demo_chat import DEMO_MODEL, demo_workspace
    from lamina.cli._reasoning_settings import flags_table
    from lamina.cli._session import clean_up_empty_sessions, latest_session, settings_for
    from lamina.cli._store_commands import store_or_abort
    from lamina.errors import LaminaError, UsageError

    try:
        reasoning = flags_table(thinking, effort, reasoning_summary)
    except UsageError as exc:
        abort(str(exc))
    workspace = Path.cwd()
    store = store_or_abort(ctx)
    load = functools.partial(
        settings_or_abort,
        workspace,
        model=model,
        mode=mode,
        preset=preset,
        custom_preset=custom_preset,
        reasoning=reasoning,
        max_output_tokens=max_output_tokens,
    )
    settings = _trusted_settings(workspace, load, given=trust)
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
        # the session's model, mode and preset (an imported one's bundle's only when adopted)
        settings = settings_for(store, session_id, settings, adopt_bundle=adopt_bundle_settings)
        if settings.model == DEMO_MODEL:  # the offline demo runs in its sample workspace
            workspace = demo_workspace(fresh=session_id is None)
            os.chdir(workspace)
        asyncio.run(_chat(store, settings, workspace=workspace, session_id=session_id, verbose=verbose))
    except LaminaError as exc:
        abort(str(exc))
    except KeyboardInterrupt:  # outside a turn and outside the prompt: between the two
        err.print("\n[dim]interrupted[/dim]")
    finally:
        store.close()  # a database store's connections; nothing for a folder


def _trusted_settings(workspace: Path, load: Callable[..., Settings], *, given: bool) -> Settings:
    """The settings, with the workspace's trust: `--trust`, recorded, or asked for (once, in a terminal).

    A terminal is asked only when the untrusted workspace would configure something; a pipe gets
    the one line `lamina run` prints.
    """
    import sys

    from lamina.cli._console import abort, err, safe
    from lamina.cli._trust_commands import ask_to_trust, untrusted_config
    from lamina.errors import ConfigError
    from lamina.workspace import WorkspaceTrust, workspace_trust

    try:
        trust = WorkspaceTrust.TRUSTED if given else workspace_trust(workspace)
    except ConfigError as exc:
        abort(str(exc))
    settings = load(trust=trust)
    untrusted = untrusted_config(workspace, settings)
    if untrusted is None:
        return settings
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        err.print(f"[yellow]{safe(untrusted.notice())}[/yellow]")
        return settings
    try:
        trusted = ask_to_trust(untrusted)
    except ConfigError as exc:
        abort(str(exc))
    except typer.Abort:  # Ctrl-C or Ctrl-D at the question
        raise typer.Exit(130) from None
    return load(trust=WorkspaceTrust.TRUSTED) if trusted else settings


def _pick_session(store: SessionStore, workspace: Path) -> str | None:
    """`--resume` without an id: list this directory's sessions (else all) and ask for a number until one fits."""
    from lamina.cli._console import err, safe
    from lamina.cli._resume_picker import chosen_row, print_session_rows, session_rows

    rows = session_rows(store, workspace, limit=20, everywhere=True)
    if not rows:
        err.print("[dim]no sessions to resume: starting a new one[/dim]")
        return None
    print_session_rows(rows)
    while True:
        answer = typer.prompt("resume which (a number or an id)", default="1", err=True)
        row = chosen_row(rows, answer)
        if row is not None:
            return row.summary.id
        err.print(f"not a number between 1 and {len(rows)} or a listed id: {safe(repr(answer))}")


async def _chat(
    store: SessionStore, settings: Settings, *, workspace: Path, session_id: str | None, verbose: bool = False
) -> None:
    """The chat: one session after another while `/sessions N` switches (the settings: the next one's own)."""
    import dataclasses
    import sys

    from lamina.agent import SkillCatalogue
    from lamina.cli._commands import COMMANDS
    from lamina.cli._console import err
    from lamina.cli._session import settings_for
    from lamina.cli._user_input import PipeReader, TerminalReader, history_path

    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    reader: LineReader
    shown: list[TurnView] = []  # the session's view, which Ctrl-O opens the thinking of
    if interactive:
        catalogue = SkillCatalogue(workspace)
        reader = TerminalReader(
            COMMANDS,
            lambda: [s.name for s in catalogue.scan.skills],
            history=history_path(),
            keys=_expand_key(shown),
        )
    else:
        reader = PipeReader(lambda text: err.print(text, end="", markup=False))
    try:
        while True:
            switch_to = await _session_chat(
                store,
                settings,
                reader,
                workspace=workspace,
                session_id=session_id,
                interactive=interactive,
                shown=shown,
                verbose=verbose,
            )
            if switch_to is None:
                return
            # the command line chose the first session's settings; the next one runs with its own
            chosen = {k: v for k, v in settings.origins.items() if v != "command line"}
            settings = settings_for(store, switch_to, dataclasses.replace(settings, origins=chosen))
            session_id = switch_to
    finally:
        if isinstance(reader, TerminalReader):
            reader.close()


def _expand_key(shown: list[TurnView]) -> KeyBindings:
    """Ctrl-O at the prompt: the session's view opens its folded thinking above the prompt."""
    from prompt_toolkit.application import run_in_terminal
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

    bindings = KeyBindings()

    @bindings.add("c-o")
    def _expand(event: KeyPressEvent) -> None:
        if shown:
            run_in_terminal(shown[-1].open_thinking)

    return bindings


async def _session_chat(
    store: SessionStore,
    settings: Settings,
    reader: LineReader,
    *,
    workspace: Path,
    session_id: str | None,
    interactive: bool,
    shown: list[TurnView],
    verbose: bool = False,
) -> str | None:
    """Chat in one session until the user quits (None) or switches to another session (its id)."""
    from lamina.cli._approval import Approver
    from lamina.cli._console import err, safe
    from lamina.cli._plan_decisions import resume_plan
    from lamina.cli._resume_picker import print_recap
    from lamina.cli._session import make_provider, model_name, remove_if_empty, session_agent
    from lamina.cli._turn_view import TurnView
    from lamina.cli._turns import ChatState
    from lamina.cli._user_input import TerminalReader

    provider = make_provider(settings.model, settings)
    view = TurnView(model=model_name(settings.model), spinner=interactive and err.is_terminal)
    if isinstance(reader, TerminalReader):
        view.show_type_ahead(reader.ahead)
    shown[:] = [view]
    state = ChatState(settings)
    state.verbose = verbose
    async with session_agent(
        store,
        provider,
        settings,
        workspace=workspace,
        session_id=session_id,
        ask=Approver(reader, settings.permissions, workspace=workspace, trusted=settings.trust.trusted),
        interactive=interactive,
        on_event=view,
        on_compaction=view.compaction,
    ) as agent:
        state.session_id = agent.engine.session.id
        resumed = " (resumed)" if session_id else ""
        err.print(
            f"[dim]session {safe(state.session_id)}{resumed} · {safe(settings.model)}"
            f" · mode {agent.engine.settings.mode} · /help for commands[/dim]"
        )
        if session_id:
            print_recap(agent.engine.view, summarised=agent.engine.boundary is not None)
        try:
            await resume_plan(agent, reader, view, state)
            switch_to = await _loop(agent, reader, view, state, store=store, workspace=workspace)
        finally:
            view.finish()
    if remove_if_empty(store, state.session_id) or switch_to is not None:
        return switch_to
    err.print(
        f"[dim]resume with: lamina chat --resume {safe(state.session_id)} --model {safe(state.spec)}[/dim]",
        soft_wrap=True,
    )
    return None


async def _loop(
    agent: Agent, reader: LineReader, view: TurnView, state: ChatState, *, store: SessionStore, workspace: Path
) -> str | None:
    """Messages and commands until the user quits (None) or `/sessions N` switches (that session's id)."""
    from lamina.attachments import dropped_files
    from lamina.cli._commands import Chat, Leave, command
    from lamina.cli._console import err
    from lamina.cli._plan_decisions import decide_plans
    from lamina.cli._turns import turn

    chat = Chat(agent, reader, view, state, store, workspace)
    armed = False  # a Ctrl-C at the prompt arms quitting; the next one quits
    while True:
        draft, state.draft = state.draft, ""
        try:
            line = await reader.message(draft, mode=agent.engine.settings.mode)
        except EOFError:
            return None
        except KeyboardInterrupt:
            if armed:
                return None
            armed = True
            err.print("[dim](Ctrl-C again or Ctrl-D to quit)[/dim]")
            continue
        armed = False
        text = line.strip()
        if not text:
            continue
        if text.startswith("/") and not text.startswith("//"):
            leave = await command(text, chat)
            if isinstance(leave, Leave):
                return leave.switch_to
            continue
        message = line.rstrip()
        attachments, state.attachments = state.attachments, []
        message, dropped = dropped_files(message[1:] if text.startswith("//") else message)  # files dragged in
        outcome = await turn(agent, view, message, [*attachments, *dropped])
        await decide_plans(agent, reader, view, state, outcome)
