"""The cache simulators' shared machinery: request and usage types, block flattening, the reusable-token ledger (pure).

The rules are described in `lamina.cachesim`; each provider's simulator has its own module.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Generic, Literal, ParamSpec, Protocol, TypeAlias, TypeVar

import msgspec

from lamina.errors import UsageError
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator

CacheTtl: TypeAlias = Literal["5m", "1h"]
"""The two Anthropic cache lifetimes."""

_ENCODER: Final = msgspec.json.Encoder(order="sorted")
_P = ParamSpec("_P")
_Rules = TypeVar("_Rules")


class CacheSimulationError(UsageError, ValueError):
    """A request the simulator cannot take: an unreadable body, or a request out of time order."""


class CacheBreakpointError(CacheSimulationError):
    """A cache breakpoint (or cache option) the provider would reject with HTTP 400.

    Anthropic's `cache_control`; OpenAI's `prompt_cache_breakpoint` and `prompt_cache_options`.
    """

    def __init__(self, where: str, position: int | None, reason: str) -> None:
        """Name the marker and why the API would reject it.

        Args:
            where: Where the marker is.
            position: Its 1-based block position, when there is one.
            reason: Why it is rejected.
        """
        self.where = where
        """Where the marker is, e.g. `messages[3].content[1]` or `cache_control (top level)`."""
        self.position = position
        """1-based block position in the tools → system → messages prefix, when there is one."""
        self.reason = reason
        at = f"{where} (block {position})" if position is not None else where
        super().__init__(f"{at}: {reason}")


@dataclass(frozen=True, slots=True)
class TimedRequest:
    """One request body and when it was sent."""

    t_start: float
    """When the request was sent, in seconds."""
    body: Mapping[str, object]
    """The request body as sent (a plain dict shaped like the provider SDK's create parameters)."""
    t_first_byte: float | None = None
    """When the response began; its cache writes are readable from then on (None: at `t_start`)."""


class _Writes:
    """The cache writes of each TTL, and their sum: what a request's usage and a run's totals both report."""

    __slots__ = ()
    write_5m: int
    write_1h: int
    write_30m: int
    write_12h: int

    @property
    def write(self) -> int:
        """Tokens written to the cache, every TTL."""
        return self.write_5m + self.write_1h + self.write_30m + self.write_12h


@dataclass(frozen=True, slots=True)
class CacheUsage(_Writes):
    """The input tokens of one request, split the way the provider bills them."""

    total: int
    """All input tokens of the request."""
    read: int
    """Tokens read from the cache."""
    write_5m: int
    """Tokens written to the cache with the 5-minute TTL (all OpenAI writes are free and reported as 0)."""
    write_1h: int
    """Tokens written to the cache with the 1-hour TTL."""
    uncached: int
    """Tokens neither read nor written: billed at the base input price."""
    reusable: int
    """Tokens a perfect placement could have read (see `docs/cache-simulator.md`)."""
    cost_multiplier: float
    """Input cost relative to sending everything uncached (1.0 when nothing was cached)."""
    write_30m: int = 0
    """Tokens written with OpenAI's 30-minute TTL (GPT-5.6 and later; `cache_write_tokens_details.ttl_30m_tokens`)."""
    write_12h: int = 0
    """Tokens written with OpenAI's 12-hour TTL (`ttl_12h_tokens`)."""

    @property
    def weighted_tokens(self) -> float:
        """The input billed in base-price tokens: `cost_multiplier × total`."""
        return self.cost_multiplier * self.total


@dataclass(frozen=True, slots=True)
class CacheSummary(_Writes):
    """Totals over a run of requests."""

    requests: int
    total: int
    read: int
    write_5m: int
    write_1h: int
    uncached: int
    reusable: int
    weighted_tokens: float
    """Sum of the requests' input cost in base-price tokens."""
    cache_efficiency: float
    """read / reusable: the share of reusable tokens billed as cache reads (1.0 when nothing was reusable)."""
    relative_input_cost: float
    """weighted_tokens / total: input cost relative to sending everything uncached (1.0 for no tokens)."""
    write_30m: int = 0
    write_12h: int = 0


class CacheSimulator(Protocol):
    """Anything that takes timed requests one at a time and reports their cache usage."""

    def submit(self, request: TimedRequest) -> CacheUsage:
        """Simulate one request and update the cache state."""
        ...


def simulate(requests: Iterable[TimedRequest], simulator: CacheSimulator) -> list[CacheUsage]:
    """Submit `requests` in order to `simulator`; one `CacheUsage` per request."""
    return [simulator.submit(request) for request in requests]


def summarise(usages: Iterable[CacheUsage]) -> CacheSummary:
    """Fold per-request usage into totals, cache efficiency and relative input cost."""
    items = list(usages)
    total = sum(u.total for u in items)
    read = sum(u.read for u in items)
    reusable = sum(u.reusable for u in items)
    weighted = sum(u.weighted_tokens for u in items)
    return CacheSummary(
        requests=len(items),
        total=total,
        read=read,
        write_5m=sum(u.write_5m for u in items),
        write_1h=sum(u.write_1h for u in items),
        write_30m=sum(u.write_30m for u in items),
        write_12h=sum(u.write_12h for u in items),
        uncached=sum(u.uncached for u in items),
        reusable=reusable,
        weighted_tokens=weighted,
        cache_efficiency=read / reusable if reusable else 1.0,
        relative_input_cost=weighted / total if total else 1.0,
    )


# --- shared machinery ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Block:
    where: str
    """Path inside its group: `tools[3]`, `system[0]`, `.content[2]` (a message group adds `messages[i]`)."""
    level: int
    kind: str
    digest: bytes
    """Identity of (role, canonical content)."""
    tokens: int
    ttl: CacheTtl | None = None
    eligible: bool = True
    """May carry a breakpoint (not a thinking block, not an empty text block)."""
    image: bool = False
    run: bool = False
    """A tool_use or tool_result message block: consecutive ones of one kind share a lookback position."""


@dataclass(frozen=True, slots=True)
class _Group:
    """The blocks of one message or section, memoised by its canonical bytes."""

    blocks: tuple[_Block, ...]
    image: bool = False


@dataclass(slots=True)
class _Flat:
    """A request body flattened into blocks, remembering which group (message, section) each came from."""

    blocks: list[_Block] = field(default_factory=list)
    groups: list[tuple[int, str]] = field(default_factory=list)
    image: bool = False

    def add(self, prefix: str, group: _Group) -> None:
        self.groups.append((len(self.blocks), prefix))
        self.blocks.extend(group.blocks)
        self.image = self.image or group.image

    def where(self, i: int) -> str:
        prefix = next(p for start, p in reversed(self.groups) if start <= i)
        return prefix + self.blocks[i].where


def _chain(prev: bytes, item: bytes) -> bytes:
    return hashlib.blake2b(prev + item, digest_size=16).digest()


def _canonical(value: object, where: str) -> bytes:
    try:
        return _ENCODER.encode(value)
    except (TypeError, msgspec.EncodeError) as exc:
        raise CacheSimulationError(f"{where}: not JSON-serialisable: {exc}") from exc


class _Core:
    """What both simulators share: memoised block measuring, time order and the reusable-token ledger."""

    def __init__(self, estimator: TokenEstimator) -> None:
        self._estimator = estimator
        self._measured: dict[bytes, tuple[bytes, int]] = {}
        self._groups: dict[bytes, _Group] = {}
        self._steps: dict[bytes, bytes] = {}
        self._seen_until: dict[bytes, float] = {}
        self._seen_prune_at = 1024
        self._last_start = float("-inf")

    def group(
        self, tag: bytes, value: object, where: str, build: Callable[_P, _Group], *args: _P.args, **kwargs: _P.kwargs
    ) -> _Group:
        """`build(*args, **kwargs)`, memoised by the canonical bytes of `value` (markers included)."""
        key = tag + b"\x00" + _canonical(value, where)
        group = self._groups.get(key)
        if group is None:
            group = build(*args, **kwargs)
            self._groups[key] = group
        return group

    def step(self, prev: bytes, digest: bytes) -> bytes:
        """The rolling prefix hash after one more block, memoised (conversations repeat their prefix)."""
        key = prev + digest
        h = self._steps.get(key)
        if h is None:
            h = self._steps[key] = hashlib.blake2b(key, digest_size=16).digest()
        return h

    def measure(self, role: str, content: object, where: str) -> tuple[bytes, int]:
        """(identity digest, token count) of one block's content, memoised by canonical bytes."""
        canonical = _canonical(content, where)
        key = role.encode() + b"\x00" + canonical
        measured = self._measured.get(key)
        if measured is None:
            measured = (hashlib.blake2b(key, digest_size=16).digest(), self._estimator.count(canonical.decode()))
            self._measured[key] = measured
        return measured

    def start(self, request: TimedRequest) -> tuple[float, float]:
        """Check time order; return (t_start, time from which this request's writes are readable)."""
        t = request.t_start
        if t < self._last_start:
            raise CacheSimulationError(
                f"requests must arrive in time order: t_start={t} after t_start={self._last_start}"
            )
        first_byte = t if request.t_first_byte is None else request.t_first_byte
        if first_byte < t:
            raise CacheSimulationError(f"t_first_byte={first_byte} is before t_start={t}")
        self._last_start = t
        return t, first_byte

    def reusable(self, blocks: list[_Block], t: float, window: float | Sequence[float]) -> int:
        """Tokens of `blocks` seen in an earlier request still inside that block's window; then record these.

        Args:
            blocks: This request's blocks.
            t: This request's start.
            window: In seconds, one duration for every block, or one per block.

        Returns:
            The reusable tokens, each block counted at most once.
        """
        seen, never = self._seen_until, float("-inf")
        windows = [window] * len(blocks) if isinstance(window, float | int) else window
        # Look everything up before recording, so a block repeated inside this request is not "earlier".
        lasts = [seen.get(b.digest, never) for b in blocks]
        reusable = 0
        for b, last, w in zip(blocks, lasts, windows, strict=True):
            if last > t:
                reusable += b.tokens
            until = t + w
            if seen.get(b.digest, never) < until:  # a block repeated in this request keeps its longest window
                seen[b.digest] = until
        if len(seen) > self._seen_prune_at:
            self._seen_until = {k: v for k, v in seen.items() if v > t}
            self._seen_prune_at = 2 * len(self._seen_until) + 1024
        return reusable


def _usage(
    *, total: int, read: int, write_5m: int, write_1h: int, reusable: int, r: float, w5: float, w1: float
) -> CacheUsage:
    uncached = total - read - write_5m - write_1h
    weighted = uncached + w5 * write_5m + w1 * write_1h + r * read
    return CacheUsage(
        total=total,
        read=read,
        write_5m=write_5m,
        write_1h=write_1h,
        uncached=uncached,
        reusable=reusable,
        cost_multiplier=weighted / total if total else 1.0,
    )


class _Simulation(Generic[_Rules]):
    """What every simulator is made of: the provider's published numbers, the core, and its cache, empty at first."""

    def __init__(self, *, rules: _Rules | None = None, estimator: TokenEstimator = DEFAULT_ESTIMATOR) -> None:
        """One cache namespace (an Anthropic workspace, an OpenAI organisation), empty.

        Args:
            rules: The published numbers; the current ones unless given.
            estimator: Counts each block's tokens.
        """
        self.rules: _Rules = rules if rules is not None else self._current_rules()
        self._core = _Core(estimator)
        self._clear()

    def _current_rules(self) -> _Rules:
        """The provider's numbers as published today."""
        raise NotImplementedError

    def _clear(self) -> None:
        """Empty the cache."""
        raise NotImplementedError
