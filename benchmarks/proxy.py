"""`python -m benchmarks proxy`: what `lamina proxy` adds to a request's time (its p50), logging on, edits off.

The upstream is the wire server (in this process); the proxy is `lamina proxy` in a process of its
own (uvicorn, over loopback), logging every request into a fresh JSONL store (each request's body
file and two entries made durable, as in use). Requests alternate between the wire server directly
and the proxy, one keep-alive client each, so both see the same machine load. Each request is an
Anthropic Messages call of a 40-message conversation (about 30 KB, a new last message each time).

- `proxy_added_p50_ms`: the median through the proxy less the median direct, non-streaming. Goal: under 5 ms.
- `proxy_added_p50_ms_stream`: the same for streamed answers (to the stream's last byte).
- `proxy_direct_p50_ms`, `proxy_p50_ms`: the two medians the first figure is made of.
- `proxy_added_p50_ms_nolog`: the first figure with `--no-log` (forwarding alone, nothing written). The
  wire server answers in about 2 ms, so the log's writes (synced to disk) are all in the figure; a real
  provider's seconds hide the request's writes, which run while it answers.

Not measured here: the bill through real clients (Claude Code, Codex, pi) with and without the proxy
(`bill_ratio` in issue #47's plan). With edits off the proxy forwards the client's bytes, so the bill
through it is the direct bill by construction; the edits' own saving is tested against the wire server
(tests/proxy/test_edits.py), not yet benchmarked through a real client.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from tests.wire.script import Reply
from tests.wire.server import WireServer

from benchmarks import Figure

_KEY = "sk-bench-local"


def _conversation(n: int) -> bytes:
    messages: list[dict[str, Any]] = []
    for i in range(20):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"Step {i}: " + "context " * 80}]})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"Did step {i}."}]})
    messages.append({"role": "user", "content": [{"type": "text", "text": f"Request {n}."}]})
    body = {"model": "claude-sonnet-5", "max_tokens": 64, "system": "You are a coding agent.", "messages": messages}
    return json.dumps(body).encode()


def _start_proxy(upstream: str, store: Path, *options: str) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "lamina.cli", "--store", str(store), "proxy", "--port", "0"]
    command += ["--upstream", upstream, *options]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env={**os.environ})
    assert process.stderr is not None
    line = process.stderr.readline()
    found = re.search(r"listening on (http://\S+)", line)
    if found is None:
        process.kill()
        raise RuntimeError(f"lamina proxy did not start: {line}")
    return process, found.group(1)


def _timed(client: httpx.Client, url: str, body: bytes, *, stream: bool) -> float:
    if stream:
        body = body[:-1] + b', "stream": true}'
    start = time.perf_counter()
    with client.stream("POST", f"{url}/v1/messages", content=body, headers={"x-api-key": _KEY}) as response:
        for _ in response.iter_raw():
            pass
        if response.status_code != 200:
            raise RuntimeError(f"status {response.status_code}")
    return (time.perf_counter() - start) * 1000


def _medians(n: int, wire: WireServer, proxy_url: str, *, stream: bool) -> tuple[float, float]:
    direct: list[float] = []
    proxied: list[float] = []
    wire.script(*[Reply(text="Done.") for _ in range(2 * n)])
    with httpx.Client() as to_wire, httpx.Client() as to_proxy:
        for i in range(n):
            body = _conversation(i)
            direct.append(_timed(to_wire, wire.url, body, stream=stream))
            proxied.append(_timed(to_proxy, proxy_url, body, stream=stream))
    warm = n // 10  # the first requests open connections and warm imports
    return statistics.median(direct[warm:]), statistics.median(proxied[warm:])


def run(*, quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    n = 40 if quick else 300
    figures: list[Figure] = []
    with WireServer() as wire, tempfile.TemporaryDirectory(prefix="lamina-bench-proxy-") as tmp:
        process, url = _start_proxy(wire.url, Path(tmp) / "store")
        try:
            for stream in (False, True):
                progress(f"{n} requests each way, {'streamed' if stream else 'whole'}")
                direct, proxied = _medians(n, wire, url, stream=stream)
                suffix = "_stream" if stream else ""
                figures.append(Figure(f"proxy_added_p50_ms{suffix}", proxied - direct, "ms", note="goal: under 5 ms"))
                if not stream:
                    figures.append(Figure("proxy_direct_p50_ms", direct, "ms"))
                    figures.append(Figure("proxy_p50_ms", proxied, "ms"))
        finally:
            _stop(process)
        process, url = _start_proxy(wire.url, Path(tmp) / "unused", "--no-log")
        try:
            progress(f"{n} requests each way, whole, nothing logged")
            direct, proxied = _medians(n, wire, url, stream=False)
            figures.append(
                Figure("proxy_added_p50_ms_nolog", proxied - direct, "ms", note="--no-log: forwarding alone")
            )
        finally:
            _stop(process)
    return figures


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(timeout=10)
    if process.stderr is not None:
        process.stderr.close()
