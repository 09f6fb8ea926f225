"""The SDK-managed backend on the Claude Agent SDK (I/O: a Claude Code CLI subprocess, the network through it).

The SDK (and the Claude Code CLI it drives) owns the system prompt, the transcript, resume and
compaction; Lamina sends only the prompt that `lamina.placement` rendered for `SdkManagedTarget`.
Text-only: the CLI runs no tools. The model's thinking is parsed into `Completed.reasoning` (and
`ReasoningDelta`) for the log and the screen; the transcript that sends it back is the SDK's own.
Sessions, resume failure, compaction, tools and retries are described in `docs/providers.md`.
"""

from __future__ import annotations

import os
import re
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

from lamina.errors import (
    InvalidRequestError,
    ProviderError,
    ProviderSessionLostError,
    TransientServerError,
    UsageError,
)
from lamina.placement import RenderedRequest, SdkManagedPrompt, SdkManagedTarget
from lamina.providers._adapter import Adapter
from lamina.providers._errors import error_for_status, require_sdk
from lamina.providers._provider import (
    Capabilities,
    Completed,
    ProviderCompacted,
    ProviderEvent,
    ProviderSessionChanged,
    ReasoningDelta,
    TextDelta,
)
from lamina.session import ProviderSession, Reasoning, Usage

if TYPE_CHECKING:
    from claude_agent_sdk import ClaudeAgentOptions, Message, ResultMessage

PROVIDER_NAME: Final = "claude-agent"

QUIET_ENV: Final[Mapping[str, str]] = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_MAX_RETRIES": "0",
}
"""Environment the CLI always gets: no traffic but the API's, no retries of its own."""

_SYNTHETIC_MODEL: Final = "<synthetic>"  # the CLI's own messages (API errors, "Not logged in")
_OVERLOADED: Final = re.compile(r"\boverloaded\b", re.IGNORECASE)
_AUTH_HINT: Final = "check the API key (ANTHROPIC_API_KEY or api_key=)"
_STDERR_LINES: Final = 20


