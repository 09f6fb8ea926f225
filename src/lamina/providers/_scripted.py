"""A provider that replays scripted responses, for tests, demos and offline runs (I/O: reads its script file).

A script is a list of steps, each a response (its reasoning, text and tool calls) or an error,
consumed one per request; the format is in `docs/scripted-provider.md`. Running out of script
raises `ScriptExhaustedError`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, assert_never, cast, get_args

import msgspec

from lamina.cachesim import CacheSimulationError, CacheSimulator, TimedRequest
from lamina.errors import (
    AuthenticationError,
    ContextOverflowError,
    InvalidRequestError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    TransientServerError,
    UsageError,
)
from lamina.placement import AnthropicTarget, OpenAIChatTarget, OpenAIResponsesTarget, RenderedRequest, RenderTarget
from lamina.providers._adapter import Adapter
from lamina.providers._provider import (
    Capabilities,
    Completed,
    ProviderEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallRequest,
)
from lamina.session import Reasoning, Usage
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator

PROVIDER_NAME: Final = "scripted"

ErrorKind: TypeAlias = Literal["overflow", "rate_limit", "overloaded", "auth", "server", "invalid"]
ERROR_KINDS: Final[tuple[str, ...]] = get_args(ErrorKind)

_RESPONSE_KEYS: Final = frozenset({"text", "tool_calls", "stop_reason", "model", "usage", "reasoning"})
_ERROR_KEYS: Final = frozenset({"error", "retry_after", "message", "text"})
_CALL_KEYS: Final = frozenset({"name", "input", "id"})
_USAGE_KEYS: Final = frozenset({"input", "output", "cache_read", "cache_write", "reasoning"})
_REASONING_KEYS: Final = frozenset({"kind", "provider", "text", "signature", "data", "item_id", "summary", "field"})
_PROVIDER_OF_KIND: Final[Mapping[str, str]] = {
    "thinking": "anthropic",
    "redacted_thinking": "anthropic",
    "reasoning": "openai",
    "reasoning_content": "openai-compat",
}
"""Whose a scripted reasoning block is when the script does not say."""


class ScriptError(UsageError):
    """A script that cannot be used: names the file (or `<code>`) and the offending field."""

    def __init__(self, source: str, where: str, reason: str) -> None:
        """Name the script, the field and what is wrong with it.

        Args:
            source: The script file (or `<code>`).
            where: The field's path inside the script; empty for the file as a whole.
            reason: What is wrong.
        """
        self.source = source
        self.where = where
        """Path of the field inside the script, e.g. `responses[2].tool_calls[0].name`."""
        self.reason = reason
        super().__init__(f"{source}: {where}: {reason}" if where else f"{source}: {reason}")


class ScriptExhaustedError(ProviderError):
    """A request arrived after every scripted step was used."""

    def __init__(self, source: str, steps: int) -> None:
        """Name the script and how many steps it had.

        Args:
            source: The script file (or `<code>`).
            steps: How many steps it had, all used.
        """
        self.source = source
        self.steps = steps
        super().__init__(
            PROVIDER_NAME,
            f"script {source} is exhausted: all {steps} scripted steps were used, request {steps + 1} has none",
        )


@dataclass(frozen=True, slots=True)
class ScriptedToolCall:
    """A tool call the scripted model makes."""

    name: str
    input: Mapping[str, Any] = field(default_factory=dict)
    call_id: str | None = None
    """None: a deterministic id is generated."""


@dataclass(frozen=True, slots=True)
class ScriptedResponse:
    """One scripted model response."""

    text: str = ""
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    stop_reason: str | None = None
    """None: `tool_use` when there are tool calls, else `end_turn`."""
    model: str | None = None
    usage: Usage | None = None
    """None: simulated or estimated (the reasoning's tokens counted in `output` and `reasoning`)."""
    reasoning: str | tuple[Reasoning, ...] = ""
    """The model's reasoning before its answer: blocks as a provider returns them, or a text, made
    into the block the target's provider returns (Anthropic signed thinking, a Responses reasoning
    item with its summary and encrypted content, a server's `reasoning_content`)."""
    kind: Literal["response"] = "response"


@dataclass(frozen=True, slots=True)
class ScriptedError:
    """One scripted failure, raised as the matching `ProviderError`."""

    error: ErrorKind
    retry_after: float | None = None
    message: str = ""
    text: str = ""
    """Streamed before the failure (a connection that breaks mid-response)."""
    kind: Literal["error"] = "error"


ScriptStep: TypeAlias = ScriptedResponse | ScriptedError


class ScriptedProvider(Adapter[RenderTarget]):
    """A `Provider` that answers each request with the next step of a script."""

    def __init__(
        self,
        steps: Sequence[ScriptStep | Mapping[str, Any]],
        *,
        target: RenderTarget | None = None,
        simulator: CacheSimulator | None = None,
        clock: Callable[[], float] = time.time,
        estimator: TokenEstimator = DEFAULT_ESTIMATOR,
        capabilities: Capabilities | None = None,
        source: str = "<code>",
    ) -> None:
        """Create the provider.

        Args:
            steps: The script: step objects, or mappings in the script file's format.
            target: The render target whose bodies this provider accepts (default Anthropic).
            simulator: Computes usage from each request body (cache reads and writes).
            clock: Seconds, for the simulator's timeline.
            estimator: Counts tokens when there is no simulator (and for output).
            capabilities: Reported as is.
            source: Names the script in errors (the file path when loaded from a file).
        """
        self._steps = [_parse_step(s, f"responses[{i}]", source) for i, s in enumerate(steps)]
        self._target: RenderTarget = target if target is not None else AnthropicTarget(model="scripted")
        self._simulator = simulator
        self._clock = clock
        self._estimator = estimator
        self._capabilities = capabilities or Capabilities()
        self._source = source
        self._next = 0
        self._requests: list[RenderedRequest] = []

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        *,
        target: RenderTarget | None = None,
        simulator: CacheSimulator | None = None,
        clock: Callable[[], float] = time.time,
        estimator: TokenEstimator = DEFAULT_ESTIMATOR,
        capabilities: Capabilities | None = None,
    ) -> ScriptedProvider:
        """Load a script file, `{"responses": [...]}` (the format: `docs/scripted-provider.md`).

        Args:
            path: The script file.
            target: As for the constructor.
            simulator: As for the constructor.
            clock: As for the constructor.
            estimator: As for the constructor.
            capabilities: As for the constructor.

        Returns:
            The provider, its errors naming the file.

        Raises:
            ScriptError: The file cannot be read or used, named with the offending field.
        """
        path = Path(path)
        source = str(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ScriptError(source, "", f"cannot read the script: {exc.strerror or exc}") from exc
        try:
            data = msgspec.json.decode(raw)
        except msgspec.DecodeError as exc:
            raise ScriptError(source, "", f"not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise ScriptError(source, "", f'expected an object {{"responses": [...]}}, got {_kind(data)}')
        unknown = sorted(set(data) - {"responses"})
        if unknown:
            raise ScriptError(source, unknown[0], "unknown field (expected only 'responses')")
        steps = data.get("responses")
        if not isinstance(steps, list):
            raise ScriptError(source, "responses", f"expected a list of steps, got {_kind(steps)}")
        return cls(
            steps,
            target=target,
            simulator=simulator,
            clock=clock,
            estimator=estimator,
            capabilities=capabilities,
            source=source,
        )

    @property
    def name(self) -> str:
        """`scripted`."""
        return PROVIDER_NAME

    @property
    def requests(self) -> tuple[RenderedRequest, ...]:
        """Every request body received, in order."""
        return tuple(self._requests)

    @property
    def remaining(self) -> int:
        """Steps not used yet."""
        return len(self._steps) - self._next

    def continue_from(self, step: int) -> None:
        """Answer the next request with step `step` (from 0): the steps before it count as used.

        A session resumed in a new process continues its script where it stopped (the CLI counts
        the model answers its log recorded), instead of starting it again.
        """
        self._next = min(max(step, 0), len(self._steps))

    async def aclose(self) -> None:
        """Nothing to close (for symmetry with the network adapters)."""

    async def stream(self, request: RenderedRequest) -> AsyncIterator[ProviderEvent]:
        """Answer `request` with the next scripted step."""
        self._requests.append(request)
        if self._next >= len(self._steps):
            raise ScriptExhaustedError(self._source, len(self._steps))
        number = self._next
        step = self._steps[number]
        self._next += 1
        if isinstance(step, ScriptedError):  # rejected before the model ran: nothing cached, nothing billed
            for piece in _deltas(step.text):
                yield TextDelta(piece)
            raise _error(step, self._source, number)
        usage = step.usage  # a scripted usage skips the simulation or estimate entirely
        blocks = _reasoning_blocks(step.reasoning, self._target, number)
        for block in blocks:
            for piece in _deltas(_readable(block)):
                yield ReasoningDelta(piece)
        for piece in _deltas(step.text):
            yield TextDelta(piece)
        calls = tuple(
            ToolCallRequest(c.call_id or f"toolu_scripted_{number}_{i}", c.name, dict(c.input))
            for i, c in enumerate(step.tool_calls)
        )
        for call in calls:
            yield call
        thought = sum(self._estimator.count(_readable(b) or b.data) for b in blocks)
        output = thought + self._estimator.count(
            step.text + "".join(json.dumps(dict(c.input)) for c in step.tool_calls)
        )
        stop = step.stop_reason or ("tool_use" if calls else "end_turn")
        yield Completed(
            text=step.text,
            tool_calls=calls,
            stop_reason=stop,
            usage=usage or msgspec.structs.replace(self._usage(request), output=output, reasoning=thought),
            model=step.model or _model(self._target),
            raw_stop_reason=stop,
            reasoning=blocks,
        )

    def _usage(self, request: RenderedRequest) -> Usage:
        if self._simulator is not None and isinstance(request, Mapping):
            now = self._clock()
            try:
                cache = self._simulator.submit(TimedRequest(now, cast(Mapping[str, object], request), now))
            except CacheSimulationError as exc:  # where the real API would answer 400
                raise InvalidRequestError(PROVIDER_NAME, str(exc), status=400) from exc
            return Usage(input=cache.uncached, cache_read=cache.read, cache_write=cache.write)
        if isinstance(request, Mapping):
            return Usage(input=self._estimator.count(msgspec.json.encode(request).decode()))
        return Usage(input=self._estimator.count(request.prompt))


def _readable(block: Reasoning) -> str:
    """What a person can read of a reasoning block: its text, or its summaries (nothing for redacted thinking)."""
    return block.text or "\n\n".join(block.summary)


def _reasoning_blocks(
    reasoning: str | tuple[Reasoning, ...], target: RenderTarget, number: int
) -> tuple[Reasoning, ...]:
    """A step's reasoning as the target's provider returns it: a text becomes that provider's block.

    Args:
        reasoning: The step's reasoning (blocks are returned as they are).
        target: Decides a text's flavour: Anthropic signed thinking, a Responses reasoning item
            (summary and encrypted content), else an OpenAI-compatible server's `reasoning_content`.
        number: The step's number, for the item's id.

    Returns:
        The blocks, in order (none for an empty text).
    """
    if not isinstance(reasoning, str):
        return reasoning
    if not reasoning:
        return ()
    match target:
        case AnthropicTarget():
            return (Reasoning(provider="anthropic", kind="thinking", text=reasoning, signature=_signature(reasoning)),)
        case OpenAIResponsesTarget():
            encrypted = base64.b64encode(reasoning.encode()).decode()
            item = f"rs_scripted_{number}_0"
            return (Reasoning(provider="openai", kind="reasoning", data=encrypted, item_id=item, summary=(reasoning,)),)
        case OpenAIChatTarget():
            return (Reasoning(provider="openai-compat", kind="reasoning_content", text=reasoning),)
        case _:  # an SDK-managed backend keeps its own reasoning: the text stands as Anthropic thinking
            return (Reasoning(provider="anthropic", kind="thinking", text=reasoning, signature=_signature(reasoning)),)


def _signature(text: str) -> str:
    """A scripted thinking block's signature: deterministic, and changes with the text."""
    return "scripted-" + hashlib.sha256(text.encode()).hexdigest()[:32]


def _model(target: RenderTarget) -> str:
    return str(getattr(target, "model", PROVIDER_NAME))


def _error(step: ScriptedError, source: str, number: int) -> ProviderError:
    message = step.message or f"scripted {step.error} error (step {number} of {source})"
    match step.error:
        case "overflow":
            return ContextOverflowError(PROVIDER_NAME, message, status=400)
        case "rate_limit":
            return RateLimitError(PROVIDER_NAME, message, status=429, retry_after=step.retry_after)
        case "overloaded":
            return OverloadedError(PROVIDER_NAME, message, status=529, retry_after=step.retry_after)
        case "auth":
            return AuthenticationError(PROVIDER_NAME, message, status=401)
        case "server":
            return TransientServerError(PROVIDER_NAME, message, status=500)
        case "invalid":
            return InvalidRequestError(PROVIDER_NAME, message, status=400)
        case _:
            assert_never(step.error)


def _deltas(text: str, pieces: int = 3) -> Iterator[str]:
    """`text` in up to `pieces` chunks cut after spaces (so the joined deltas equal `text`)."""
    start = 0
    for k in range(1, pieces):
        cut = text.find(" ", max(start + 1, len(text) * k // pieces))
        if cut < 0:
            break
        yield text[start : cut + 1]
        start = cut + 1
    if start < len(text):
        yield text[start:]


# --- script parsing -----------------------------------------------------------------------------


def _kind(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", type(None): "null", bool: "a boolean"}
    return names.get(type(value), "a number" if isinstance(value, int | float) else f"a {type(value).__name__}")


def _parse_step(raw: ScriptStep | Mapping[str, Any], where: str, source: str) -> ScriptStep:
    if isinstance(raw, ScriptedResponse | ScriptedError):
        return raw
    if not isinstance(raw, Mapping):
        raise ScriptError(source, where, f"expected an object, got {_kind(raw)}")
    if "error" in raw:
        _no_unknown(raw, _ERROR_KEYS, where, source)
        kind = raw["error"]
        if kind not in ERROR_KINDS:
            raise ScriptError(source, f"{where}.error", f"expected one of {', '.join(ERROR_KINDS)}, got {kind!r}")
        retry_after = raw.get("retry_after")
        if retry_after is not None and (
            not isinstance(retry_after, int | float) or isinstance(retry_after, bool) or retry_after < 0
        ):
            raise ScriptError(source, f"{where}.retry_after", f"expected seconds (a number >= 0), got {retry_after!r}")
        return ScriptedError(
            error=kind,
            retry_after=None if retry_after is None else float(retry_after),
            message=_str(raw, "message", where, source),
            text=_str(raw, "text", where, source),
        )
    _no_unknown(raw, _RESPONSE_KEYS, where, source)
    calls_raw = raw.get("tool_calls", [])
    if not isinstance(calls_raw, list):
        raise ScriptError(source, f"{where}.tool_calls", f"expected a list, got {_kind(calls_raw)}")
    calls = tuple(_parse_call(c, f"{where}.tool_calls[{i}]", source) for i, c in enumerate(calls_raw))
    stop = raw.get("stop_reason")
    if stop is not None and not isinstance(stop, str):
        raise ScriptError(source, f"{where}.stop_reason", f"expected a string, got {_kind(stop)}")
    model = raw.get("model")
    if model is not None and not isinstance(model, str):
        raise ScriptError(source, f"{where}.model", f"expected a string, got {_kind(model)}")
    return ScriptedResponse(
        text=_str(raw, "text", where, source),
        tool_calls=calls,
        stop_reason=stop,
        model=model,
        usage=_parse_usage(raw.get("usage"), f"{where}.usage", source),
        reasoning=_parse_reasoning(raw.get("reasoning", ""), f"{where}.reasoning", source),
    )


def _parse_reasoning(raw: object, where: str, source: str) -> str | tuple[Reasoning, ...]:
    """A step's `reasoning`: a text (the target's flavour), or a list of blocks in `Reasoning`'s fields."""
    if isinstance(raw, str):
        return raw
    if not isinstance(raw, list):
        raise ScriptError(source, where, f"expected a text or a list of reasoning blocks, got {_kind(raw)}")
    return tuple(_parse_block(b, f"{where}[{i}]", source) for i, b in enumerate(raw))


def _parse_block(raw: object, where: str, source: str) -> Reasoning:
    """One scripted reasoning block; what a real API always sends (a signature, opaque data, an id) is made up."""
    if not isinstance(raw, Mapping):
        raise ScriptError(source, where, f"expected an object with 'kind', got {_kind(raw)}")
    _no_unknown(raw, _REASONING_KEYS, where, source)
    kind = raw.get("kind")
    if not isinstance(kind, str) or kind not in _PROVIDER_OF_KIND:
        raise ScriptError(source, f"{where}.kind", f"expected one of {', '.join(_PROVIDER_OF_KIND)}, got {kind!r}")
    provider = raw.get("provider", _PROVIDER_OF_KIND[kind])
    if provider not in ("anthropic", "openai", "openai-compat"):
        raise ScriptError(source, f"{where}.provider", f"expected anthropic, openai or openai-compat, got {provider!r}")
    summary = raw.get("summary", [])
    if not isinstance(summary, list) or not all(isinstance(t, str) for t in summary):
        raise ScriptError(source, f"{where}.summary", f"expected a list of texts, got {summary!r}")
    text = _str(raw, "text", where, source)
    signature, data = _str(raw, "signature", where, source), _str(raw, "data", where, source)
    item_id = _str(raw, "item_id", where, source)
    opaque = kind in ("redacted_thinking", "reasoning")
    return Reasoning(
        provider=provider,
        kind=cast(Any, kind),  # one of the four, checked above
        text=text,
        signature=signature or (_signature(text) if kind == "thinking" else ""),
        data=data or (base64.b64encode((text or "\n".join(summary) or where).encode()).decode() if opaque else ""),
        item_id=item_id
        or (f"rs_scripted_{hashlib.sha256(where.encode()).hexdigest()[:12]}" if kind == "reasoning" else ""),
        summary=tuple(summary),
        field=_str(raw, "field", where, source),
    )


def _parse_call(raw: object, where: str, source: str) -> ScriptedToolCall:
    if not isinstance(raw, Mapping):
        raise ScriptError(source, where, f"expected an object with 'name' and 'input', got {_kind(raw)}")
    _no_unknown(raw, _CALL_KEYS, where, source)
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ScriptError(source, f"{where}.name", f"expected a tool name, got {name!r}")
    args = raw.get("input", {})
    if not isinstance(args, Mapping):
        raise ScriptError(source, f"{where}.input", f"expected an object, got {_kind(args)}")
    call_id = raw.get("id")
    if call_id is not None and (not isinstance(call_id, str) or not call_id):
        raise ScriptError(source, f"{where}.id", f"expected a non-empty string, got {call_id!r}")
    return ScriptedToolCall(name, dict(args), call_id)


def _parse_usage(raw: object, where: str, source: str) -> Usage | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ScriptError(source, where, f"expected an object, got {_kind(raw)}")
    _no_unknown(raw, _USAGE_KEYS, where, source)
    counts: dict[str, int] = {}
    for key, value in raw.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ScriptError(source, f"{where}.{key}", f"expected a token count (an integer >= 0), got {value!r}")
        counts[key] = value
    return Usage(**counts)


def _str(raw: Mapping[str, Any], key: str, where: str, source: str) -> str:
    value = raw.get(key, "")
    if not isinstance(value, str):
        raise ScriptError(source, f"{where}.{key}", f"expected a string, got {_kind(value)}")
    return value


def _no_unknown(raw: Mapping[str, Any], allowed: frozenset[str], where: str, source: str) -> None:
    unknown = sorted(str(k) for k in raw if k not in allowed)
    if unknown:
        raise ScriptError(source, f"{where}.{unknown[0]}", f"unknown field (expected {', '.join(sorted(allowed))})")
