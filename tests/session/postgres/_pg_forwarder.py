"""A fault-injecting TCP forwarder on loopback, between a store and the test PostgreSQL server.

Modes, switched at any time: `pass` (bytes flow both ways), `stall()` (every connection, and each
new one, stops delivering bytes in both directions, with no reset: a network that holds packets),
`stall_inside_copy()` (the next connection to send a COPY's first data message has it delivered,
then stalls: the server sits inside the COPY, its transaction open, row locks held) and `cut()`
(every client side gets a reset while the server side stays open and silent, as after a middlebox
lost its state). `resume()` delivers what was held and lets bytes flow again.

The client-to-server stream is framed by PostgreSQL's protocol (a startup message, then typed
messages); connections must not use SSL or GSS encryption (`url` turns both off).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from urllib.parse import urlsplit, urlunsplit

_COPY_DATA = ord("d")


class _Link:
    """One proxied connection: the client's socket, the server's, and what a stall holds back."""

    def __init__(self, client: socket.socket, server: socket.socket, *, stalled: bool) -> None:
        self.client = client
        self.server = server
        self.stalled = stalled
        self.lock = threading.Lock()
        self.held: dict[str, bytearray] = {"up": bytearray(), "down": bytearray()}
        self.ended: set[str] = set()
        """Directions whose source closed while stalled (closed on the far side at `resume`)."""
        self.cut = False


class Forwarder:
    """Forward 127.0.0.1:<port> to the PostgreSQL server of `target_url`, injecting faults on demand."""

    def __init__(self, target_url: str) -> None:
        parts = urlsplit(target_url)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._target_url = target_url
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._links: list[_Link] = []
        self._stalled = False
        self._copy_trap = False
        self.copy_stalled = threading.Event()
        """Set once `stall_inside_copy` caught a connection inside its COPY."""
        threading.Thread(target=self._accept, name="forwarder-accept", daemon=True).start()

    def url(self, schema: str) -> str:
        """The target URL through this forwarder (no SSL, no GSS encryption), for `schema`."""
        parts = urlsplit(self._target_url)
        user = f"{parts.username}@" if parts.username else ""
        query = "&".join(q for q in (parts.query, "sslmode=disable&gssencmode=disable", f"schema={schema}") if q)
        return urlunsplit((parts.scheme, f"{user}127.0.0.1:{self.port}", parts.path, query, ""))

    # -- modes -----------------------------------------------------------------------------------

    def stall(self) -> None:
        with self._lock:
            self._stalled = True
            for link in self._links:
                with link.lock:
                    link.stalled = True

    def stall_inside_copy(self) -> None:
        with self._lock:
            self.copy_stalled.clear()
            self._copy_trap = True

    def resume(self) -> None:
        with self._lock:
            self._stalled = self._copy_trap = False
            links = list(self._links)
        for link in links:
            with link.lock:
                if link.cut:
                    continue
                link.stalled = False
                for direction, target in (("up", link.server), ("down", link.client)):
                    with contextlib.suppress(OSError):
                        target.sendall(link.held[direction])
                        if direction in link.ended:
                            target.shutdown(socket.SHUT_WR)
                    link.held[direction].clear()

    def cut(self) -> None:
        with self._lock:
            links = list(self._links)
        for link in links:
            with link.lock:
                link.cut = link.stalled = True  # the server side hears nothing more, ever
                _reset(link.client)

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            links, self._links = list(self._links), []
        for link in links:
            _reset(link.client)
            _reset(link.server)

    # -- plumbing --------------------------------------------------------------------------------

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self._target)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                link = _Link(client, server, stalled=self._stalled)
                self._links.append(link)
            threading.Thread(target=self._upstream, args=(link,), daemon=True).start()
            threading.Thread(target=self._pump, args=(link, "down"), daemon=True).start()

    def _pump(self, link: _Link, direction: str) -> None:
        """Server to client: deliver unless stalled."""
        source, target = (link.server, link.client) if direction == "down" else (link.client, link.server)
        while True:
            data = _recv(source)
            with link.lock:
                if not data:
                    if link.stalled:
                        link.ended.add(direction)
                    elif not link.cut:
                        with contextlib.suppress(OSError):
                            target.shutdown(socket.SHUT_WR)
                    return
                if link.stalled:
                    link.held[direction] += data
                    continue
                with contextlib.suppress(OSError):
                    target.sendall(data)

    def _upstream(self, link: _Link) -> None:
        """Client to server, framed: the COPY trap delivers a COPY's first data message, then stalls."""
        frame = _Framer()
        while True:
            data = _recv(link.client)
            with link.lock:
                if not data:
                    if link.stalled:
                        link.ended.add("up")
                    else:
                        with contextlib.suppress(OSError):
                            link.server.shutdown(socket.SHUT_WR)
                    return
                if link.stalled:
                    link.held["up"] += data
                    continue
                send, hold = frame.split(data, trap=self._copy_trap)
                with contextlib.suppress(OSError):
                    link.server.sendall(send)
                if hold is not None:
                    link.stalled = True
                    link.held["up"] += hold
                    with self._lock:
                        self._copy_trap = False
                    self.copy_stalled.set()


class _Framer:
    """Message boundaries of a client's stream: a startup message, then type byte + length + body."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._left = 0
        """Bytes of the current message still to pass."""
        self._started = False
        self._trip = False
        """The current message is a trapped COPY data message: stall after it."""

    def split(self, data: bytes, *, trap: bool) -> tuple[bytes, bytes | None]:
        """(bytes to deliver now, bytes to hold back or None when no stall is due)."""
        self._buffer += data
        send = bytearray()
        while self._buffer:
            if self._left:
                n = min(self._left, len(self._buffer))
                send += self._buffer[:n]
                del self._buffer[:n]
                self._left -= n
                if not self._left and self._trip:
                    self._trip = False
                    held, self._buffer = bytes(self._buffer), bytearray()
                    return bytes(send), held
                continue
            header = 5 if self._started else 4
            if len(self._buffer) < header:
                break
            if not self._started:
                self._left = struct.unpack("!I", self._buffer[:4])[0]
                self._started = True
            else:
                self._left = 1 + struct.unpack("!I", self._buffer[1:5])[0]
                self._trip = trap and self._buffer[0] == _COPY_DATA
        return bytes(send), None


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def _reset(sock: socket.socket) -> None:
    """Close with a reset (RST), not an orderly FIN: linger 0, and wake the thread blocked reading it."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RD)  # the reader returns; its close then sends the reset
    with contextlib.suppress(OSError):
        sock.close()
