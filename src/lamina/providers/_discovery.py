"""Model discovery: the models endpoint read once per process, its answers cached with their date (I/O: network, disk).

Anthropic's `GET /v1/models/{id}` (through the SDK's `beta.models.retrieve`) answers are kept in the
user's cache folder (`ModelCache`) and read again after `REFETCH_AGE`; an OpenAI-compatible server's
`/v1/models` window is read once per process (a local server's window changes with its launch flags).
Nothing here raises: offline, a refusal or a timeout keeps the capabilities the provider had, and a
stale cached answer stands in for a refetch that failed. Every answer is remembered for the process.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

import platformdirs

from lamina._atomic import atomic_write
from lamina.providers._model_table import from_model_info, openai_compatible_window
from lamina.providers._provider import Capabilities, Provider
from lamina.providers._server_windows import probe_window, server_root

if TYPE_CHECKING:
    import anthropic
    import openai

DISCOVERY_TIMEOUT: Final = 3.0
"""Seconds a models endpoint gets before the turn goes on without it."""
REFETCH_AGE: Final = 7 * 24 * 3600.0
"""A cached answer older than this is fetched again (kept, marked stale, if the fetch fails)."""
CACHE_VERSION: Final = 1

_answers: dict[str, Capabilities] = {}
"""This process's discoveries (and failures), by cache file, provider, server and model: each is read once."""


@dataclass(frozen=True, slots=True)
class CachedModel:
    """One models-endpoint answer kept on disk."""

    info: Mapping[str, Any]
    """The answer's JSON, as the endpoint sent it (read again on every load, so a newer Lamina reads more of it)."""
    fetched_at: float
    """When it was fetched (seconds since the epoch)."""

    @property
    def date(self) -> str:
        """The fetch's day, `YYYY-MM-DD` (UTC)."""
        return datetime.fromtimestamp(self.fetched_at, UTC).strftime("%Y-%m-%d")


class ModelCache:
    """The models endpoint's answers in one JSON file of the user's cache folder, each with its fetch time."""

    def __init__(
        self, path: Path | None = None, *, refetch_age: float = REFETCH_AGE, clock: Callable[[], float] = time.time
    ) -> None:
        """Create the cache (nothing is read until asked).

        Args:
            path: The file; None is `models.json` in the user's cache folder (`platformdirs`).
            refetch_age: Seconds after which an answer is fetched again.
            clock: The time source (seconds since the epoch).
        """
        self.path = path if path is not None else platformdirs.user_cache_path("lamina") / "models.json"
        self.refetch_age = refetch_age
        self.clock = clock

    def get(self, key: str) -> CachedModel | None:
        """The answer kept for `key`, fresh or not; None if none (or the file cannot be read)."""
        entry = self._load().get(key)
        if not isinstance(entry, Mapping):
            return None
        info, fetched_at = entry.get("info"), entry.get("fetched_at")
        if not isinstance(info, Mapping) or not isinstance(fetched_at, int | float):
            return None
        return CachedModel(info, float(fetched_at))

    def fresh(self, cached: CachedModel) -> bool:
        """Whether `cached` is younger than the refetch age."""
        return self.clock() - cached.fetched_at < self.refetch_age

    def put(self, key: str, info: Mapping[str, Any]) -> CachedModel:
        """Keep `info` for `key`, fetched now; a file that cannot be written is left as it is."""
        cached = CachedModel(info, self.clock())
        models = self._load()
        models[key] = {"info": dict(info), "fetched_at": cached.fetched_at}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps({"version": CACHE_VERSION, "models": models}, indent=1, sort_keys=True)
            atomic_write(self.path, text.encode())
        except OSError:
            pass
        return cached

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        models = data.get("models") if isinstance(data, dict) and data.get("version") == CACHE_VERSION else None
        return dict(models) if isinstance(models, dict) else {}


@runtime_checkable
class _Discovering(Protocol):
    """A provider that can read its model's capabilities from its models endpoint (the SDK-backed ones)."""

    async def discover(self, *, cache: ModelCache | None = None, timeout: float = DISCOVERY_TIMEOUT) -> Capabilities:
        """Read the model's capabilities and use them from now on; returns them."""
        ...


