"""`lamina serve`: the session inspector in the browser, read-only over the store (I/O)."""

from __future__ import annotations

import threading
import webbrowser
from typing import Annotated

import typer

from lamina.cli._console import err, safe
from lamina.errors import MissingExtraError


def serve(
    ctx: typer.Context,
    port: Annotated[int, typer.Option("--port", help="TCP port to listen on.", min=0, max=65535)] = 8765,
    host: Annotated[
        str,
        typer.Option("--host", help="Address to bind (default: loopback only; anything else exposes your sessions)."),
    ] = "127.0.0.1",
    open_browser: Annotated[
        bool, typer.Option("--open", help="Open the sessions list in the default browser.")
    ] = False,
    session: Annotated[
        str | None, typer.Option("--session", help="Open this session's page (with --open) and print its address.")
    ] = None,
) -> None:
    """Inspect stored sessions in the browser: timeline, branches, compactions, plans, each request's layers."""
    try:
        import uvicorn
    except ImportError as exc:
        raise MissingExtraError.of(exc, "the session inspector (lamina serve)", "serve") from None

    from lamina.cli._store import store_or_abort
    from lamina.reports import cost_of
    from lamina.serve import create_app  # MissingExtraError without Starlette or Jinja2: one line, exit 2

    store = store_or_abort(ctx)
    app = create_app(store, host=host, port=port, prices=cost_of)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/" + (f"sessions/{session}" if session else "")
    err.print(f"lamina serve: {safe(url)}  (store {safe(store.location)}; read-only; Ctrl-C to stop)")
    if open_browser:
        threading.Timer(0.8, webbrowser.open, args=(url,)).start()
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=1)
    try:
        uvicorn.Server(config).run()
    finally:
        store.close()
