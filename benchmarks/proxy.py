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

Through a real client (not with `--quick`): the cache benchmark's coding session (`session_script`, 40
turns) run by Claude Code (the CLI bundled in the claude-agent-sdk wheel, `benchmarks/_claude_code.py`)
straight to the scripted model, then through `lamina proxy` with edits off, then with every edit on;
every request the model server received billed by the Anthropic cache simulator on the scripted clock:

- `bill_ratio_claude_code_coding`: billed input through the proxy (edits off) over direct; 1.0 when exact.
- `bill_ratio_claude_code_coding_edits`: the same with `--breakpoints --ttl --prune`. The proxy prices its
  edits on its own clock (these runs take seconds, the scripted session hours), so the edits are tried
  under a pace that is not the session's (the prune, which waits for a cold cache, never fires): a figure
  of safety (goal: never above 1.0), not of the edits' worth.
- `requests_refused_claude_code`: runs through the proxy that a refused request stopped (goal: 0).

Not measured: the 64-turn revisits scenario, pi and Codex through the proxy, `answers_identical`
(the scripted model answers every run alike, so the final answers are equal whenever the requests were
accepted).
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
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
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
    if not quick:
        figures += _bills(progress)
    return figures


def _bills(progress: Callable[[str], None]) -> list[Figure]:
    from benchmarks._billing import peer_bill
    from benchmarks._claude_code import PeerFailed, PeerUnavailable, run_claude_code
    from benchmarks._scenario import session_script
    from lamina.cachesim import AnthropicCacheSimulator, summarise

    script = session_script(turns=40)
    try:
        progress("Claude Code, 40 turns, direct")
        direct = run_claude_code(script, progress=progress)
    except PeerUnavailable as exc:
        print(f"proxy: Claude Code skipped: {exc}", file=sys.stderr)
        return []
    billed = {"direct": summarise(peer_bill(direct, AnthropicCacheSimulator())).weighted_tokens}
    refused = 0
    for name, options in (("off", ()), ("edits", ("--breakpoints", "--ttl", "--prune"))):
        progress(f"Claude Code, 40 turns, through lamina proxy (edits {name})")
        with tempfile.TemporaryDirectory(prefix="lamina-bench-proxy-") as tmp:
            try:  # a refused request fails Claude Code's turn: the run stops there
                run = run_claude_code(script, progress=progress, through=_through(Path(tmp) / "store", options))
            except PeerFailed as exc:
                print(f"proxy: Claude Code through the proxy (edits {name}) failed: {exc}", file=sys.stderr)
                refused += 1
                continue
        billed[name] = summarise(peer_bill(run, AnthropicCacheSimulator())).weighted_tokens
    note = f"{billed['direct']:,.0f} input tokens billed direct"
    figures = [Figure("requests_refused_claude_code", refused, "runs", note="goal: 0 (a refusal fails the run)")]
    for name, figure in (("off", "bill_ratio_claude_code_coding"), ("edits", "bill_ratio_claude_code_coding_edits")):
        if name in billed:
            figures.append(Figure(figure, round(billed[name] / billed["direct"], 4), "ratio", note=note))
    return figures


def _through(store: Path, options: tuple[str, ...]) -> Callable[[str], AbstractContextManager[str]]:
    @contextmanager
    def proxied(upstream: str) -> Iterator[str]:
        process, url = _start_proxy(upstream, store, *options)
        try:
            yield url
        finally:
            _stop(process)

    return proxied


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(timeout=10)
    if process.stderr is not None:
        process.stderr.close()
