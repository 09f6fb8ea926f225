"""How the Anthropic adapter reads the SDK's exceptions: the one place they become `ProviderError`s."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from lamina.errors import (
    AuthenticationError,
    InvalidRequestError,
    ProviderError,
    TransientServerError,
)
from lamina.providers._errors import error_for_status
from lamina.providers._retry import is_transport_error, parse_retry_after

PROVIDER_NAME: Final = "anthropic"

# `error.type` → the HTTP status it stands for, for errors sent inside a 200 event stream.
_ERROR_TYPE_STATUS: Final = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
# "prompt is too long: 208656 tokens > 200000 maximum";
# "input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000, ..."
_NO_CREDENTIALS: Final = "Could not resolve authentication method"


def map_anthropic_error(exc: BaseException, *, provider: str = PROVIDER_NAME) -> ProviderError | None:
    """The `ProviderError` for an exception from the Anthropic SDK or its HTTP stack; None if it is neither.

    400 with overflow wording → `ContextOverflowError`; 429 → `RateLimitError` (with `retry-after`);
    529 / 503 / `overloaded_error` → `OverloadedError`; 401 / 403 → `AuthenticationError`; other
    4xx → `InvalidRequestError`; 408, 409, 5xx, connection failures and timeouts →
    `TransientServerError`. An `error` event inside a 200 stream is classified by its `error.type`.
    """
    import anthropic

    if isinstance(exc, anthropic.APIStatusError):
        error_type, message = _error_fields(exc.body)
        http = exc.status_code if exc.status_code >= 400 else None
        status = http or _ERROR_TYPE_STATUS.get(error_type or "", 500)
        body = exc.body if isinstance(exc.body, str) else json.dumps(exc.body)
        message = message or str(exc)
        retry_after = parse_retry_after(exc.response.headers)
        mapped = error_for_status(
            provider,
            status,
            message,
            http=http,
            body=body,
            retry_after=retry_after,
            overloaded=error_type == "overloaded_error",
            auth_hint="check the API key (ANTHROPIC_API_KEY or api_key=)",
        )
        return mapped or InvalidRequestError(provider, message, status=http, body=body)
    if isinstance(exc, anthropic.APIResponseValidationError):
        return ProviderError(provider, f"the response does not match the API's schema: {exc.__cause__ or exc}")
    if isinstance(exc, anthropic.APITimeoutError):
        return TransientServerError(provider, "the request timed out")
    if isinstance(exc, anthropic.APIConnectionError):
        return TransientServerError(provider, f"connection failed: {exc.__cause__ or exc}")
    if is_transport_error(exc):
        return TransientServerError(provider, f"connection lost while streaming: {exc!r}")
    if isinstance(exc, TypeError) and _NO_CREDENTIALS in str(exc):
        return AuthenticationError(provider, "no API key: set ANTHROPIC_API_KEY or pass api_key")
    credentials = getattr(anthropic, "CredentialsError", None)
    if isinstance(credentials, type) and isinstance(exc, credentials):  # newer SDKs look for profiles and files
        return AuthenticationError(provider, f"no API key: set ANTHROPIC_API_KEY or pass api_key ({exc})")
    return None


def _error_fields(body: object) -> tuple[str | None, str]:
    """`error.type` and `error.message` of an Anthropic error body (`{"type": "error", "error": {...}}`)."""
    error = body.get("error") if isinstance(body, Mapping) else None
    if not isinstance(error, Mapping):
        return None, ""
    error_type, message = error.get("type"), error.get("message")
    return (error_type if isinstance(error_type, str) else None), (message if isinstance(message, str) else "")
