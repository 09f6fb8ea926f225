"""A process-local HTTP server speaking the Anthropic and OpenAI wire formats, for tests through the real SDKs.

`WireServer` listens on 127.0.0.1 (a free port) in a background thread and answers
`POST /v1/messages` (Anthropic Messages), `POST /v1/chat/completions` and `POST /v1/responses`
(OpenAI) from a per-test script of steps (`GET /v1/models[/{id}]` from `models`, not the script),
one step per request in order, whatever the endpoint: `Reply` (text, tool calls), `Fail` (each
provider's real error status, shape and wording) or `Disconnect` (the connection drops halfway through
the body). It answers in JSON, or in server-sent events when the body says `"stream": true`. Every
request is recorded (`requests`: path, headers, body, status, the step used, usage).

Like the real APIs it rejects malformed requests with 400 before using a scripted step: more
than 4 Anthropic cache breakpoints (and whatever else the cache simulator refuses), a tool call
without its result in the next message (each API's own rule and wording), and, when `api_key` is
set, a missing or wrong key (401). Usage is computed by running the received body through the
cache simulator of its API (`AnthropicCacheSimulator` for `/v1/messages`, `OpenAICacheSimulator`
for the OpenAI endpoints), so cache reads and writes follow the providers' billing rules. An Anthropic
pre-warm (`max_tokens: 0`, `tests/wire/prewarm.py`) is billed and answered with no content, using no step.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import secrets
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Self, TypeAlias

import msgspec

from lamina.cachesim import (
    AnthropicCacheRules,
    AnthropicCacheSimulator,
    CacheSimulationError,
    CacheUsage,
    OpenAIBreakpointRules,
    OpenAIBreakpointSimulator,
    OpenAICacheRules,
    OpenAICacheSimulator,
    TimedRequest,
)
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator
from tests.wire import anthropic_api, compaction, context_editing, openai_api, openai_cache, prewarm, tool_search
from tests.wire.diagnostics import CacheDiagnostics
from tests.wire.local_servers import LocalServer
from tests.wire.models_api import WireModels
from tests.wire.script import Disconnect, Fail, Reply, Step, WireResponse, arguments_json

Api: TypeAlias = Literal["anthropic", "chat", "responses"]

ROUTES: Mapping[str, Api] = {"/v1/messages": "anthropic", "/v1/chat/completions": "chat", "/v1/responses": "responses"}


@dataclass(frozen=True)
class Received:
    """One request the server received, and how it answered."""

    api: Api | None
    path: str
    headers: Mapping[str, str]
    """Lower-cased names."""
    body: Any
    """The decoded JSON body (None if it was not JSON)."""
    t: float
    """The server clock when the request arrived."""
    status: int
    step: Step | None
    """The scripted step used (None when the request was rejected before reaching the script)."""
    usage: CacheUsage | None
    """What the cache simulator billed (None when nothing was simulated)."""
    seen: Any = None
    """The body as the model read it after the server's context edits (None: as sent, no edits asked for)."""
    applied_edits: tuple[Mapping[str, Any], ...] = ()
    """The context edits the server applied (`context_management.applied_edits`)."""
    raw: bytes = b""
    """The body's bytes as they arrived."""
    sent: bytes = b""
    """The response body's bytes as the server sent them (before a `Disconnect` cut)."""


