"""OpenAI prompt caching of GPT-5.6 and later: explicit and implicit breakpoints, two TTLs, billed writes (pure).

The rules as modelled are in `docs/cache-simulator.md` ("OpenAI, GPT-5.6 and later").
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Final, Literal, TypeAlias

from lamina.cachesim._cache_blocks import openai_sections
from lamina.cachesim._simulator import (
    CacheBreakpointError,
    CacheSimulationError,
    CacheUsage,
    TimedRequest,
    _Block,
    _canonical,
    _chain,
    _Simulation,
)

BreakpointTtl: TypeAlias = Literal["30m", "12h"]
"""The lifetimes of `prompt_cache_options.ttl` and `prompt_cache_breakpoint.ttl` (a minimum, not a maximum)."""

_MARKER: Final = "prompt_cache_breakpoint"
_RESPONSES_PARTS: Final = frozenset({"input_text", "input_image", "input_file"})
_CHAT_PARTS: Final = frozenset({"text", "image_url", "input_audio", "file", "refusal"})
_TTLS: Final = ("30m", "12h")


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenAIBreakpointRules:
    """The numbers of OpenAI's breakpoint regime (GPT-5.6 and later); per-model values, so parameters."""

    min_tokens: int = 1024
    """The rendered prefix before a breakpoint must be at least this long for a write."""
    max_writes: int = 4
    """New cache writes per request; in implicit mode the implicit breakpoint takes one of them."""
    read_breakpoints: int = 80
    """Reads consider this many of the conversation's latest breakpoints (the SDK 3.63 text; the older guide said
    50), with no content-block lookback limit, and take the longest match."""
    ttl_30m_seconds: float = 1800.0
    ttl_12h_seconds: float = 43_200.0
    write_30m_multiplier: float = 1.25
    """"Cache writes cost 1.25x the uncached input token rate"."""
    write_12h_multiplier: float = 2.0
    """Not published. Assumed 2x, the premium Anthropic charges for its long (1-hour) TTL, so that the
    cost model picks the 12-hour TTL only when the session's pace pays for it; were it 1.25x like the
    30-minute one, the long TTL would always win and this is the figure to change."""
    read_multiplier: float = 0.1

    def __post_init__(self) -> None:
        if self.min_tokens < 0 or self.max_writes < 1 or self.read_breakpoints < 1:
            raise ValueError(f"invalid OpenAIBreakpointRules: {self!r}")
        if self.ttl_30m_seconds <= 0 or self.ttl_12h_seconds <= 0:
            raise ValueError(f"cache TTLs must be positive: {self!r}")

    def seconds(self, ttl: BreakpointTtl) -> float:
        """How long an entry written with `ttl` lives (at least)."""
        return self.ttl_12h_seconds if ttl == "12h" else self.ttl_30m_seconds

    def write_multiplier(self, ttl: BreakpointTtl) -> float:
        """The price of writing a token with `ttl`, in base-price input tokens."""
        return self.write_12h_multiplier if ttl == "12h" else self.write_30m_multiplier


@dataclass(slots=True)
class _BreakpointEntry:
    ttl_seconds: float
    expires: float
    available_at: float


@dataclass(frozen=True, slots=True)
class _RequestCacheOptions:
    """A request's `prompt_cache_options`, checked."""

    implicit: bool
    ttl: BreakpointTtl