class ClaudeAgentProvider(Adapter[SdkManagedTarget]):
    """A `Provider` whose model runs inside the Claude Agent SDK (target: `SdkManagedTarget`)."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        cwd: str | Path | None = None,
        config_dir: str | Path | None = None,
        cli_path: str | Path | None = None,
        system_prompt: str | None = None,
        max_turns: int | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        sessions: MutableMapping[str, ProviderSession] | None = None,
        capabilities: Capabilities | None = None,
    ) -> None:
        """Create the provider.

        Args:
            model: The model the CLI asks for.
            api_key: The API key; None lets the CLI read `ANTHROPIC_API_KEY` (or its own login).
            base_url: Another server speaking the Messages API (`ANTHROPIC_BASE_URL`).
            cwd: The CLI's working directory (default: the current one, fixed now). Transcripts
                are kept per directory: resuming needs the same one.
            config_dir: The CLI's configuration and transcript directory (`CLAUDE_CONFIG_DIR`);
                None keeps the CLI's default (`~/.claude`).
            cli_path: A Claude Code executable to use instead of the one bundled with the SDK.
            system_prompt: The system prompt; None keeps the SDK's minimal default.
            max_turns: At most this many model calls per turn inside the CLI; None: no limit.
            timeout: Per-request timeout in seconds for the CLI's API calls (`API_TIMEOUT_MS`).
            env: More environment for the CLI, over the process's own and `QUIET_ENV`.
            sessions: The Lamina → SDK session mapping to start from (kept and updated in place).
            capabilities: What the model can do. Prompts are text, so no vision or PDF input.
        """
        require_sdk("claude_agent_sdk", "the Claude Agent SDK backend", "claude")
        if max_turns is not None and max_turns < 1:
            raise UsageError(f"ClaudeAgentProvider max_turns must be at least 1, got {max_turns}")
        self._model = model
        self._cwd = Path(cwd) if cwd is not None else Path.cwd()
        self._cli_path = cli_path
        self._system_prompt = system_prompt
        self._max_turns = max_turns
        self._env = {**QUIET_ENV, **_connection_env(api_key, base_url, config_dir, timeout), **(env or {})}
        self._sessions: MutableMapping[str, ProviderSession] = {} if sessions is None else sessions
        self._capabilities = capabilities or Capabilities(
            max_output_tokens=64_000, native_resume=True, native_fork=True
        )
        self._target = SdkManagedTarget()

    @property
    def name(self) -> str:
        """`claude-agent`."""
        return PROVIDER_NAME

    @property
    def sessions(self) -> MutableMapping[str, ProviderSession]:
        """Lamina session id → SDK session, updated after every completed turn (persist it to resume later)."""
        return self._sessions

    def fork(self, source_session_id: str, new_session_id: str) -> None:
        """Make Lamina session `new_session_id` continue from where `source_session_id` is now, natively.

        Its first turn resumes the source's SDK session at its last completed turn with
        `fork_session`, so the SDK copies the transcript into a new session and the source is
        left as it was.

        Args:
            source_session_id: The Lamina session forked from.
            new_session_id: The Lamina session that continues from it.

        Raises:
            UsageError: The source has no SDK session yet.
        """
        source = self._sessions.get(source_session_id)
        if source is None:
            raise UsageError(f"session {source_session_id!r} has no Claude Agent SDK session to fork yet")
        self._sessions[new_session_id] = fork_of(source)

    async def stream(self, request: RenderedRequest) -> AsyncIterator[ProviderEvent]:
        """Run one turn of `request` (an `SdkManagedPrompt`) in the SDK; the last event is `Completed`.

        Raises:
            ProviderSessionLostError: the SDK session to resume is gone (forgotten here too); send
                again with `new_session=True`, with what the fresh session must know.
        """
        if not isinstance(request, SdkManagedPrompt):
            raise UsageError(f"ClaudeAgentProvider needs an SdkManagedPrompt, got {type(request).__name__}")
        key = request.session_id
        session: ProviderSession | None = None
        if not request.new_session and request.keep_session:
            session = request.resume if request.resume is not None else self._sessions.get(key)
        try:
            async for event in self._turn(request, session):
                yield event
        except _ResumeFailedError as exc:
            assert session is not None
            if self._sessions.get(key) == session:
                del self._sessions[key]  # the SDK no longer has it: never try it again
            raise ProviderSessionLostError(
                PROVIDER_NAME,
                session.session_id,
                f"the Claude Agent SDK session {session.session_id} cannot be resumed: {exc}",
            ) from None

    async def aclose(self) -> None:
        """Nothing to close: every turn's CLI process ends with the turn."""

    async def __aenter__(self) -> ClaudeAgentProvider:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _turn(self, request: SdkManagedPrompt, session: ProviderSession | None) -> AsyncIterator[ProviderEvent]:
        from claude_agent_sdk import ClaudeSDKError, CLINotFoundError, query

        reply = _TurnReply()
        stderr: deque[str] = deque(maxlen=_STDERR_LINES)  # for the error message if the CLI fails
        options = self._options(session, stderr.append, verbatim=not request.command)
        messages = query(prompt=request.prompt, options=options)
        try:
            try:
                async for message in messages:
                    for event in reply.feed(message):
                        yield event
            finally:
                if isinstance(messages, AsyncGenerator):  # ends the CLI process, also when the caller stops early
                    await messages.aclose()
        except CLINotFoundError as exc:
            raise UsageError(f"{exc}; reinstall the extra (pip install 'lamina[claude]') or pass cli_path") from exc
        except ClaudeSDKError as exc:
            # after a result the exception only says the CLI exited (non-zero after a failed one): the result says more
            if reply.result is None:
                if session is not None and _names_resume_target(exc, session):
                    raise _ResumeFailedError(_failure_text(getattr(exc, "result", None), None) or str(exc)) from exc
                raise _mapped(exc, reply.error, stderr) from exc
        result = reply.result
        if result is None:
            raise ProviderError(PROVIDER_NAME, "the Claude Code CLI ended without a result", body=_tail(stderr))
        if result.is_error:
            if session is not None and _names_resume_target(result, session):
                raise _ResumeFailedError(_failure_text(result.result, result.errors))
            raise _mapped(result, reply.error, stderr)
        if request.keep_session:
            # after a command (`/compact`) no assistant message follows the boundary: resume at the end
            resume_at = None if request.command else reply.last_uuid
            now = ProviderSession(provider=PROVIDER_NAME, session_id=result.session_id, resume_at=resume_at)
            self._sessions[request.session_id] = now
            yield ProviderSessionChanged(now)
        yield reply.completed(result, self._model)

    def _options(
        self, session: ProviderSession | None, on_stderr: Callable[[str], None], *, verbatim: bool = True
    ) -> ClaudeAgentOptions:
        from claude_agent_sdk import ClaudeAgentOptions

        return ClaudeAgentOptions(
            model=self._model,
            system_prompt=self._system_prompt,
            # Lamina's pre-tool-use pipeline is the only path to a tool: the CLI gets none of its own.
            tools=[],
            strict_mcp_config=True,
            setting_sources=[],
            skills=[],
            permission_mode="dontAsk",
            verbatim_prompts=verbatim,
            max_turns=self._max_turns,
            cwd=self._cwd,
            cli_path=self._cli_path,
            env=dict(self._env),
            stderr=on_stderr,
            resume=session.session_id if session is not None else None,
            resume_session_at=session.resume_at if session is not None else None,
            fork_session=session is not None and session.fork,
        )