class ManualClock:
    """A clock that moves only when told (to test cache expiry without waiting)."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class WireServer:
    """The local provider server; use as a context manager (or `start()` / `stop()`)."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        api_key: str | None = None,
        anthropic_rules: AnthropicCacheRules | None = None,
        openai_rules: OpenAICacheRules | None = None,
        estimator: TokenEstimator = DEFAULT_ESTIMATOR,
        openai_breakpoint_rules: OpenAIBreakpointRules | None = None,
    ) -> None:
        self.clock = clock
        self.api_key = api_key
        """When set, requests must carry it (`x-api-key` or `Authorization: Bearer`), else 401."""
        self.secret = secrets.token_bytes(32)
        """Seals the reasoning this server returns: another server's, or a changed one, does not verify."""
        self.deepseek = False
        """Chat answers as DeepSeek's thinking mode: a tool-call turn sent back without its reasoning is refused."""
        self.estimator = estimator
        self.anthropic_cache = AnthropicCacheSimulator(rules=anthropic_rules, estimator=estimator)
        self.openai_cache = OpenAICacheSimulator(rules=openai_rules, estimator=estimator)
        self.openai_breakpoint_cache = OpenAIBreakpointSimulator(rules=openai_breakpoint_rules, estimator=estimator)
        """Bills the models of OpenAI's breakpoint regime (GPT-5.6 and later, `openai_cache.breakpoint_model`)."""
        self.diagnostics = CacheDiagnostics(estimator)
        """Answers requests that ask why they missed the cache, from the requests answered before."""
        self.anthropic_thinking = anthropic_api.ThinkingSigner()
        """Signs the Anthropic thinking this server sends and checks the thinking sent back."""
        self.compaction_signer = compaction.CompactionSigner()
        """Signs the Anthropic `compaction` blocks this server returns and checks the ones sent back."""
        self.compactions: deque[compaction.Compact] = deque()
        """Scripted answers to compaction requests, in order (none left: the server writes its own summary)."""
        self.models = WireModels()
        """What `GET /v1/models[/{id}]` lists (Anthropic's and OpenAI's shapes), and the lookups received."""
        self.local = LocalServer()
        """The local server whose shapes and quirks Chat requests get (`tests.wire.local_servers.play`)."""
        self._script: deque[Step] = deque()
        self._received: list[Received] = []
        self._lock = threading.Lock()
        self._edited: context_editing.Edited | None = None
        """The current Anthropic request's context edits (set and read under the lock)."""
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        handler = type("WireHandler", (_Handler,), {"wire": self})
        self._httpd = httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        # a short poll interval: `shutdown()` waits up to one interval, once per test
        serve = functools.partial(httpd.serve_forever, poll_interval=0.02)
        self._thread = threading.Thread(target=serve, name="wire-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT`: the Anthropic SDK's `base_url`."""
        if self._httpd is None:
            raise RuntimeError("the wire server is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_url(self) -> str:
        """`http://127.0.0.1:PORT/v1`: the OpenAI SDK's `base_url`."""
        return f"{self.url}/v1"

    # --- script and record -------------------------------------------------------------------

    def script(self, *steps: Step) -> None:
        """Queue answers for the next requests, in order."""
        with self._lock:
            self._script.extend(steps)

    @property
    def pending(self) -> int:
        """Scripted steps not used yet."""
        with self._lock:
            return len(self._script)

    @property
    def requests(self) -> list[Received]:
        """Every request received so far, in arrival order."""
        with self._lock:
            return list(self._received)

    def tool_results(self) -> dict[str, str]:
        """The Messages tool results the last request sent, by tool_use id, as text (JSON when not a string)."""
        found: dict[str, str] = {}
        for message in self.requests[-1].body["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else []:
                if block.get("type") == "tool_result":
                    content: Any = block["content"]
                    found[block["tool_use_id"]] = content if isinstance(content, str) else json.dumps(content)
        return found

    def bodies(self, api: Api | None = None) -> list[Any]:
        """The request bodies received (of one API, or all)."""
        return [r.body for r in self.requests if api is None or r.api == api]

    # --- answering ---------------------------------------------------------------------------

    def answer(self, path: str, headers: Mapping[str, str], raw: bytes) -> WireResponse:
        """The response to one POST (called from the handler threads), recorded with the bytes of both."""
        with self._lock:
            before = len(self._received)
        response = self._answer(path, headers, raw)
        with self._lock:
            if len(self._received) > before:  # Ollama's /api/show probes are not recorded
                last = self._received[-1]
                self._received[-1] = dataclasses.replace(last, raw=raw, sent=response.body)
        return response

    def _answer(self, path: str, headers: Mapping[str, str], raw: bytes) -> WireResponse:
        with self._lock:
            t = self.clock()
            api = ROUTES.get(path.split("?", 1)[0])
            n = len(self._received) + 1
            try:
                body = msgspec.json.decode(raw) if raw else None
            except msgspec.DecodeError:
                body = None
            if path.split("?", 1)[0] == compaction.COMPACT_PATH:  # OpenAI's compact: no script step is used
                scripted = self.compactions.popleft() if self.compactions else None
                response = compaction.compact_reply(
                    body if isinstance(body, dict) else {}, scripted, n, secret=self.secret, t=t
                )
                self._received.append(Received(None, path, dict(headers), body, t, response.status, None, None))
                return response
            if path.split("?", 1)[0] == anthropic_api.COUNT_TOKENS_PATH:  # no script step is used
                response = anthropic_api.count_tokens(body, n, self.estimator)
                self._received.append(Received(None, path, dict(headers), body, t, response.status, None, None))
                return response
            self._edited = None
            if api is None and path.startswith("/api/"):  # Ollama's /api/show: a window probe, kept apart as GETs are
                found = self.local.post(path, body)
                return found if found is not None else openai_api.error(404, "invalid_request_error", "Not found")
            response, step, usage = self._respond(api, headers, body, t)
            edited = self._edited if step is not None else None
            seen, applied = (
                (edited.body, tuple(edited.applied)) if edited is not None and edited.requested else (None, ())
            )
            self._received.append(
                Received(api, path, dict(headers), body, t, response.status, step, usage, seen, applied)
            )
            return response

    def answer_models(self, path: str, headers: Mapping[str, str]) -> WireResponse:
        """The answer to a `GET /v1/models[/{id}]` (after `models.delay`); a wrong key is refused as on a POST."""
        time.sleep(self.models.delay)
        with self._lock:
            return self.models.answer(path, headers, keyed=self.api_key is None or self.api_key in _keys(headers))

    def _respond(
        self, api: Api | None, headers: Mapping[str, str], body: Any, t: float
    ) -> tuple[WireResponse, Step | None, CacheUsage | None]:
        n = len(self._received) + 1
        if api is None:
            return openai_api.error(404, "invalid_request_error", "Not found"), None, None
        if not isinstance(body, dict):
            return self._invalid(api, n, "the request body is not a JSON object"), None, None
        if self.api_key is not None and self.api_key not in _keys(headers):
            return self._fail(api, body, Fail("auth"), n), None, None
        problem = self._problem(api, body, n)
        if problem is None and api == "anthropic":  # context editing: checked, then applied before the model reads
            found = context_editing.problem(body, headers)
            problem = None if found is None else self._invalid(api, n, found)
            self._edited = context_editing.apply(body, self.estimator) if found is None else None
            changed = tool_search.beta_problem(body, headers) if problem is None else None
            problem = problem if changed is None else self._invalid(api, n, changed)
        if problem is None and api == "chat" and self.local.kind is not None:  # a local server's own refusals
            problem = self.local.refuse(body, self.estimator.count(msgspec.json.encode(body).decode()))
        if problem is not None:
            return problem, None, None
        if api == "anthropic" and body.get("compaction") is not None:  # a standalone compaction: no script step
            return self._summarize(body, headers, n), None, None
        if api == "anthropic" and prewarm.is_prewarm(body):  # a pre-warm: the cache written, no model, no script step
            return self._prewarm(body, t, n)
        if not self._script:
            return self._invalid(api, n, f"wire server: no scripted response left for request {n}"), None, None
        step = self._script[0]
        if isinstance(step, Fail) and not step.in_stream:  # rejected before the model ran: nothing cached
            self._script.popleft()
            return self._fail(api, body, step, n), step, None
        try:
            usage = self._simulate(api, body, t)
        except CacheSimulationError as exc:
            return self._invalid(api, n, str(exc)), None, None
        self._script.popleft()
        if isinstance(step, Fail):
            return self._fail(api, body, step, n), step, usage
        if isinstance(step, Disconnect):
            whole = self._reply(api, body, Reply(text=step.text), usage, n)
            return dataclasses.replace(whole, cut=len(whole.body) // 2), step, usage
        return self._reply(api, body, step, usage, n), step, usage

    def _prewarm(self, body: Mapping[str, Any], t: float, n: int) -> tuple[WireResponse, None, CacheUsage | None]:
        refused = prewarm.prewarm_problem(body)
        if refused is not None:
            return self._invalid("anthropic", n, refused), None, None
        try:
            usage = self._simulate("anthropic", body, t)
        except CacheSimulationError as exc:
            return self._invalid("anthropic", n, str(exc)), None, None
        return prewarm.prewarm_reply(body, usage, n), None, usage

    def _summarize(self, body: Mapping[str, Any], headers: Mapping[str, str], n: int) -> WireResponse:
        refused = compaction.summarize_problem(body, headers, n)
        if refused is not None:
            return refused
        step = self.compactions.popleft() if self.compactions else None
        tokens = self.estimator.count(msgspec.json.encode(body.get("messages")).decode())
        return compaction.summarize_reply(body, step, self.compaction_signer, n, input_tokens=tokens)

    def _problem(self, api: Api, body: Mapping[str, Any], n: int) -> WireResponse | None:
        deferred = tool_search.problem(api, body)  # deferred tools load only through a reference
        if isinstance(deferred, WireResponse):
            return deferred
        if deferred is not None:
            return self._invalid(api, n, deferred)
        if api == "anthropic":
            blocks = self.compaction_signer.problem(body)
            if blocks is not None:
                return compaction.anthropic_error(400, "invalid_request_error", blocks[0], blocks[1], n)
            message = anthropic_api.problem(body, self.anthropic_thinking)
            return None if message is None else self._invalid(api, n, message)
        refused = openai_cache.cache_problem(api, body)
        if refused is not None:
            return refused
        if api == "responses" and (item := compaction.item_problem(body, secret=self.secret)) is not None:
            return item
        found = openai_api.chat_problem(body) if api == "chat" else openai_api.responses_problem(body)
        if found is None:
            return openai_api.reasoning_problem(api, body, secret=self.secret, deepseek=self.deepseek)
        return openai_api.error(400, "invalid_request_error", found[0], param=found[1])

    def _simulate(self, api: Api, body: Mapping[str, Any], t: float) -> CacheUsage:
        if api == "anthropic":
            seen = self._edited.body if self._edited is not None else body  # the cache holds what the model read
            return self.anthropic_cache.submit(TimedRequest(t, seen, t))
        if openai_cache.breakpoint_model(body.get("model")):
            return self.openai_breakpoint_cache.submit(TimedRequest(t, body, t))
        return self.openai_cache.submit(TimedRequest(t, body, t))

    def _invalid(self, api: Api, n: int, message: str) -> WireResponse:
        if api == "anthropic":
            return anthropic_api.error(400, "invalid_request_error", message, n)
        return openai_api.error(400, "invalid_request_error", message)

    def _fail(self, api: Api, body: Mapping[str, Any], step: Fail, n: int) -> WireResponse:
        tokens = self.estimator.count(msgspec.json.encode(body).decode())
        if api == "anthropic":
            return anthropic_api.failure(body, step, n, tokens)
        return openai_api.failure(body, step, api, n, tokens)

    def _reply(self, api: Api, body: Mapping[str, Any], step: Reply, usage: CacheUsage, n: int) -> WireResponse:
        found = tool_search.found_by(body, step, anthropic=api == "anthropic")
        wrong = tool_search.script_problem(body, step, found) if api != "chat" else None
        if wrong is not None:
            return self._invalid(api, n, wrong)
        output = step.output_tokens
        if output is None:
            output = max(1, self.estimator.count(step.text + "".join(arguments_json(c) for c in step.tool_calls)))
        extra = self.diagnostics.answer(api, body, usage, n)  # {"diagnostics": ...} when the request asked
        if api == "anthropic":
            edits = self._edited.response_field() if self._edited is not None else None
            return anthropic_api.reply(
                body, step, usage, n, output, self.anthropic_thinking, context_management=edits, **extra
            )
        if api == "chat" and self.local.kind is not None and body.get("stream"):
            return self.local.chat(body, step, n, usage.total, usage.read)
        if api == "chat":
            return openai_api.chat_reply(body, step, usage, n, output)
        return openai_api.responses_reply(body, step, usage, n, output, secret=self.secret, **extra)


def _keys(headers: Mapping[str, str]) -> set[str]:
    keys = {headers.get("x-api-key", "")}
    authorization = headers.get("authorization", "")
    if authorization.lower().startswith("bearer "):
        keys.add(authorization[7:].strip())
    return keys - {""}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the real APIs; every response has a Content-Length
    # TCP_NODELAY: the headers and the body go out in two writes, and on a kept-alive connection Nagle's
    # algorithm holds the body until the client's delayed ACK (about 40 ms a request) without it
    disable_nagle_algorithm = True
    wire: WireServer

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        self._send(self.wire.answer(self.path, headers, raw))

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0].rstrip("/").startswith("/v1/models"):
            self._send(self.wire.answer_models(self.path, {k.lower(): v for k, v in self.headers.items()}))
            return
        local = self.wire.local.get(self.path)  # llama.cpp's /props, LM Studio's /api/v0/models/{id}
        if local is not None:
            self._send(local)
            return
        self._send(openai_api.error(404, "invalid_request_error", f"Not found: {self.path}"))

    def _send(self, response: WireResponse) -> None:
        self.send_response(response.status)
        self.send_header("content-type", response.content_type)
        self.send_header("content-length", str(len(response.body)))
        self.send_header("request-id", "req_wire")
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if response.cut is None:
            self.wfile.write(response.body)
            self.wfile.flush()
            return
        self.wfile.write(response.body[: response.cut])
        self.wfile.flush()
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read `WireServer.requests`
        pass