async def discover_capabilities(
    provider: Provider, *, cache: ModelCache | None = None, timeout: float = DISCOVERY_TIMEOUT
) -> Capabilities:
    """Have `provider` read its model's capabilities from its models endpoint, once per process; never raises.

    Call it at the edge, before the first turn (the CLI does when a session opens). Anthropic's answer is
    cached in the user's cache folder and fetched again after `REFETCH_AGE`; an OpenAI-compatible server's
    reported window is read; OpenAI's own endpoint reports no window, so the shipped table stands. A
    provider built with explicit `capabilities`, or one that cannot discover (scripted, the Claude Agent
    SDK), keeps what it has. Offline, the shipped table (or the defaults, `source` saying so) stands.

    Args:
        provider: The provider.
        cache: Where answers are kept; None is the user's cache folder.
        timeout: Seconds the endpoint gets.

    Returns:
        The provider's capabilities from now on (`source` says where they came from).
    """
    if isinstance(provider, _Discovering):
        return await provider.discover(cache=cache, timeout=timeout)
    return provider.capabilities


def forget_discoveries() -> None:
    """Forget this process's discoveries, so the next ones read the endpoints (or the cache) again."""
    _answers.clear()


async def discover_anthropic(
    sdk: Callable[[], anthropic.AsyncAnthropic], model: str, base: Capabilities, cache: ModelCache, timeout: float
) -> Capabilities:
    """`model`'s capabilities from Anthropic's models endpoint: a fresh cached answer, else a fetch, else `base`.

    Args:
        sdk: Builds (or returns) the provider's SDK client: its server and key.
        model: The model id.
        base: The shipped row or defaults, which the answer updates (and which stand when nothing answers).
        cache: Where answers are kept.
        timeout: Seconds the fetch gets.

    Returns:
        The capabilities; `source` says `models endpoint, DATE` (`stale` when a refetch failed) or keeps `base`'s.
    """
    try:
        client = sdk()
    except Exception:  # no SDK or no key: the turn will say so, discovery never does
        return base
    key = f"anthropic {client.base_url} {model}"
    remembered = f"{cache.path} {key}"
    known = _answers.get(remembered)
    if known is not None:
        return known
    cached = cache.get(key)
    if cached is not None and cache.fresh(cached):
        found = from_model_info(cached.info, base, source=f"models endpoint, {cached.date}")
    else:
        try:
            answer = await client.beta.models.retrieve(model, timeout=timeout)
            info: Mapping[str, Any] | None = answer.model_dump(mode="json")
        except Exception:  # offline, refused, unknown model, too slow: never a turn's failure
            info = None
        if info is not None:
            cached = cache.put(key, info)
            found = from_model_info(info, base, source=f"models endpoint, {cached.date}")
        elif cached is not None:
            source = f"models endpoint, {cached.date} (stale: the endpoint did not answer)"
            found = from_model_info(cached.info, base, source=source)
        else:
            found = base
    _answers[remembered] = found
    return found


async def discover_openai_compatible(
    sdk: Callable[[], openai.AsyncOpenAI],
    model: str,
    base: Capabilities,
    cache: ModelCache,
    timeout: float,
    *,
    probe: bool = False,
) -> Capabilities:
    """`base` with the window an OpenAI-compatible server reports, read once per process and base URL.

    `/v1/models` first (`meta.n_ctx`, `max_model_len`, `context_length`); when it names none, the server's
    own endpoints (`_server_windows.probe_window`: llama.cpp, Ollama, LM Studio) when `probe` says it is one.

    Args:
        sdk: Builds (or returns) the provider's SDK client.
        model: The model id the provider sends.
        base: The capabilities so far.
        cache: Only its path is used: the answer is remembered for the process under it, never written.
        timeout: Seconds the request gets.
        probe: Ask the local servers' own endpoints when `/v1/models` names no window.

    Returns:
        `base` with `context_window` and `source` (`models endpoint (max_model_len)`, `URL/props`) when the
        server reports a window; `base` otherwise.
    """
    try:
        client = sdk()
    except Exception:  # no SDK or no key: the turn will say so, discovery never does
        return base
    key = f"{cache.path} openai {client.base_url} {model}"
    known = _answers.get(key)
    if known is not None:
        return known
    try:
        page = await client.models.list(timeout=timeout)
        entries = [entry.model_dump(mode="json") for entry in page.data]
    except Exception:  # not every compatible server lists its models: never a turn's failure
        entries = []
    window = openai_compatible_window(entries, model)
    if window is not None:
        window = window[0], f"models endpoint ({window[1]})"
    elif probe:  # llama.cpp's /props, Ollama's /api/show, LM Studio's own models endpoint
        probed = await probe_window(client, model, timeout)
        window = None if probed is None else (probed[0], f"{server_root(str(client.base_url))}{probed[1]}")
    found = base
    if window is not None:
        found = dataclasses.replace(base, context_window=window[0], source=window[1])
    _answers[key] = found
    return found