class _ResumeFailedError(Exception):
    """The CLI could not resume the SDK session it was given (control flow inside `stream`)."""


@dataclass
class _TurnReply:
    """What the messages of one turn have said so far."""

    text: list[str] = field(default_factory=list)
    reasoning: list[Reasoning] = field(default_factory=list)
    """The thinking blocks, in order (the SDK drops `redacted_thinking` blocks before they reach us)."""
    message_id: str | None = None
    model: str = ""
    error: str | None = None
    """The `error` kind of the CLI's synthetic assistant message (`authentication_failed`, `rate_limit`, ...)."""
    last_uuid: str | None = None
    result: ResultMessage | None = None

    def feed(self, message: Message) -> Iterator[ProviderEvent]:
        from claude_agent_sdk import AssistantMessage, ResultMessage, SystemMessage, TextBlock, ThinkingBlock

        if isinstance(message, ResultMessage):
            self.result = message
            return
        if isinstance(message, SystemMessage) and message.subtype == "compact_boundary":
            yield _compacted(message.data)
            return
        if not isinstance(message, AssistantMessage) or message.parent_tool_use_id is not None:
            return
        if message.model == _SYNTHETIC_MODEL:  # the CLI's own words about a failure, not the model's
            self.error = message.error or "unknown"
            return
        self.model = message.model
        self.last_uuid = message.uuid or self.last_uuid
        for block in message.content:
            if isinstance(block, ThinkingBlock):
                self.reasoning.append(
                    Reasoning(provider="anthropic", kind="thinking", text=block.thinking, signature=block.signature)
                )
                if block.thinking:
                    yield ReasoningDelta(block.thinking)
                continue
            if not isinstance(block, TextBlock) or not block.text:
                continue
            # the CLI sends one message per content block; blocks of another API response start a new paragraph
            if self.text and message.message_id != self.message_id:
                self.text.append("\n\n")
                yield TextDelta("\n\n")
            self.message_id = message.message_id
            self.text.append(block.text)
            yield TextDelta(block.text)

    def completed(self, result: ResultMessage, model: str) -> Completed:
        usage = result.usage or {}
        stop = result.stop_reason or "end_turn"
        return Completed(
            text="".join(self.text),
            tool_calls=(),
            stop_reason=stop,
            usage=Usage(
                input=_count(usage, "input_tokens"),
                output=_count(usage, "output_tokens"),
                cache_read=_count(usage, "cache_read_input_tokens"),
                cache_write=_count(usage, "cache_creation_input_tokens"),
                reasoning=_count(_mapping(usage.get("output_tokens_details")), "thinking_tokens"),
            ),
            model=self.model or model,
            raw_stop_reason=stop,
            reasoning=tuple(self.reasoning),
        )


def map_claude_agent_error(
    error: BaseException | ResultMessage, *, assistant_error: str | None = None, provider: str = PROVIDER_NAME
) -> ProviderError | None:
    """The `ProviderError` for a failed turn of the Claude Agent SDK; None for an exception from elsewhere.

    The HTTP status of the failed API call decides when the CLI reports it:
    401 / 403 → `AuthenticationError`; 529 / 503 / "overloaded" → `OverloadedError`; 429 →
    `RateLimitError`; overflow wording → `ContextOverflowError`; 408, 409, 5xx and connection
    failures → `TransientServerError`; other 4xx → `InvalidRequestError`. Without a status the
    `assistant_error` kind decides the same way. A failure of the CLI process itself (a crash, an
    unparsable line, a run past `max_turns`) is a plain `ProviderError`.

    Args:
        error: The turn's failed `ResultMessage` or an SDK exception (`ResultError` carries the
            same fields).
        assistant_error: The `error` kind of the CLI's synthetic assistant message, when there was one.
        provider: The provider's name on the error.

    Returns:
        The typed error; None for an exception from elsewhere.
    """
    from claude_agent_sdk import ClaudeSDKError, CLIJSONDecodeError, ProcessError, ResultError, ResultMessage

    if isinstance(error, ResultMessage):
        fields = _Failure(error.subtype, error.api_error_status, _failure_text(error.result, error.errors))
    elif isinstance(error, ResultError):
        fields = _Failure(error.subtype or "", error.api_error_status, _failure_text(error.result, error.errors))
    elif isinstance(error, ProcessError):
        where = f" (exit code {error.exit_code})" if error.exit_code is not None else ""
        return ProviderError(provider, f"the Claude Code CLI failed{where}", body=error.stderr or str(error))
    elif isinstance(error, CLIJSONDecodeError):
        return ProviderError(provider, f"the Claude Code CLI sent a line that is not JSON: {error.line[:200]!r}")
    elif isinstance(error, ClaudeSDKError):
        return ProviderError(provider, f"the Claude Agent SDK failed: {error}")
    else:
        return None
    return fields.mapped(provider, assistant_error)