def cache_options(body: Mapping[str, object]) -> _RequestCacheOptions:
    """The request's cache options, checked as the API checks them.

    Raises:
        CacheBreakpointError: An option the API refuses (a 12-hour TTL on Chat Completions, `prewarm`
            there, an unknown mode or TTL, `prompt_cache_retention` other than `24h`).
    """
    chat = "messages" in body
    raw = body.get("prompt_cache_options")
    options = raw if isinstance(raw, Mapping) else {}
    if raw is not None and not isinstance(raw, Mapping):
        raise CacheBreakpointError("prompt_cache_options", None, f"expected an object, got {type(raw).__name__}")
    mode = options.get("mode", "implicit")
    if mode not in ("implicit", "explicit"):
        raise CacheBreakpointError("prompt_cache_options.mode", None, f"unknown mode {mode!r}")
    ttl = options.get("ttl", "30m")
    allowed = ("30m",) if chat else _TTLS
    if ttl not in allowed:
        raise CacheBreakpointError("prompt_cache_options.ttl", None, f"unsupported ttl {ttl!r}; allowed: {allowed}")
    if "prewarm" in options and (chat or not isinstance(options["prewarm"], bool)):
        raise CacheBreakpointError("prompt_cache_options.prewarm", None, "prewarm is a Responses boolean")
    retention = body.get("prompt_cache_retention")
    if retention is not None and retention != "24h":
        raise CacheBreakpointError("prompt_cache_retention", None, f"{retention!r}: this model supports only '24h'")
    return _RequestCacheOptions(implicit=mode == "implicit", ttl="12h" if ttl == "12h" else "30m")


def _marker_ttl(part: object, where: str, chat: bool, default: BreakpointTtl) -> BreakpointTtl | None:
    """The TTL of the breakpoint `part` carries (None: none), its own or the request's."""
    if not isinstance(part, Mapping) or _MARKER not in part:
        return None
    marker, kind = part[_MARKER], part.get("type")
    if kind not in (_CHAT_PARTS if chat else _RESPONSES_PARTS):
        raise CacheBreakpointError(where, None, f"a {kind!r} part cannot carry prompt_cache_breakpoint")
    if not isinstance(marker, Mapping) or marker.get("mode") != "explicit":
        raise CacheBreakpointError(where, None, f"prompt_cache_breakpoint must be {{'mode': 'explicit'}}: {marker!r}")
    ttl = marker.get("ttl", default)
    if ttl not in _TTLS:
        raise CacheBreakpointError(where, None, f"unknown prompt_cache_breakpoint ttl {ttl!r}; allowed: {_TTLS}")
    return "12h" if ttl == "12h" else "30m"


def _unmarked(part: object) -> object:
    if isinstance(part, Mapping) and _MARKER in part:
        return {k: v for k, v in part.items() if k != _MARKER}
    return part


_Marked: TypeAlias = tuple[tuple[_Block, ...], tuple[BreakpointTtl | None, ...]]


