"""`lamina chat`: an interactive session in the current directory."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from lamina.activation import SkillWarning
from lamina.agent import Agent, AgentEvent, ModelCallFinished, ToolFinished, ToolStarted, open_agent
from lamina.cli._console import abort, err, out
from lamina.errors import LaminaError
from lamina.providers import Provider, TextDelta, provider_from_spec
from lamina.session.store import LocalSessionStore
from lamina.sources import SourceConnections, find_sources
from lamina.tools.base import PermissionMode
from lamina.tools.rules import Allow, Deny, PermissionRequest

HELP = "/mode explore|ask|execute   /compact [focus]   /quit"


def _print_event(event: AgentEvent) -> None:
    match event:
        case TextDelta(text=text):
            out.print(text, end="", markup=False, highlight=False)
        case ToolStarted(name=name, input=args):
            out.print(f"\n[cyan]→ {name}[/cyan] {dict(args)}", highlight=False)
        case ToolFinished(name=name, is_error=is_error, content=content, full_output_path=path):
            first = content.strip().splitlines()[0][:100] if content.strip() else ""
            where = f" (full output: {path})" if path else ""
            out.print(f"{'[red]✗' if is_error else '[green]✓'}[/] {name}: {first}{where}", highlight=False)
        case SkillWarning(message=message):
            err.print(f"\n[yellow]warning:[/yellow] {escape(message)}", highlight=False)
        case ModelCallFinished(usage=u):
            err.print(f"[dim]  in {u.input} · cache read {u.cache_read} · write {u.cache_write} · out {u.output}[/dim]")


async def _ask(request: PermissionRequest) -> Allow | Deny:
    answer = await asyncio.to_thread(input, f"\nAllow {request.call.name} {dict(request.call.input)}? [y/N] ")
    return Allow() if answer.strip().lower() in {"y", "yes"} else Deny("the user declined this call")


async def _loop(agent: Agent) -> None:
    err.print(f"[dim]session {agent.engine.session.id} · mode {agent.engine.mode} · {escape(HELP)}[/dim]")
    while True:
        try:
            line = await asyncio.to_thread(input, "\n> ")
        except EOFError:
            return
        text = line.strip()
        if not text:
            continue
        if text in {"/quit", "/exit"}:
            return
        if text.startswith("/mode"):
            _, _, mode = text.partition(" ")
            try:
                agent.set_mode(mode.strip())
            except ValueError:
                err.print(f"unknown mode {mode.strip()!r}; use explore, ask or execute")
                continue
            err.print(f"[dim]mode {agent.engine.mode}[/dim]")
            continue
        if text == "/compact" or text.startswith("/compact "):
            focus = text.removeprefix("/compact").strip() or None
            with err.status("compacting…") if err.is_terminal else contextlib.nullcontext():
                outcome = await agent.compact(focus)
            err.print(f"[dim]{outcome.message}[/dim]")
            continue
        if text.startswith("/"):
            err.print(f"unknown command {escape(text.split()[0])!r}; {escape(HELP)}")
            continue
        try:
            await agent.run_turn(text)
        except LaminaError as exc:
            err.print(f"[red]error:[/red] {exc}")
        out.print()


async def _session(store: LocalSessionStore, provider: Provider, *, resume: str | None, mode: str, preset: str) -> None:
    """Connect the workspace's sources, open the agent, chat until /quit, close everything."""
    workspace = Path.cwd()
    scan = find_sources(workspace)
    for problem in scan.problems:
        err.print(f"[yellow]source skipped:[/yellow] {problem}")
    async with SourceConnections(scan.sources) as sources:
        for failure in sources.problems:
            err.print(f"[yellow]source not connected:[/yellow] {failure.slug}: {failure.reason}")
        agent = open_agent(
            store,
            provider,
            workspace=workspace,
            session_id=resume,
            mode=PermissionMode(mode),
            preset=preset,
            ask=_ask,
            on_event=_print_event,
            sources=sources if scan.sources else None,
        )
        try:
            await _loop(agent)
        finally:
            agent.engine.session.close()
            err.print(f"[dim]resume with: lamina chat --resume {agent.engine.session.id}[/dim]")


def chat(
    ctx: typer.Context,
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="anthropic:ID | openai:ID | openai-responses:ID | openai-compat:URL#ID | scripted:FILE",
        ),
    ] = "anthropic:claude-sonnet-5",
    resume: Annotated[str | None, typer.Option("--resume", help="Continue this session id.")] = None,
    mode: Annotated[str, typer.Option("--mode", help="Permission mode of a new session.")] = "ask",
    preset: Annotated[str, typer.Option("--preset", help="System prompt preset.")] = "default",
) -> None:
    """Chat with an agent in the current directory (API keys from the usual environment variables)."""
    root: Path | None = (ctx.find_root().obj or {}).get("store")
    try:
        provider = provider_from_spec(model)
        PermissionMode(mode)
    except (LaminaError, ValueError) as exc:
        abort(str(exc))
    try:
        asyncio.run(_session(LocalSessionStore(root), provider, resume=resume, mode=mode, preset=preset))
    except KeyboardInterrupt:
        err.print("\n[dim]interrupted[/dim]")
    except LaminaError as exc:
        abort(str(exc))
    sys.stdout.flush()