@dataclass(frozen=True, slots=True)
class _Failure:
    subtype: str
    status: int | None
    message: str

    def mapped(self, provider: str, kind: str | None) -> ProviderError:
        status, message = self.status, self.message or f"the turn failed ({self.subtype or 'no detail'})"
        if status is None and kind == "authentication_failed":
            status = 401
        elif status is None and kind == "rate_limit":
            status = 429
        mapped = error_for_status(
            provider,
            status,
            message,
            http=self.status,
            overloaded=_OVERLOADED.search(message) is not None,
            auth_hint=_AUTH_HINT,
        )
        if mapped is not None:
            return mapped
        if kind == "server_error":  # no status: the connection failed or timed out
            return TransientServerError(provider, message)
        if kind in ("invalid_request", "billing_error"):
            return InvalidRequestError(provider, message)
        return ProviderError(provider, message)


def _mapped(error: BaseException | ResultMessage, kind: str | None, stderr: deque[str]) -> ProviderError:
    mapped = map_claude_agent_error(error, assistant_error=kind)
    if mapped is None:  # not an SDK failure: only SDK exceptions and results get here
        return ProviderError(PROVIDER_NAME, f"unexpected failure: {error!r}", body=_tail(stderr))
    if not mapped.body:
        mapped.body = _tail(stderr)
    return mapped


def fork_of(session: ProviderSession) -> ProviderSession:
    """`session` marked so that its next turn forks it natively (the SDK's `fork_session`) at `resume_at`."""
    return msgspec.structs.replace(session, fork=True)


def _compacted(data: Mapping[str, Any]) -> ProviderCompacted:
    """The event for the CLI's `compact_boundary` message (`compact_metadata`: `trigger`, `pre_tokens`)."""
    metadata = _mapping(data.get("compact_metadata"))
    trigger = metadata.get("trigger")
    before = metadata.get("pre_tokens")
    return ProviderCompacted(
        trigger=trigger if isinstance(trigger, str) else "auto", tokens_before=before if isinstance(before, int) else 0
    )


def _names_resume_target(error: object, session: ProviderSession) -> bool:
    """Whether a failure before the turn ran says the session (or the message) to resume at is not there.

    The CLI's words are "No conversation found with session ID: X" and "No message found with
    message.uuid of: Y"; rather than the wording, look for a failure that ran no model call and
    names what we asked to resume.
    """
    subtype = getattr(error, "subtype", None)
    num_turns = getattr(error, "num_turns", None)
    if num_turns is None:
        data = getattr(error, "data", None)
        num_turns = data.get("num_turns") if isinstance(data, dict) else None
    if subtype != "error_during_execution" or num_turns not in (0, None):
        return False
    text = _failure_text(getattr(error, "result", None), getattr(error, "errors", None))
    return session.session_id in text or (session.resume_at is not None and session.resume_at in text)


def _failure_text(result: str | None, errors: list[Any] | None) -> str:
    parts = [e for e in errors or [] if isinstance(e, str) and e.strip()]
    if result and result not in parts:
        parts.insert(0, result)
    return "; ".join(parts)


def _count(usage: Mapping[str, Any], name: str) -> int:
    value = usage.get(name)
    return value if isinstance(value, int) else 0


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _tail(lines: deque[str]) -> str:
    return "\n".join(lines)


def _connection_env(
    api_key: str | None, base_url: str | None, config_dir: str | Path | None, timeout: float | None
) -> dict[str, str]:
    env: dict[str, str] = {}
    if api_key is not None:
        env["ANTHROPIC_API_KEY"] = api_key
    if base_url is not None:
        env["ANTHROPIC_BASE_URL"] = base_url
    if config_dir is not None:
        env["CLAUDE_CONFIG_DIR"] = os.fspath(config_dir)
    if timeout is not None:
        env["API_TIMEOUT_MS"] = str(max(1, round(timeout * 1000)))
    return env
