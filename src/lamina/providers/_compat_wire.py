"""The conservative Chat Completions wire for OpenAI-compatible servers, and what their errors say of the window (pure).

Local servers (llama.cpp, llama-cpp-python, vLLM, Ollama, LM Studio) run the model's chat template over
the messages: some templates take only string content, some servers know `max_tokens` only, and a small
model with no output cap writes until the server's context ends. `conservative_body` sends what every
one of them reads; `overflow_window` reads the window a server's overflow error names. docs/providers.md
tells each server's shapes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from lamina.providers._provider import Capabilities
from lamina.providers._server_windows import reported_window

MIN_OUTPUT_CAP: Final = 256
"""The smallest output cap sent when none is set: below it a tool call's arguments do not fit."""
OUTPUT_SHARE: Final = 4
"""With no cap set, at most a quarter of the window is left for the answer."""
PART_SEPARATOR: Final = "\n\n"
"""Between two text parts of one message, joined into its string content."""

_VLLM_OVERFLOW: Final = re.compile(r"maximum context length is (\d+) tokens")
_VLLM_NEEDED: Final = re.compile(r"(?:you requested|resulted in|your request has) (\d+)")
_LLAMA_CPP_PYTHON_OVERFLOW: Final = re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)")


def output_cap(capabilities: Capabilities, setting: int | None) -> int:
    """The `max_tokens` a compatible server is sent: the setting, else a quarter of the window (capped by the table).

    Args:
        capabilities: The model's window and output limit (from the server, the table or the defaults).
        setting: The provider's `max_tokens`, when given.

    Returns:
        The cap.
    """
    if setting is not None:
        return setting
    share = max(MIN_OUTPUT_CAP, capabilities.context_window // OUTPUT_SHARE)
    return min(capabilities.max_output_tokens, share)


def conservative_body(body: Mapping[str, Any], *, max_tokens: int) -> dict[str, Any]:
    """`body` as every compatible server reads it: string content, `max_tokens`, `tool_choice` with tools.

    A message whose content is a list of text parts only gets their texts joined (`PART_SEPARATOR`); a list
    with an image or any other part stays a list. `max_completion_tokens` becomes `max_tokens` (which
    llama-cpp-python and older servers know), `max_tokens` is set when absent, and `tool_choice: "auto"`
    is sent with tools (vLLM and some templates decide otherwise when it is missing).

    Args:
        body: A Chat Completions body, as rendered.
        max_tokens: The output cap when the body has none.

    Returns:
        A new body.
    """
    out = dict(body)
    messages = body.get("messages")
    if isinstance(messages, list):
        out["messages"] = [_plain(message) for message in messages]
    cap = out.pop("max_completion_tokens", None)
    out["max_tokens"] = out.get("max_tokens") or cap or max_tokens
    if out.get("tools"):
        out.setdefault("tool_choice", "auto")
    return out


def _plain(message: Any) -> Any:
    if not isinstance(message, Mapping):
        return message
    content = message.get("content")
    if not isinstance(content, list) or not content:
        return message
    texts = []
    for part in content:
        if not isinstance(part, Mapping) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            return message
        texts.append(part["text"])
    return {**message, "content": PART_SEPARATOR.join(texts)}


def overflow_window(error: object, message: str) -> tuple[int, int | None] | None:
    """The window a compatible server's overflow error names, and the tokens the request needed.

    llama.cpp sends `n_ctx` and `n_prompt_tokens` beside `exceed_context_size_error`; vLLM words it as
    OpenAI does (`maximum context length is N tokens ... requested M`); llama-cpp-python says
    `Requested tokens (M) exceed context window of N`.

    Args:
        error: The error object (the body's `error`, or the body), as decoded JSON.
        message: The error's message.

    Returns:
        `(window, needed)` (`needed` None when not said), or None when the error names no plausible window
        (`reported_window`).
    """
    fields: Mapping[str, Any] = error if isinstance(error, Mapping) else {}
    inner = fields.get("error")
    if isinstance(inner, Mapping):
        fields = inner
    window, needed = reported_window(fields.get("n_ctx")), fields.get("n_prompt_tokens")
    if window is not None:
        return window, needed if isinstance(needed, int) and not isinstance(needed, bool) else None
    found = _VLLM_OVERFLOW.search(message)
    if found is not None and (window := reported_window(int(found[1]))) is not None:
        asked = _VLLM_NEEDED.search(message, found.end())
        return window, int(asked[1]) if asked is not None else None
    found = _LLAMA_CPP_PYTHON_OVERFLOW.search(message)
    if found is not None and (window := reported_window(int(found[2]))) is not None:
        return window, int(found[1])
    return None
