"""`lamina proxy`: Lamina's context engineering in front of agents it did not write (Claude Code, Codex, pi, …).

`create_proxy_app(upstreams, sessions=...)` is the loopback server's ASGI application: it speaks
Anthropic Messages (with `count_tokens`), OpenAI Responses and Chat Completions, forwards each
request to its provider, and relays the answer byte for byte; with every edit off (`EditSettings`)
the upstream receives the client's bytes. `ProxySessions` keeps each conversation, recognised by its
prefix, as a Lamina session; `client_env` is the line a client needs. Needs the `proxy` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from lamina._lazy import load_lazily

if TYPE_CHECKING:
    from lamina.proxy._clients import CLIENTS, Client, client_env
    from lamina.proxy._edits import EditSettings
    from lamina.proxy._relay import Upstreams, create_proxy_app
    from lamina.proxy._report import ProxyReport, RequestReport, proxy_report
    from lamina.proxy._sessions import ERROR_ENTRY, REQUEST_ENTRY, ProxySessions, session_id_of

_LAZY: Final = {
    **dict.fromkeys(("CLIENTS", "Client", "client_env"), "lamina.proxy._clients"),
    "EditSettings": "lamina.proxy._edits",
    **dict.fromkeys(("Upstreams", "create_proxy_app"), "lamina.proxy._relay"),
    **dict.fromkeys(("ProxyReport", "RequestReport", "proxy_report"), "lamina.proxy._report"),
    **dict.fromkeys(("ERROR_ENTRY", "REQUEST_ENTRY", "ProxySessions", "session_id_of"), "lamina.proxy._sessions"),
}

__all__ = [
    "CLIENTS",
    "ERROR_ENTRY",
    "REQUEST_ENTRY",
    "Client",
    "EditSettings",
    "ProxyReport",
    "ProxySessions",
    "RequestReport",
    "Upstreams",
    "client_env",
    "create_proxy_app",
    "proxy_report",
    "session_id_of",
]


def __getattr__(name: str) -> Any:
    return load_lazily(globals(), __name__, _LAZY, name)
