"""A local server's window from its own endpoints, when `/v1/models` names none (I/O: network).

llama.cpp's `GET /props` (`default_generation_settings.n_ctx`, a slot's window), Ollama's `POST /api/show`
(`num_ctx` in `parameters`, else the model's `*.context_length` capped at Ollama's default context) and
LM Studio's `GET /api/v0/models/{id}` (`loaded_context_length`, else `max_context_length`), asked in that
order at the server's root (the base URL without `/v1`). Nothing here raises: a server that answers none
of them keeps the window it had.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

if TYPE_CHECKING:
    import openai

OLLAMA_DEFAULT_CONTEXT: Final = 4096
"""The context Ollama serves a model whose `num_ctx` is unset (its `OLLAMA_CONTEXT_LENGTH`, not visible here)."""


MAX_REPORTED_WINDOW: Final = 100_000_000
"""A server-reported window above this (or not above 0) is not believed: the window it had stands."""


def reported_window(value: object) -> int | None:
    """`value` when it is a plausible window a server reported (an int in 1..`MAX_REPORTED_WINDOW`), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_REPORTED_WINDOW:
        return value
    return None


def props_window(answer: Mapping[str, Any]) -> int | None:
    """The window in llama.cpp's `/props` answer (a slot's `n_ctx`), or None."""
    settings = answer.get("default_generation_settings")
    found = reported_window(settings.get("n_ctx")) if isinstance(settings, Mapping) else None
    return found or reported_window(answer.get("n_ctx"))


def ollama_window(answer: Mapping[str, Any]) -> int | None:
    """The window Ollama serves, from its `/api/show` answer: `num_ctx`, else the model's, capped at the default."""
    parameters = answer.get("parameters")
    for line in parameters.splitlines() if isinstance(parameters, str) else ():
        name, _, value = line.strip().partition(" ")
        if name == "num_ctx" and value.strip().isdigit():
            return reported_window(int(value.strip()))
    info = answer.get("model_info")
    if not isinstance(info, Mapping):
        return None
    trained = [reported_window(v) for k, v in info.items() if isinstance(k, str) and k.endswith(".context_length")]
    found = next((window for window in trained if window is not None), None)
    return min(found, OLLAMA_DEFAULT_CONTEXT) if found is not None else None


def lm_studio_window(answer: Mapping[str, Any]) -> int | None:
    """The window in LM Studio's `/api/v0/models/{id}` answer: the loaded one, else the model's largest."""
    return reported_window(answer.get("loaded_context_length")) or reported_window(answer.get("max_context_length"))


def server_root(base_url: str) -> str:
    """The server's root: `base_url` without its trailing `/v1`."""
    root = base_url.rstrip("/")
    return root.removesuffix("/v1")


async def probe_window(client: openai.AsyncOpenAI, model: str, timeout: float) -> tuple[int, str] | None:
    """The window the server's own endpoints report for `model`, and which one said; None if none does.

    Args:
        client: The provider's SDK client (its base URL and key).
        model: The model id the provider sends.
        timeout: Seconds each request gets.

    Returns:
        `(window, where)` (`/props`, `/api/show`, `/api/v0/models`), or None.
    """
    root = server_root(str(client.base_url))
    asks: tuple[tuple[str, str, Mapping[str, Any] | None, Callable[[Mapping[str, Any]], int | None]], ...] = (
        ("/props", "/props", None, props_window),
        ("/api/show", "/api/show", {"model": model}, ollama_window),
        ("/api/v0/models", f"/api/v0/models/{quote(model, safe='')}", None, lm_studio_window),
    )
    for where, path, body, read in asks:
        answer = await _ask(client, f"{root}{path}", body, timeout)
        window = read(answer) if answer is not None else None
        if window is not None:
            return window, where
    return None


async def _ask(
    client: openai.AsyncOpenAI, url: str, body: Mapping[str, Any] | None, timeout: float
) -> Mapping[str, Any] | None:
    """GET `url` (POST `body` when given); its JSON object, or None."""
    import httpx

    try:
        if body is not None:
            response = await client.post(url, cast_to=httpx.Response, body=body, options={"timeout": timeout})
        else:
            response = await client.get(url, cast_to=httpx.Response, options={"timeout": timeout})
        answer = response.json()
    except Exception:  # not this kind of server, offline, too slow, not JSON: never a turn's failure
        return None
    return answer if isinstance(answer, Mapping) else None
