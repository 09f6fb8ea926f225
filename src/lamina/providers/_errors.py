"""The one mapping from an HTTP status (and overflow wording) to Lamina's typed provider errors (pure).

Each adapter reads its SDK's exceptions in its own way (status, error body, headers) and then asks
`error_for_status` which `ProviderError` that is, so every backend classifies alike. `require_sdk`
names the extra of an SDK that is not installed, without importing it.
"""

from __future__ import annotations

import importlib.util
import re
from typing import Final

from lamina.errors import (
    AuthenticationError,
    ContextOverflowError,
    InvalidRequestError,
    MissingExtraError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    TransientServerError,
)

OVERFLOW_WORDING: Final = re.compile(
    r"prompt is too long|maximum context length|exceeds? (?:the )?context (?:limit|window)"
    r"|context (?:window|length|size|limit)",
    re.IGNORECASE,
)
"""How providers word "the prompt does not fit the context window"."""


def error_for_status(
    provider: str,
    status: int | None,
    message: str,
    *,
    http: int | None = None,
    body: str = "",
    retry_after: float | None = None,
    overloaded: bool = False,
    overflow: bool = False,
    auth_hint: str = "",
) -> ProviderError | None:
    """The typed error for `status`.

    Args:
        provider: The provider's name.
        status: What decides: the HTTP status, or one derived from an error type sent inside a stream.
        message: The error's message.
        http: The real HTTP status recorded on the error (None for in-stream errors).
        body: The response body, as received.
        retry_after: Seconds to wait, when the provider said.
        overloaded: The caller read "overloaded" from the error body.
        overflow: The caller read a context overflow from the error body.
        auth_hint: Added to an authentication error's message (which key to set).

    Returns:
        The typed error; None when neither the status nor the flags say what it is.
    """
    overflow = overflow or (status in (None, 400, 413, 422) and OVERFLOW_WORDING.search(message) is not None)
    if overflow:
        return ContextOverflowError(provider, message, status=http, body=body)
    if overloaded or status in (503, 529):
        return OverloadedError(provider, message, status=http, body=body, retry_after=retry_after)
    if status == 429:
        return RateLimitError(provider, message, status=http, body=body, retry_after=retry_after)
    if status in (401, 403):
        text = f"{message}; {auth_hint}" if auth_hint else message
        return AuthenticationError(provider, text, status=http, body=body)
    if status is not None and (status in (408, 409) or status >= 500):
        return TransientServerError(provider, message, status=http, body=body)
    if status is not None and status >= 400:
        return InvalidRequestError(provider, message, status=http, body=body)
    return None


def require_sdk(module: str, feature: str, extra: str) -> None:
    """Check that an SDK is installed without importing it: providers import theirs on first use.

    Args:
        module: The SDK's top-level module (`anthropic`).
        feature: What needs it (`the Anthropic provider`).
        extra: The extra that installs it.

    Raises:
        MissingExtraError: `module` cannot be found.
    """
    if importlib.util.find_spec(module) is None:
        raise MissingExtraError(feature, extra, module)
