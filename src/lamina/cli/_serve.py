"""`lamina serve`: the session inspector in the browser, read-only over the store (I/O)."""

from __future__ import annotations

import errno
import secrets
import socket
import threading
import webbrowser
from typing import TYPE_CHECKING, Annotated

import platformdirs
import typer

from lamina.cli._console import abort, err, exit_code, safe
from lamina.errors import MissingExtraError, SessionNotFoundError

if TYPE_CHECKING:
    from lamina.session import SessionStore


def serve(
    ctx: typer.Context,
    port: Annotated[int, typer.Option("--port", help="TCP port to listen on.", min=0, max=65535)] = 8765,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Address to bind (default: loopback only; any other needs the token printed in the address).",
        ),
    ] = "127.0.0.1",
    allow_host: Annotated[
        list[str] | None,
        typer.Option("--allow-host", help="Also answer requests for this host name (a DNS name, a proxy's name)."),
    ] = None,
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

    from lamina.cli._store_commands import store_or_abort
    from lamina.pricing import cost_of
    from lamina.serve import create_app, needs_token  # MissingExtraError without Starlette or Jinja2: one line, exit 2

    store = store_or_abort(ctx)
    try:
        if session:
            _check_session(store, session)
        listening = _bind(host, port)
    except BaseException:
        store.close()
        raise
    bound = int(listening.getsockname()[1])  # --port 0: the port the system chose
    token = secrets.token_urlsafe(32) if needs_token(host) else None
    app = create_app(
        store,
        host=host,
        port=bound,
        prices=cost_of,
        token=token,
        extra_hosts=tuple(allow_host or ()),
        cache_dir=platformdirs.user_cache_path("lamina") / "serve",  # the plot's data, kept by log position
    )
    path = f"/sessions/{session}" if session else "/"
    url = _address(host, bound, path, token)
    note = "read-only" if token is None else "read-only; the token in this address lets anyone read every session"
    err.print(f"lamina serve: {safe(url)}  (store {safe(store.location)}; {note}; Ctrl-C to stop)")
    if open_browser:
        threading.Timer(0.8, webbrowser.open, args=(url,)).start()
    config = uvicorn.Config(app, host=host, port=bound, log_level="warning", timeout_graceful_shutdown=1)
    try:
        uvicorn.Server(config).run(sockets=[listening])
    finally:
        listening.close()
        store.close()


def _address(host: str, port: int, path: str, token: str | None) -> str:
    """The address to open: `http://HOST:PORT/PATH`, with `?token=` when the server needs one."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{path}" + (f"?token={token}" if token else "")


def _check_session(store: SessionStore, session_id: str) -> None:
    """End the command with one error line (exit 3) when the store holds no session `session_id`."""
    if not any(summary.id == session_id for summary in store.list()):
        missing = SessionNotFoundError(session_id, store.location)
        abort(str(missing), exit_code(missing))


def _bind(host: str, port: int) -> socket.socket:
    """A socket bound to `host` and `port`, for uvicorn to listen on; one error line (exit 1) when it cannot be.

    Args:
        host: The address to bind (an IPv6 address contains a colon).
        port: The TCP port; 0 lets the system choose one.

    Returns:
        The bound socket.
    """
    # IPPROTO_TCP named, not 0: asyncio turns Nagle's algorithm off only on sockets whose protocol says TCP;
    # without it a response's body waits for the client's delayed ACK (about 40 ms; `lamina proxy` measured it)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: a restart need not wait
    try:
        listening.bind((host, port))
    except OSError as exc:
        listening.close()
        reason = "already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        abort(f"cannot listen on {host} port {port}: {reason}", 1)
    # listening from here: a client that connects once the address is printed waits in the backlog until
    # uvicorn accepts, instead of being refused (uvicorn's own listen() only sets the backlog again)
    listening.listen(2048)
    return listening
