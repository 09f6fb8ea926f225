"""`lamina proxy`: the loopback proxy in front of a provider, its clients' set-up lines and its report (I/O)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lamina.cli._console import abort, err, out, print_json, safe
from lamina.errors import MissingExtraError

if TYPE_CHECKING:
    from lamina.proxy import Client, EditSettings, ProxyReport

app = typer.Typer(add_completion=False, rich_markup_mode=None, invoke_without_command=True, no_args_is_help=False)

DEFAULT_PORT = 8788


@app.callback()
def proxy(
    ctx: typer.Context,
    port: Annotated[int, typer.Option("--port", help="TCP port to listen on (0: any free one).", min=0, max=65535)] = (
        DEFAULT_PORT
    ),
    host: Annotated[str, typer.Option("--host", help="Address to bind (default: loopback only).")] = "127.0.0.1",
    upstream: Annotated[
        str | None, typer.Option("--upstream", help="Forward every API to this base URL (a local server, a gateway).")
    ] = None,
    anthropic_upstream: Annotated[
        str, typer.Option("--anthropic-upstream", help="Where Anthropic Messages requests go.")
    ] = "https://api.anthropic.com",
    openai_upstream: Annotated[
        str, typer.Option("--openai-upstream", help="Where OpenAI Responses and Chat Completions requests go.")
    ] = "https://api.openai.com",
    print_env: Annotated[
        str | None,
        typer.Option(
            "--print-env", help="Print the line that points a client at the proxy: claude, codex, pi, aider, opencode."
        ),
    ] = None,
    breakpoints: Annotated[
        bool,
        typer.Option("--breakpoints", help="Edit: add the rolling cache breakpoint a client left out (Anthropic)."),
    ] = False,
    ttl: Annotated[
        bool,
        typer.Option("--ttl", help="Edit: hold the client's tools and system breakpoints for an hour when it pays."),
    ] = False,
    prune: Annotated[
        bool, typer.Option("--prune", help="Edit: replace old tool results by a note when the cost model says it pays.")
    ] = False,
    no_log: Annotated[bool, typer.Option("--no-log", help="Log nothing (forward only).")] = False,
) -> None:
    """Run the proxy in front of Claude Code, Codex, pi, aider or opencode: each conversation a Lamina session.

    Anthropic Messages, OpenAI Responses and Chat Completions are forwarded byte for byte (every edit is off
    by default); `--print-env CLIENT` prints the line that points a client at it (docs/proxy.md).
    """
    if ctx.invoked_subcommand is not None:
        return
    if print_env is not None:
        _print_env(print_env, host, port)
        return
    from lamina.proxy import EditSettings

    if upstream is not None:
        anthropic_upstream = openai_upstream = upstream
    edits = EditSettings(breakpoints=breakpoints, ttl=ttl, prune=prune)
    _serve(ctx, host, port, (anthropic_upstream, openai_upstream), edits, no_log)


def _print_env(client: str, host: str, port: int) -> None:
    from lamina.proxy import CLIENTS, client_env

    if client not in CLIENTS:
        abort(f"--print-env: unknown client {client!r}; one of {', '.join(CLIENTS)}", 2)
    chosen: Client = client
    print(client_env(chosen, f"http://{host}:{port or DEFAULT_PORT}"))


def _serve(
    ctx: typer.Context, host: str, port: int, upstreams: tuple[str, str], edits: EditSettings, no_log: bool
) -> None:
    try:
        import uvicorn

        from lamina.proxy import ProxySessions, Upstreams, create_proxy_app
    except ImportError as exc:
        raise MissingExtraError.of(exc, "the proxy (lamina proxy)", "proxy") from None
    from lamina.cli._serve import _bind
    from lamina.cli._store_commands import store_or_abort

    store = None if no_log else store_or_abort(ctx)
    sessions = None if store is None else ProxySessions(store, cwd=os.getcwd())
    listening = _bind(host, port)
    bound = int(listening.getsockname()[1])
    application = create_proxy_app(Upstreams(*upstreams), sessions=sessions, edits=edits)
    where = "nothing logged" if store is None else f"sessions in {safe(store.location)}"
    err.print(f"lamina proxy: listening on http://{host}:{bound}  ({where}; Ctrl-C to stop)", highlight=False)
    config = uvicorn.Config(
        application, log_level="warning", server_header=False, date_header=False, timeout_graceful_shutdown=1
    )
    try:
        uvicorn.Server(config).run(sockets=[listening])
    finally:
        listening.close()
        if sessions is not None:
            sessions.close()
        if store is not None:
            store.close()


@app.command("report")
def report(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(help="The proxied session (`lamina sessions list` names it).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Per request of a proxied session: its usage and bill, what each edit saved and cost, the net, the misses."""
    from lamina.cli._store_commands import read_session
    from lamina.proxy import proxy_report

    given = (ctx.find_root().obj or {}).get("store")
    found = read_session(given, session_id, lambda session: proxy_report(session_id, session.entries()))
    if as_json:
        print_json(found.to_json())
        return
    _print_report(found)


def _print_report(found: ProxyReport) -> None:
    out.print(f"Proxied session {safe(found.session_id)}: {len(found.requests)} requests", highlight=False)
    for n, request in enumerate(found.requests, 1):
        usage: Any = request.usage
        figures = (
            "no usage"
            if usage is None
            else f"in {usage.input:,} read {usage.cache_read:,} write {usage.cache_write:,} out {usage.output:,}"
        )
        cost = "" if request.usd is None else f"  ${request.usd:.4f}"
        miss = f"  miss: {request.miss}" if request.miss else ""
        edits = f"  edits {len(request.edits)} net {request.net:+,.0f}" if request.edits else ""
        line = f"{n:>4}  {safe(request.api)} {safe(request.model)} {request.status}  {figures}{cost}{edits}{miss}"
        out.print(line, highlight=False)
    out.print(
        f"edits saved {found.saved:,.0f}, cost {found.cost:,.0f}, net {found.net:+,.0f} (base-price input tokens); "
        f"billed ${found.usd:.4f}",
        highlight=False,
    )
