"""The one place OpenAI SDK exceptions and error objects become `ProviderError`s (the SDK is imported when used)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from lamina.errors import InvalidRequestError, ProviderError, RateLimitError, TransientServerError
from lamina.providers._errors import error_for_status
from lamina.providers._retry import is_transport_error, parse_retry_after

_CODE_STATUS: Final = {
    "context_length_exceeded": 400,
    "invalid_api_key": 401,
    "insufficient_quota": 429,
    "rate_limit_exceeded": 429,
    "server_error": 500,
    "vector_store_timeout": 500,
}
_TYPE_STATUS: Final = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "insufficient_quota": 429,
    "rate_limit_error": 429,
    "requests": 429,
    "tokens": 429,
    "server_error": 500,
}
# OpenAI: "This model's maximum context length is 128000 tokens. However, your messages resulted in ...";
# Responses: "Your input exceeds the context window of this model."; vLLM reuses OpenAI's wording;
# llama.cpp: "the request exceeds the available context size".


def map_openai_error(exc: BaseException, *, provider: str = "openai") -> ProviderError | None:
    """The `ProviderError` for an exception from the OpenAI SDK or its HTTP stack; None if it is neither.

    `context_length_exceeded` (or overflow wording) → `ContextOverflowError`; 429 →
    `RateLimitError` with `retry-after` (not retryable for `insufficient_quota`); 503 →
    `OverloadedError`; 401 / 403 → `AuthenticationError`; other 4xx → `InvalidRequestError`;
    408, 409, 5xx, connection failures and timeouts → `TransientServerError`. Errors sent inside
    a stream carry no status and are classified by their `code` and `type`.
    """
    import openai

    if isinstance(exc, openai.APIStatusError):
        headers = exc.response.headers
        return classify_openai_error(provider, http=exc.status_code, error=exc.body, headers=headers, fallback=str(exc))
    if isinstance(exc, openai.APITimeoutError):
        return TransientServerError(provider, "the request timed out")
    if isinstance(exc, openai.APIConnectionError):
        return TransientServerError(provider, f"connection failed: {exc.__cause__ or exc}")
    if isinstance(exc, openai.APIResponseValidationError):
        return ProviderError(provider, f"the response does not match the API's schema: {exc.__cause__ or exc}")
    if isinstance(exc, openai.APIError):  # an error object sent inside the event stream
        return classify_openai_error(provider, http=None, error=exc.body, headers=None, fallback=exc.message)
    if is_transport_error(exc):
        return TransientServerError(provider, f"connection lost while streaming: {exc!r}")
    return None


def classify_openai_error(
    provider: str, *, http: int | None, error: object, headers: Mapping[str, str] | None, fallback: str = ""
) -> ProviderError:
    """The error for an OpenAI error object (`{"message", "type", "param", "code"}`) and its HTTP status."""
    fields: Mapping[str, object] = error if isinstance(error, Mapping) else {}
    code = str(fields["code"]) if fields.get("code") is not None else ""
    error_type = str(fields.get("type") or "")
    message = str(fields.get("message") or fallback or error_type or "unknown error")
    body = error if isinstance(error, str) else json.dumps(error, default=str)
    status = http if http is not None and http >= 400 else None
    effective = status or _CODE_STATUS.get(code) or _TYPE_STATUS.get(error_type) or 500
    mapped = error_for_status(
        provider,
        effective,
        message,
        http=status,
        body=body,
        retry_after=parse_retry_after(headers),
        overflow=code == "context_length_exceeded",
        auth_hint="check the API key (OPENAI_API_KEY or api_key=)",
    ) or InvalidRequestError(provider, message, status=status, body=body)
    if isinstance(mapped, RateLimitError) and "insufficient_quota" in (code, error_type):
        mapped.retryable = False  # out of credit: waiting does not help
    return mapped
