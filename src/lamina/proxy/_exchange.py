"""What the proxy reads of one exchange: the API of a path, the conversation a body belongs to, the usage (pure).

Reading never changes what is forwarded: a body that does not parse is sent on as it came, and
`read_request` says why it could not be read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

import msgspec

from lamina.session import Usage

Api: TypeAlias = Literal["anthropic", "count_tokens", "chat", "responses"]

_ROUTES: Final[Mapping[str, Api]] = {
    "/v1/messages": "anthropic",
    "/v1/messages/count_tokens": "count_tokens",
    "/v1/chat/completions": "chat",
    "/chat/completions": "chat",
    "/v1/responses": "responses",
    "/responses": "responses",
}


def api_of(path: str) -> Api | None:
    """The API a request path speaks (None: one the proxy forwards without reading)."""
    return _ROUTES.get(path.split("?", 1)[0].rstrip("/"))


@dataclass(frozen=True, slots=True)
class ReadRequest:
    """A request body as the proxy understood it."""

    api: Api
    body: Mapping[str, Any]
    key: str
    """The conversation's key: the hash of its prefix (system and first messages, cache marks left out)."""
    model: str
    stream: bool
    user_text: str
    """The text of the last message when it is the user's typing ("" when it is tool results only)."""
    first_text: str
    """The text of the conversation's first user message (the session's title), its context reminders left out."""


def read_request(api: Api, raw: bytes) -> ReadRequest | str:
    """The request in `raw`, or why it cannot be read (the body is then forwarded untouched)."""
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        return f"the body is not JSON ({exc})"
    if not isinstance(body, dict):
        return "the body is not a JSON object"
    prefix, messages = _prefix(api, body)
    if prefix is None:
        return "the body has no messages or input to recognise a conversation by"
    canonical = msgspec.json.encode(_without_cache_marks(prefix), order="sorted")
    key = hashlib.sha256(api.replace("count_tokens", "anthropic").encode() + b"\0" + canonical).hexdigest()
    users = [m for m in messages if isinstance(m, Mapping) and m.get("role") == "user"]
    last = messages[-1] if messages and isinstance(messages[-1], Mapping) else {}
    model = body.get("model")
    return ReadRequest(
        api=api,
        body=body,
        key=key,
        model=model if isinstance(model, str) else "",
        stream=body.get("stream") is True,
        user_text=_text(last.get("content")) if last.get("role") == "user" else "",
        first_text=_title_text(users[0].get("content")) if users else "",
    )


def _prefix(api: Api, body: Mapping[str, Any]) -> tuple[object | None, list[Any]]:
    """What identifies the conversation (None: nothing does), and its messages."""
    if api == "responses":
        given = body.get("input")
        items: list[Any] = [{"role": "user", "content": given}] if isinstance(given, str) else given or []
        if not isinstance(items, list) or not items:
            return None, []
        return [body.get("instructions"), *_through_first_user(items)], items
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return None, []
    return [body.get("system"), *_through_first_user(messages)], messages


