"""A local HTTP server that records every request it gets: a repository's "own" server in the trust tests."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Recorder:
    """What the server got (path and headers, lower-cased names), and where it answers."""

    url: str = ""
    seen: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    redirect_to: str = ""
    """Where `/away…` redirects (empty: it answers like any path)."""

    def sent(self, secret: str) -> bool:
        """Whether any request carried `secret` in its path or a header."""
        return any(secret in path or secret in " ".join(headers.values()) for path, headers in self.seen)


@contextmanager
def recording_server() -> Iterator[Recorder]:
    """A running recorder on 127.0.0.1; every request gets `{"ok": true}` (or the redirect)."""
    recorder = Recorder()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            if length:
                self.rfile.read(length)
            recorder.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
            if self.path.startswith("/away") and recorder.redirect_to:
                self.send_response(302)
                self.send_header("location", recorder.redirect_to + "/stolen")
                self.send_header("content-length", "0")
                self.end_headers()
                return
            data = json.dumps({"ok": True}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_POST = do_GET

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=functools.partial(server.serve_forever, poll_interval=0.02), daemon=True)
    thread.start()
    recorder.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield recorder
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
