"""Lamina inside pydantic-ai: a history processor and an instructions function on a Lamina session (I/O: the store).

`pip install 'lamina[pydantic-ai]'`. `LaminaHistory` gives an `Agent` its instructions function,
a capability that logs, places, defangs and compacts before every model request, and the
history to continue with (`history.messages()`). pydantic-ai keeps what the processor returns,
so a message is logged exactly as the model was sent it. See docs/integrations.md.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Unpack

import msgspec

from lamina.context import TurnContext
from lamina.defang import neutralise
from lamina.engine import CompactionOutcome
from lamina.errors import MissingExtraError
from lamina.integrations._options import CompactionPolicy, ThreadKeywords, ThreadOptions
from lamina.integrations._thread import LaminaThread
from lamina.session import AssistantMessage, Reasoning, SessionStore, ToolCall, ToolResult

try:
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.tools import RunContext
except ImportError as exc:
    raise MissingExtraError.of(exc, "the pydantic-ai integration", "pydantic-ai") from None

_MESSAGE = "pydantic_ai.message"
"""The name of the log entries holding the messages as sent."""
_HEAD: dict[str, Any] = {"lamina": "head"}
"""The metadata of the first request Lamina puts in the history (stable project parts, summary, lane)."""


def _dump(message: ModelMessage) -> dict[str, Any]:
    dumped: dict[str, Any] = ModelMessagesTypeAdapter.dump_python([message], mode="json")[0]
    return dumped


def _load(data: Any) -> ModelMessage:
    return ModelMessagesTypeAdapter.validate_python([data])[0]


def _key(data: dict[str, Any]) -> str:
    """What identifies a message across a run: kind, time and parts (pydantic-ai sets `instructions` later)."""
    return json.dumps([data.get("kind"), data.get("timestamp"), data.get("parts")], sort_keys=True)


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False, default=str)


class LaminaHistory:
    """A pydantic-ai agent's message history on a Lamina session: placement, defanging, compaction, the log."""

    def __init__(self, thread: LaminaThread) -> None:
        """The history of `thread`'s session (`LaminaHistory.open` opens the thread)."""
        self.thread = thread
        self._turn: TurnContext | None = None
        self._head_texts: set[str] = set()
        self._loaded: dict[str, ModelMessage] = {}
        """Logged messages decoded from their entries, by entry id."""
        self._logged_objects: dict[int, ModelMessage] = {}
        """The message objects handed out by `messages` (held, so their ids stay theirs)."""

    @classmethod
    def open(
        cls,
        store: SessionStore,
        session_id: str | None = None,
        *,
        options: ThreadOptions | None = None,
        **keywords: Unpack[ThreadKeywords],
    ) -> LaminaHistory:
        """The history of session `session_id` of `store` (resumed), or of a new session.

        Args:
            store: The Lamina session store.
            session_id: The session to resume; None makes a new one.
            options: How the Lamina session is set up (default: `ThreadOptions()`).
            **keywords: Fields of `ThreadOptions`, overriding those of `options`.
        """
        return cls(LaminaThread.open(store, session_id, options=options, title="pydantic-ai", **keywords))

    @property
    def session_id(self) -> str:
        """The Lamina session's id (pass it to `open` to resume)."""
        return self.thread.id

    def close(self) -> None:
        """Flush and close the Lamina session (releases its writer lock)."""
        self.thread.close()

    def messages(self) -> list[ModelMessage]:
        """The logged history in view (after a compaction: the kept messages), for `message_history`."""
        out: list[ModelMessage] = []
        for twin in self.thread.twins(_MESSAGE):
            message = self._loaded.get(twin.id)
            if message is None:  # each logged message is decoded once, and known as logged
                message = self._loaded[twin.id] = _load(twin.data)
                self._logged_objects[id(message)] = message
            out.append(message)
        return out

    def _is_logged(self, message: ModelMessage, logged: set[str]) -> bool:
        return id(message) in self._logged_objects or _key(_dump(message)) in logged

    def instructions(self, ctx: RunContext[Any] | None = None) -> str:
        """The stable parts with system authority: an instructions function for `Agent(instructions=...)`."""
        return self.thread.system_text(self._turn or self.thread.preview())

    def capability(self) -> LaminaCapability:
        """The capability to give the agent (`Agent(capabilities=[history.capability()])`).

        It adds `instructions`, runs `process` before every model request and logs every response
        as it arrives (the last answer of a run included).
        """
        return LaminaCapability(self)

    async def compact(self, focus: str | None = None) -> CompactionOutcome:
        """Compact now, with Lamina's compaction; the next request carries the summary and the lane."""
        return await self.thread.compact(trigger="manual", focus=focus)

    async def process(self, ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        """The history processor: log what is new, place Lamina's parts, compact when needed."""
        history = self._without_head(messages)
        logged = self.thread.twin_keys(_MESSAGE, _key)
        new = [m for m in history if not self._is_logged(m, logged)]
        starts_turn = any(
            isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart) for p in m.parts) for m in new
        )
        if starts_turn and self.thread.over_threshold(json.dumps([_dump(m) for m in new])):
            await self.thread.compact(trigger="threshold")
        for message in new:
            self._log(message)
        placed = self.messages()
        head = self._head()
        return [head, *placed] if head is not None else placed

    def _head(self) -> ModelRequest | None:
        turn = self._turn or self.thread.preview()
        texts = [t for t in (self.thread.context_text(turn), *self.thread.prelude_texts(turn)) if t]
        if not texts:
            return None
        self._head_texts.update(texts)
        return ModelRequest(parts=[UserPromptPart(content=t) for t in texts], metadata=dict(_HEAD))

    def _without_head(self, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        """`messages` without what `_head` put in (also when pydantic-ai merged it into the next request)."""
        out: list[ModelMessage] = []
        heads = self._head_texts
        for message in messages:
            if isinstance(message, ModelRequest):
                if message.metadata == _HEAD:
                    continue
                parts = [
                    p
                    for p in message.parts
                    if not (isinstance(p, UserPromptPart) and isinstance(p.content, str) and p.content in heads)
                ]
                if not parts:
                    continue
                if len(parts) != len(message.parts):
                    message = _replace(message, parts=parts)
            out.append(message)
        return out

    def log_response(self, response: ModelResponse) -> None:
        """Log a model response as it arrives (the capability calls this after every model request).

        Group commit, as in Lamina's own loop: every append reaches the kernel at once, and the log
        is fsynced when the model answers without calling a tool (the turn's end).
        """
        if not self._is_logged(response, self.thread.twin_keys(_MESSAGE, _key)):
            self._log(response)
        if not any(isinstance(p, ToolCallPart) for p in response.parts):
            self.thread.flush()

    def _log(self, message: ModelMessage) -> None:
        if isinstance(message, ModelResponse):
            if self._turn is not None:
                self.thread.commit(self._turn)  # the model answered a request carrying the turn
            thinking: list[ThinkingPart] = []  # the reasoning before the next text or call
            for part in message.parts:
                if isinstance(part, ThinkingPart):
                    thinking.append(part)
                elif isinstance(part, TextPart) and part.content:
                    self.thread.record(AssistantMessage(text=part.content, reasoning=_reasoning_of(thinking)))
                    thinking.clear()
                elif isinstance(part, ToolCallPart):
                    if reasoning := _reasoning_of(thinking):
                        self.thread.record(AssistantMessage(text="", reasoning=reasoning))
                    thinking.clear()
                    args = part.args_as_dict()
                    self.thread.record(ToolCall(call_id=part.tool_call_id, name=part.tool_name, input=args))
            if reasoning := _reasoning_of(thinking):
                self.thread.record(AssistantMessage(text="", reasoning=reasoning))
            self.thread.record_twin(_MESSAGE, _dump(message))
            return
        parts: list[Any] = []
        for piece in message.parts:
            if isinstance(piece, UserPromptPart):
                self._turn = self.thread.begin_turn(_content_text(piece.content))
                parts.append(piece)
                tail = self.thread.tail_text(self._turn)
                if tail:
                    parts.append(UserPromptPart(content=tail, timestamp=piece.timestamp))
            elif isinstance(piece, ToolReturnPart):
                content = _content_text(piece.content)
                self.thread.record(ToolResult(call_id=piece.tool_call_id, name=piece.tool_name, content=content))
                parts.append(_replace(piece, content=str(neutralise(content))))
            elif isinstance(piece, RetryPromptPart) and piece.tool_name is not None:
                content = _content_text(piece.content)
                self.thread.record(
                    ToolResult(call_id=piece.tool_call_id, name=piece.tool_name, content=content, is_error=True)
                )
                parts.append(piece)
            else:
                parts.append(piece)
        self.thread.record_twin(_MESSAGE, _dump(_replace(message, parts=parts)))


@dataclass
class LaminaCapability(AbstractCapability[Any]):
    """Lamina's placement, compaction and durable log for a pydantic-ai agent (see `LaminaHistory`)."""

    history: LaminaHistory

    def get_instructions(self) -> Callable[[RunContext[Any] | None], str]:
        """`LaminaHistory.instructions`: the stable parts with system authority."""
        return self.history.instructions

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Run `LaminaHistory.process` on the request's messages; they become the run's history too."""
        messages = await self.history.process(ctx, list(request_context.messages))
        request_context.messages = messages.copy()
        ctx.messages[:] = messages  # pydantic-ai keeps the processed history as the run's history
        return request_context

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        """Log the model's response as it arrives (`LaminaHistory.log_response`)."""
        self.history.log_response(response)
        return response

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """None: the capability holds a live session, so it is not serialisable."""
        return None


_CHAT_FIELDS = frozenset({"reasoning", "reasoning_content"})
"""The `ThinkingPart.id` of a server's reasoning: the Chat Completions field it came in."""
_REDACTED = "redacted_thinking"


def _reasoning_of(parts: Sequence[ThinkingPart]) -> tuple[Reasoning, ...]:
    """Lamina's reasoning blocks for pydantic-ai's thinking parts, in order.

    Anthropic's thinking (`signature`) and redacted thinking (`id="redacted_thinking"`, its data in
    `signature`); a Responses reasoning item (its summaries as consecutive parts of one id, the
    encrypted content as the first one's `signature`); a server's `reasoning_content`/`reasoning`
    field. Other providers' thinking (Google, Bedrock, ...) has no Lamina block: it stays in the
    logged message only, which is what goes back to pydantic-ai (`LaminaHistory.messages`).
    """
    out: list[Reasoning] = []
    for part in parts:
        if part.id in _CHAT_FIELDS:
            out.append(Reasoning(provider="openai-compat", kind="reasoning_content", text=part.content, field=part.id))
        elif part.provider_name == "anthropic" and part.id == _REDACTED:
            out.append(Reasoning(provider="anthropic", kind="redacted_thinking", data=part.signature or ""))
        elif part.provider_name == "anthropic":
            out.append(
                Reasoning(provider="anthropic", kind="thinking", text=part.content, signature=part.signature or "")
            )
        elif part.provider_name == "openai" and part.id:
            last = out[-1] if out else None
            summary = (part.content,) if part.content else ()
            if last is not None and last.provider == "openai" and last.item_id == part.id:
                out[-1] = msgspec.structs.replace(last, summary=(*last.summary, *summary))
            else:
                out.append(
                    Reasoning(
                        provider="openai", kind="reasoning", item_id=part.id, summary=summary, data=part.signature or ""
                    )
                )
    return tuple(out)


def _replace(obj: Any, **changes: Any) -> Any:
    return dataclasses.replace(obj, **changes)


__all__ = ["CompactionPolicy", "LaminaCapability", "LaminaHistory", "ThreadOptions"]