def _through_first_user(messages: list[Any]) -> list[Any]:
    """The messages up to and including the first user message (system and developer messages before it)."""
    for i, message in enumerate(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            return messages[: i + 1]
    return messages[:1]


def _without_cache_marks(value: object) -> object:
    """`value` without `cache_control` (a client moves its breakpoints from request to request)."""
    if isinstance(value, Mapping):
        return {k: _without_cache_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_marks(v) for v in value]
    return value


def _text(content: object) -> str:
    """The text blocks of a message's content, joined (tool results and media left out)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = [
        block["text"]
        for block in content
        if isinstance(block, Mapping)
        and block.get("type") in ("text", "input_text")
        and isinstance(block.get("text"), str)
    ]
    return "\n".join(texts)


def _title_text(content: object) -> str:
    """The user's words in a first message: Claude Code's `<system-reminder>` blocks left out (unless all it has)."""
    text = _text(content)
    if not isinstance(content, list):
        return text
    own = [block for block in content if not (isinstance(block, Mapping) and _is_reminder(block.get("text")))]
    return _text(own) or text


def _is_reminder(text: object) -> bool:
    if not isinstance(text, str):
        return False
    stripped = text.strip()
    return stripped.startswith("<system-reminder>") and stripped.endswith("</system-reminder>")


@dataclass(frozen=True, slots=True)
class ReadResponse:
    """What the proxy read of a response: the usage, the answer's text, the model and why it stopped."""

    usage: Usage | None = None
    text: str = ""
    model: str = ""
    stop_reason: str | None = None


def read_response(api: Api, raw: bytes, *, stream: bool) -> ReadResponse:
    """The usage and text of a response body (a JSON document, or server-sent events when `stream`)."""
    if api == "count_tokens":
        return ReadResponse()
    if not stream:
        try:
            document = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            return ReadResponse()
        return _from_document(api, document) if isinstance(document, dict) else ReadResponse()
    fold = _StreamFold(api)
    for event in _events(raw):
        fold.add(event)
    return fold.result()


def _events(raw: bytes) -> Iterator[Mapping[str, Any]]:
    """The JSON `data:` payloads of a server-sent event stream, in order (`[DONE]` and non-JSON skipped)."""
    for line in raw.splitlines():
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        try:
            event = msgspec.json.decode(payload)
        except msgspec.DecodeError:
            continue
        if isinstance(event, dict):
            yield event


def _from_document(api: Api, doc: Mapping[str, Any]) -> ReadResponse:
    found = doc.get("model")
    model = found if isinstance(found, str) else ""
    if api == "anthropic":
        text = _text(doc.get("content"))
        return ReadResponse(
            usage=_anthropic_usage(doc.get("usage")), text=text, model=model, stop_reason=doc.get("stop_reason")
        )
    if api == "chat":
        choices = doc.get("choices") or [{}]
        message = choices[0].get("message") or {} if isinstance(choices[0], Mapping) else {}
        content = message.get("content")
        reason = choices[0].get("finish_reason") if isinstance(choices[0], Mapping) else None
        return ReadResponse(
            usage=_openai_usage(doc.get("usage"), "prompt_tokens", "completion_tokens"),
            text=content if isinstance(content, str) else "",
            model=model,
            stop_reason=reason,
        )
    return _responses_document(doc, model)


def _responses_document(doc: Mapping[str, Any], model: str) -> ReadResponse:
    texts: list[str] = []
    for item in doc.get("output") or []:
        if isinstance(item, Mapping) and item.get("type") == "message":
            texts += [
                c["text"]
                for c in item.get("content") or []
                if isinstance(c, Mapping) and isinstance(c.get("text"), str)
            ]
    return ReadResponse(
        usage=_openai_usage(doc.get("usage"), "input_tokens", "output_tokens"),
        text="".join(texts),
        model=model,
        stop_reason=doc.get("status") if isinstance(doc.get("status"), str) else None,
    )


def _anthropic_usage(usage: object) -> Usage | None:
    if not isinstance(usage, Mapping):
        return None
    return Usage(
        input=_count(usage.get("input_tokens")),
        output=_count(usage.get("output_tokens")),
        cache_read=_count(usage.get("cache_read_input_tokens")),
        cache_write=_count(usage.get("cache_creation_input_tokens")),
    )


def _openai_usage(usage: object, prompt: str, completion: str) -> Usage | None:
    """OpenAI's usage as Lamina counts it: `input` without the cached tokens, which are `cache_read`."""
    if not isinstance(usage, Mapping):
        return None
    details = usage.get(f"{prompt.split('_')[0]}_tokens_details") or {}
    out_details = usage.get(f"{completion.split('_')[0]}_tokens_details") or {}
    cached = _count(details.get("cached_tokens")) if isinstance(details, Mapping) else 0
    reasoning = _count(out_details.get("reasoning_tokens")) if isinstance(out_details, Mapping) else 0
    return Usage(
        input=max(0, _count(usage.get(prompt)) - cached),
        output=_count(usage.get(completion)),
        cache_read=cached,
        reasoning=reasoning,
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class _StreamFold:
    """The usage and text of a stream, folded event by event."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.texts: list[str] = []
        self.model = ""
        self.stop: str | None = None
        self.usage: Usage | None = None
        self.start: Mapping[str, Any] = {}

    def add(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if self.api == "anthropic":
            self._anthropic(kind, event)
        elif self.api == "chat":
            self._chat(event)
        elif kind == "response.output_text.delta" and isinstance(event.get("delta"), str):
            self.texts.append(event["delta"])
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            whole = _responses_document(event.get("response") or {}, "")
            self.usage, self.stop = whole.usage, whole.stop_reason
            model = (event.get("response") or {}).get("model")
            self.model = model if isinstance(model, str) else ""

    def _anthropic(self, kind: object, event: Mapping[str, Any]) -> None:
        if kind == "message_start" and isinstance(event.get("message"), Mapping):
            message = event["message"]
            self.model = message.get("model") if isinstance(message.get("model"), str) else ""
            self.start = message.get("usage") or {}
            self.usage = _anthropic_usage(self.start)
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
                self.texts.append(delta["text"])
        elif kind == "message_delta":
            self.stop = (event.get("delta") or {}).get("stop_reason")
            self.usage = _anthropic_usage({**self.start, **(event.get("usage") or {})})

    def _chat(self, event: Mapping[str, Any]) -> None:
        if isinstance(event.get("model"), str):
            self.model = event["model"]
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or {} if isinstance(choice, Mapping) else {}
            if isinstance(delta.get("content"), str):
                self.texts.append(delta["content"])
            if isinstance(choice, Mapping) and choice.get("finish_reason"):
                self.stop = choice["finish_reason"]
        if isinstance(event.get("usage"), Mapping):
            self.usage = _openai_usage(event["usage"], "prompt_tokens", "completion_tokens")

    def result(self) -> ReadResponse:
        return ReadResponse(usage=self.usage, text="".join(self.texts), model=self.model, stop_reason=self.stop)
