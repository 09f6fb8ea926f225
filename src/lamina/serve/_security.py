"""The inspector's guards: security headers on every response, the Host check against DNS rebinding, the token (pure).

The Content-Security-Policy allows scripts from this server's `/static/` files only (no inline
script, no inline style, nothing from elsewhere). On any address but loopback every request
needs the server's token; docs/inspector.md says how it travels.
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass, field
from typing import Final

from lamina.errors import MissingExtraError
from lamina.serve._responses import error_page

try:
    from markupsafe import escape
    from starlette.requests import HTTPConnection
    from starlette.responses import HTMLResponse
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
    from starlette.websockets import WebSocketClose
except ImportError as exc:
    raise MissingExtraError.of(exc, "the session inspector (lamina serve)", "serve") from None

__all__ = [
    "CSP",
    "LOOPBACK_HOSTS",
    "SECURITY_HEADERS",
    "WILDCARDS",
    "HostCheck",
    "HostRule",
    "SecurityHeaders",
    "TokenCheck",
    "host_name",
    "host_rule",
    "is_loopback",
    "needs_token",
    "token_cookie",
]

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
WILDCARDS: Final = ("", "0.0.0.0", "::")
"""Addresses that bind every address of the machine."""
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def needs_token(host: str) -> bool:
    """Whether an inspector bound to `host` needs a token: on any address but this machine's loopback."""
    return host.strip() in WILDCARDS or not is_loopback(host.strip())


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


@dataclass(frozen=True, slots=True)
class HostRule:
    """The Host headers a server answers: names, addresses, and whether any IPv4 or IPv6 address will do."""

    names: frozenset[str]
    addresses: frozenset[_Address] = field(default_factory=frozenset)
    any_ipv4: bool = False
    any_ipv6: bool = False

    def allows(self, host: str) -> bool:
        """Whether a request whose Host header names `host` (without port or brackets) is answered."""
        if host in self.names:
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return address in self.addresses or (self.any_ipv4 if address.version == 4 else self.any_ipv6)


def host_rule(bind: str, *, extra: tuple[str, ...] = (), machine: tuple[str, ...] = ()) -> HostRule:
    """The Host headers a server bound to `bind` answers: the allow-list follows the address it listens on.

    Bound to loopback: the loopback names. Bound to one address or name: that one and the machine's
    own names. Bound to every address (`0.0.0.0`, `::`): the loopback names, the machine's names and
    any address written as such (an IPv4 one for `0.0.0.0`, either for `::`), since DNS rebinding
    needs a name the attacker's DNS answers, never an address. Always the names in `extra`.

    Args:
        bind: The address or name the server listens on.
        extra: More names to answer (a reverse proxy's, a DNS name of the machine).
        machine: The machine's own names (its host name).

    Returns:
        The rule.
    """
    bind = bind.strip().strip("[]").lower()
    names = {name.strip().strip("[]").lower() for name in extra}
    loopback = {name.strip("[]") for name in LOOPBACK_HOSTS}
    if bind not in WILDCARDS and is_loopback(bind):
        return HostRule(frozenset(loopback | names))
    names |= {name.lower() for name in machine if name}
    if bind in WILDCARDS:
        return HostRule(frozenset(names | loopback), any_ipv4=True, any_ipv6=bind == "::")
    try:
        return HostRule(frozenset(names), addresses=frozenset({ipaddress.ip_address(bind)}))
    except ValueError:
        return HostRule(frozenset(names | {bind}))


class HostCheck:
    """Refuses requests whose Host header names a host the rule does not allow (DNS rebinding guard)."""

    def __init__(self, app: ASGIApp, rule: HostRule) -> None:
        self.app = app
        self.rule = rule

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = dict(scope.get("headers") or ())
            if not self.rule.allows(host_name(headers.get(b"host", b"").decode("latin-1"))):
                await _refuse(scope, receive, send, 400, "Host not allowed")
                return
        await self.app(scope, receive, send)


def token_cookie(port: int) -> str:
    """The name of the cookie that keeps the token of the server on `port` (cookies do not tell ports apart)."""
    return f"lamina_token_{port}"


class TokenCheck:
    """Answers only requests that carry the server's token, compared in constant time.

    The token comes in the address (`?token=`), as a cookie, or as `Authorization: Bearer`. A page
    asked for with the token in its address is answered by a small page that sets the cookie
    (HttpOnly, SameSite=Strict) and moves on to the same address without the token (a refresh, not
    a redirect: a SameSite=Strict cookie is not sent along a redirect when the link was followed from
    another site, as from a chat), so the links of the pages work and the token leaves the address
    bar; the JSON API answers such a request as it is.
    """

    def __init__(self, app: ASGIApp, token: str, cookie: str) -> None:
        self.app = app
        self.token = token.encode("utf-8")
        self.cookie = cookie

    def _matches(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode("utf-8", "replace"), self.token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        connection = HTTPConnection(scope)
        path = str(scope.get("path", ""))
        authorization = connection.headers.get("authorization", "")
        if self._matches(connection.query_params.get("token")):
            if scope["type"] == "http" and not path.startswith("/api/"):
                await self._welcome(connection)(scope, receive, send)
                return
        elif not (
            self._matches(connection.cookies.get(self.cookie))
            or (authorization[:7].lower() == "bearer " and self._matches(authorization[7:].strip()))
        ):
            await _refuse(
                scope, receive, send, 401, "This inspector needs its token: open the address lamina serve printed."
            )
            return
        await self.app(scope, receive, send)

    def _welcome(self, connection: HTTPConnection) -> HTMLResponse:
        """The page that keeps the token in a cookie and opens the address asked for, without the token."""
        url = connection.url.remove_query_params("token")
        # one leading slash: `//host/…` would send the browser, cookie set, to another site
        path = "/" + url.path.lstrip("/")
        target = escape(path + (f"?{url.query}" if url.query else ""))
        response = HTMLResponse(
            f"<!doctype html><meta http-equiv='refresh' content='0; url={target}'><title>lamina serve</title>"
            f"<p><a href='{target}'>Open the inspector</a></p>",
            headers={"cache-control": "no-store"},
        )
        response.set_cookie(self.cookie, self.token.decode(), path="/", httponly=True, samesite="strict")
        return response


async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, message: str) -> None:
    """Answer `status` with `message` (JSON under `/api/`, a small page elsewhere), or close a WebSocket."""
    if scope["type"] == "websocket":
        await WebSocketClose(code=1008)(scope, receive, send)
        return
    response = error_page(status, message, str(scope.get("path", "")).startswith("/api/"))
    if status == 401:
        response.headers["www-authenticate"] = 'Bearer realm="lamina serve"'
    await response(scope, receive, send)


def host_name(header: str) -> str:
    """The host name of a Host header, without port or IPv6 brackets, lower case."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else ""
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header
