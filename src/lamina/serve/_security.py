"""The inspector's guards: the security headers on every response, and the Host check against DNS rebinding (pure).

The Content-Security-Policy allows scripts from this server's `/static/` files only (no inline
script, no inline style, nothing from elsewhere).
"""

from __future__ import annotations

import ipaddress
from typing import Final

from lamina.errors import MissingExtraError
from lamina.serve._responses import error_page

try:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
except ImportError as exc:
    raise MissingExtraError.of(exc, "the session inspector (lamina serve)", "serve") from None

__all__ = ["CSP", "LOOPBACK_HOSTS", "SECURITY_HEADERS", "HostCheck", "SecurityHeaders", "host_name", "is_loopback"]

CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS: Final = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-resource-policy", b"same-origin"),
)
LOOPBACK_HOSTS: Final = ("localhost", "127.0.0.1", "::1", "[::1]")


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 in brackets or not) is this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class SecurityHeaders:
    """Adds the CSP and its companions to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in message.get("headers", [])}
                extra = [(name, value) for name, value in SECURITY_HEADERS if name not in names]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class HostCheck:
    """Refuses requests whose Host header names a host not in `allowed` (DNS rebinding guard)."""

    def __init__(self, app: ASGIApp, allowed: tuple[str, ...]) -> None:
        self.app = app
        self.allowed = frozenset(h.lower().strip("[]") for h in allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or ())
            if host_name(headers.get(b"host", b"").decode("latin-1")) not in self.allowed:
                api = str(scope.get("path", "")).startswith("/api/")
                await error_page(400, "Host not allowed", api)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def host_name(header: str) -> str:
    """The host name of a Host header, without port or IPv6 brackets, lower case."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else ""
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header