class OpenAIBreakpointSimulator(_Simulation[OpenAIBreakpointRules]):
    """OpenAI prompt caching of GPT-5.6 and later: breakpoints, the latest 80 read, up to 4 writes, 30m/12h TTLs."""

    def _current_rules(self) -> OpenAIBreakpointRules:
        return OpenAIBreakpointRules()

    def _clear(self) -> None:
        self._groups: dict[bytes, _Marked] = {}
        self._partitions: dict[tuple[str, str | None], OrderedDict[bytes, _BreakpointEntry]] = {}

    def submit(self, request: TimedRequest) -> CacheUsage:
        """Simulate one Chat Completions or Responses request: reads, writes, refreshes; returns its billed usage."""
        rules, body = self.rules, request.body
        t, available_at = self._core.start(request)
        key = body.get("prompt_cache_key")
        if key is not None and not isinstance(key, str):
            raise CacheSimulationError(f"prompt_cache_key: expected a string, got {type(key).__name__}")
        options = cache_options(body)
        blocks, marks = self._flatten(body, options.ttl)
        step, h = self._core.step, _chain(b"openai-breakpoints", b"")
        chain: list[bytes] = []
        cum: list[int] = []
        for b in blocks:
            h = step(h, b.digest)
            chain.append(h)
            cum.append((cum[-1] if cum else 0) + b.tokens)
        total = cum[-1] if cum else 0
        points = {i: ttl for i, ttl in enumerate(marks) if ttl is not None}
        explicit = sorted(points)[-(rules.max_writes - options.implicit) :] if points else []
        written = {i: points[i] for i in explicit}
        if options.implicit and blocks:
            written.setdefault(len(blocks) - 1, options.ttl)  # the implicit breakpoint: the end of the latest message
        store = self._partitions.setdefault((str(body.get("model", "")), key), OrderedDict())
        read = self._read(store, chain, cum, t) if written or points else 0
        upto = upto_12h = read
        for i in sorted(written):
            if cum[i] <= read or cum[i] < rules.min_tokens:
                continue
            self._write(store, chain[i], rules.seconds(written[i]), t, available_at)
            upto = cum[i]
            if written[i] == "12h":
                upto_12h = cum[i]
        w12, w30 = upto_12h - read, upto - upto_12h
        uncached = total - read - w12 - w30
        weighted = uncached + rules.write_30m_multiplier * w30 + rules.write_12h_multiplier * w12
        weighted += rules.read_multiplier * read
        return CacheUsage(
            total=total,
            read=read,
            write_5m=0,
            write_1h=0,
            write_30m=w30,
            write_12h=w12,
            uncached=uncached,
            reusable=self._core.reusable(blocks, t, rules.seconds(options.ttl)),
            cost_multiplier=weighted / total if total else 1.0,
        )

    def _read(self, store: OrderedDict[bytes, _BreakpointEntry], chain: list[bytes], cum: list[int], t: float) -> int:
        """The longest prefix held by a live entry among the partition's latest breakpoints; refreshes it."""
        latest = set(islice(reversed(store), self.rules.read_breakpoints))
        for k in range(len(chain) - 1, -1, -1):
            entry = store.get(chain[k]) if chain[k] in latest else None
            if entry is not None and entry.available_at <= t < entry.expires:
                entry.expires = max(entry.expires, t + entry.ttl_seconds)
                store.move_to_end(chain[k])
                return cum[k]
        return 0

    def _write(
        self, store: OrderedDict[bytes, _BreakpointEntry], h: bytes, seconds: float, t: float, at: float
    ) -> None:
        old = store.get(h)
        if old is not None and t < old.expires:  # written by a parallel request, not yet readable
            old.ttl_seconds = max(old.ttl_seconds, seconds)
            old.expires = max(old.expires, t + seconds)
            old.available_at = min(old.available_at, at)
        else:
            store[h] = _BreakpointEntry(seconds, t + seconds, at)
        store.move_to_end(h)
        if len(store) > 4 * self.rules.read_breakpoints:  # older entries can never be read again
            for stale in list(islice(store, len(store) - self.rules.read_breakpoints)):
                del store[stale]

    def _flatten(
        self, body: Mapping[str, object], ttl: BreakpointTtl
    ) -> tuple[list[_Block], list[BreakpointTtl | None]]:
        """Blocks in prompt order (tools, output schema, the conversation) and the breakpoint each carries."""
        blocks: list[_Block] = []
        marks: list[BreakpointTtl | None] = []
        chat = "messages" in body

        def add(tag: bytes, value: object, where: str, items: list[tuple[str, str, object]]) -> None:
            group = self._group(tag, value, where, items, chat, ttl)
            blocks.extend(group[0])
            marks.extend(group[1])

        for tag, value, where, items in openai_sections(body):
            add(tag, value, where, [(where + w, r, p) for w, r, p in items])
        return blocks, marks

    def _group(
        self,
        tag: bytes,
        value: object,
        where: str,
        items: list[tuple[str, str, object]],
        chat: bool,
        ttl: BreakpointTtl,
    ) -> _Marked:
        """One message's (or section's) blocks and breakpoints, memoised by its canonical bytes and the request TTL."""
        memo = tag + ttl.encode() + (b"c" if chat else b"r") + b"\x00" + _canonical(value, where)
        group = self._groups.get(memo)
        if group is None:
            built = [
                (self._core.measure(role, _unmarked(p), at), _marker_ttl(p, at, chat, ttl)) for at, role, p in items
            ]
            blocks = tuple(_Block(at, 2, "", d, n) for (at, _, _), ((d, n), _) in zip(items, built, strict=True))
            group = self._groups[memo] = (blocks, tuple(m for _, m in built))
        return group
