"""Prompt-cache simulator: what each request reads, writes and pays under a provider's published cache rules (pure).

Feed timed request bodies one at a time to `AnthropicCacheSimulator` or `OpenAICacheSimulator`
(or a whole list to `simulate`); each `submit` returns a `CacheUsage`, and `summarise` folds a run
into a `CacheSummary`. This is how placement quality becomes a number. Nothing here reads a clock:
every time is a field of `TimedRequest` (seconds, any origin), and requests must arrive in
non-decreasing `t_start` order. One simulator instance is one cache namespace (an Anthropic
workspace, an OpenAI organisation).

Blocks. A body is flattened into content blocks: tool definitions, then system blocks, then the
content blocks of each message (a string `content` is one text block). A block's identity is its
role plus its canonical JSON (sorted keys, without `cache_control`, so moving a breakpoint never
changes identity); its token count is the estimator's count of that canonical text. Messages,
blocks and prefix hashes are memoised by canonical bytes per simulator instance, so a long session
costs little more than encoding each request once (memory grows with the distinct content seen).

Anthropic Messages rules (`AnthropicCacheRules` holds the numbers):

- The prefix is hashed block by block in the order tools → system → messages, so a changed tool
  invalidates everything after it. Level salts stand in for settings outside the blocks: `speed`
  is mixed in before the system blocks; `tool_choice`, `thinking`, `output_config.effort` and
  "an image is present" before the messages.
- Breakpoints are the blocks carrying `cache_control`, plus the last cacheable block when the
  body has a top-level `cache_control` (automatic caching). At most 4; 1h breakpoints must come
  before 5m ones; `ttl` is "5m" (default) or "1h"; thinking blocks and empty text blocks cannot
  carry one. Anything else raises `CacheBreakpointError`, where the API would answer HTTP 400.
  Only block-level markers count: a marker nested inside a tool_result's content is ignored (and
  stripped from identity).
- Reads: from each breakpoint the simulator walks back at most `lookback` (20) positions,
  counting the breakpoint itself, and stops at the first live entry. One position is one block,
  except that a run of consecutive `tool_use` blocks, or of `tool_result` blocks, is one position
  (the current rule; `group_tool_runs=False` gives the older one, one block per position).
  `A` is the longest prefix found; every entry found is refreshed for its own TTL.
- Writes happen only at breakpoints past `A` whose cumulative prefix reaches `min_tokens`. An entry
  lives from the writing request's `t_start` for its TTL and can be read only from the writer's
  `t_first_byte` on (parallel requests do not see each other's writes).
- Billing (the mixed-TTL rule): with `B` the last 1h breakpoint written (else `A`) and `C` the last
  breakpoint written (else `A`): read = A, write_1h = B − A, write_5m = C − B, uncached = total − C.

OpenAI rules (before GPT-5.6; `OpenAICacheRules`): Chat Completions bodies (`messages`) and
Responses bodies (`instructions` + `input`), with `tools` and the output schema first. Caching is
automatic: every prompt of at least `min_tokens` (1024) tokens is stored, partitioned by
(`model`, `prompt_cache_key`), for free. A later prompt's cached tokens are its longest common
prefix L with a live stored prompt, rounded down to 1024 + 128·k (0 when L < 1024). The common
prefix is taken at block granularity: a block that differs contributes nothing. Entries expire
after `idle_ttl_seconds` without use and at most `max_ttl_seconds` after creation, and are readable
from the storing request's first byte. Deterministic: no routing overflow, no random early
eviction. Reads cost `read_multiplier` (0.1 for the gpt-5 family; set 0.5 for gpt-4o, 0.25 for
gpt-4.1); writes are free and reported as 0.

Reusable tokens. `CacheUsage.reusable` measures what a perfect placement could have read, so that
a placement putting per-turn content before the history scores low: it is the sum of tokens of
this request's blocks whose (role, canonical content) occurred in some earlier request j that is
still inside that block's window in j, each block of this request counted at most once. The
window is per block: for Anthropic it runs from j's `t_start` for the longest TTL among the
entries j wrote or read at or after that block (an entry covers every block before it), and for
300 s (one 5-minute entry a perfect placement would write) when there is none; for OpenAI it is
the idle TTL. So a 1-hour entry on the system prompt keeps the system blocks reusable for an hour
but not the 5-minute history after it. `cache_efficiency` = read / reusable.

Not modelled: per-model thinking-block stripping, server tools' automatic writes, batch discounts,
routing overflow, OpenAI's GPT-5.6 explicit-breakpoint regime, Gemini and DeepSeek.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, Literal, ParamSpec, Protocol, TypeAlias

import msgspec

from lamina.errors import UsageError
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator

CacheTtl: TypeAlias = Literal["5m", "1h"]
"""The two Anthropic cache lifetimes."""

_TOOLS: Final = 0
_SYSTEM: Final = 1
_MESSAGES: Final = 2
_RUN_KINDS: Final = frozenset({"tool_use", "tool_result"})
_UNCACHEABLE_KINDS: Final = frozenset({"thinking", "redacted_thinking"})
_ENCODER: Final = msgspec.json.Encoder(order="sorted")
_P = ParamSpec("_P")


class CacheSimulationError(UsageError, ValueError):
    """A request the simulator cannot take: an unreadable body, or a request out of time order."""


class CacheBreakpointError(CacheSimulationError):
    """A `cache_control` marker that the Anthropic API would reject with HTTP 400."""

    def __init__(self, where: str, position: int | None, reason: str) -> None:
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


@dataclass(frozen=True, slots=True)
class CacheUsage:
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
    """Tokens a perfect placement could have read (see the module docstring)."""
    cost_multiplier: float
    """Input cost relative to sending everything uncached (1.0 when nothing was cached)."""

    @property
    def write(self) -> int:
        """Tokens written to the cache, both TTLs."""
        return self.write_5m + self.write_1h

    @property
    def weighted_tokens(self) -> float:
        """The input billed in base-price tokens: `cost_multiplier × total`."""
        return self.cost_multiplier * self.total


@dataclass(frozen=True, slots=True)
class CacheSummary:
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

    @property
    def write(self) -> int:
        """Tokens written to the cache, both TTLs."""
        return self.write_5m + self.write_1h


@dataclass(frozen=True, slots=True, kw_only=True)
class AnthropicCacheRules:
    """The numbers of Anthropic's prompt-cache rules; per-model values change, so they are parameters."""

    min_tokens: int = 1024
    """Minimum cumulative prefix at a breakpoint for a write (512 to 4096 depending on the model)."""
    max_breakpoints: int = 4
    lookback: int = 20
    """Positions checked per breakpoint, the breakpoint itself included."""
    group_tool_runs: bool = True
    """A run of consecutive tool_use (or tool_result) blocks is one lookback position (2026 rule)."""
    level_salts: bool = True
    """Mix tool_choice, thinking, effort, images and speed into the prefix hash at their level."""
    ttl_5m_seconds: float = 300.0
    ttl_1h_seconds: float = 3600.0
    write_5m_multiplier: float = 1.25
    write_1h_multiplier: float = 2.0
    read_multiplier: float = 0.1
    """0.1 for most models; 0.025 for Fable/Mythos 5.1."""

    def __post_init__(self) -> None:
        if self.min_tokens < 0 or self.max_breakpoints < 0 or self.lookback < 1:
            raise ValueError(f"invalid AnthropicCacheRules: {self!r}")
        if self.ttl_5m_seconds <= 0 or self.ttl_1h_seconds <= 0:
            raise ValueError(f"cache TTLs must be positive: {self!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenAICacheRules:
    """The numbers of OpenAI's automatic prompt caching (models before GPT-5.6)."""

    min_tokens: int = 1024
    increment: int = 128
    """Hits grow in steps of this many tokens past `min_tokens`."""
    read_multiplier: float = 0.1
    """0.1 for the gpt-5 family; gpt-4.1 is 0.25 and gpt-4o 0.5."""
    idle_ttl_seconds: float = 300.0
    """How long a stored prefix survives without use (the docs say 5 to 10 minutes)."""
    max_ttl_seconds: float = 3600.0
    """Hard cap on a stored prefix's life (1 h in memory; 24 h with `prompt_cache_retention="24h"`)."""

    def __post_init__(self) -> None:
        if self.min_tokens < 0 or self.increment < 1:
            raise ValueError(f"invalid OpenAICacheRules: {self!r}")
        if self.idle_ttl_seconds <= 0 or self.max_ttl_seconds <= 0:
            raise ValueError(f"cache TTLs must be positive: {self!r}")


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


def _without_marker(block: Mapping[str, object]) -> Mapping[str, object]:
    """The block minus `cache_control` (also inside a tool_result's content), so markers never change identity."""
    if "cache_control" in block:
        block = {k: v for k, v in block.items() if k != "cache_control"}
    inner = block.get("content")
    if (
        block.get("type") == "tool_result"
        and isinstance(inner, list)
        and any(isinstance(c, Mapping) and "cache_control" in c for c in inner)
    ):
        inner = [{k: v for k, v in c.items() if k != "cache_control"} if isinstance(c, Mapping) else c for c in inner]
        block = {**block, "content": inner}
    return block


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

        `window` is one duration for every block, or one per block.
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
            if last < until:
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


def _list(value: object, where: str) -> list[object]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise CacheSimulationError(f"{where}: expected a list, got {type(value).__name__}")
    return list(value)


def _mapping(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise CacheSimulationError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _text_block(text: str) -> dict[str, object]:
    # A string content renders as one text block, so both spellings share an identity.
    return {"type": "text", "text": text}


# --- Anthropic ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Entry:
    ttl_seconds: float
    expires: float
    available_at: float


def _marker_ttl(marker: object, where: str, position: int | None) -> CacheTtl:
    if not isinstance(marker, Mapping) or marker.get("type") != "ephemeral":
        raise CacheBreakpointError(
            where, position, f"cache_control must be {{'type': 'ephemeral', ...}}, got {marker!r}"
        )
    ttl = marker.get("ttl")
    if ttl is None or ttl == "5m":
        return "5m"
    if ttl == "1h":
        return "1h"
    raise CacheBreakpointError(where, position, f"unknown cache_control ttl {ttl!r}; allowed: '5m', '1h'")


def _block_windows(covering: Sequence[float], floor: float) -> list[float]:
    """Per block, how long an entry covering it can live: the longest TTL at or after it, at least `floor`.

    An entry at block k covers blocks 0..k, so a block's window is the longest TTL written or read
    at any later (or the same) block; a block after the last breakpoint keeps the 5-minute floor,
    which a perfect placement would get by marking it.
    """
    windows = [floor] * len(covering)
    longest = floor
    for i in range(len(covering) - 1, -1, -1):
        longest = max(longest, covering[i])
        windows[i] = longest
    return windows


class AnthropicCacheSimulator:
    """Anthropic Messages prompt caching: explicit and automatic breakpoints, 20-position lookback, two TTLs."""

    def __init__(
        self, *, rules: AnthropicCacheRules | None = None, estimator: TokenEstimator = DEFAULT_ESTIMATOR
    ) -> None:
        self.rules = rules if rules is not None else AnthropicCacheRules()
        self._core = _Core(estimator)
        self._entries: dict[bytes, _Entry] = {}
        self._prune_at = 256

    def submit(self, request: TimedRequest) -> CacheUsage:
        """Simulate one Messages request: reads, writes, refreshes; returns its billed usage."""
        rules = self.rules
        t, available_at = self._core.start(request)
        flat = self._flatten(request.body)
        marks = self._breakpoints(flat, request.body)
        chain, cum, pos = self._prefix(flat, request.body)
        total = cum[-1] if cum else 0
        entries = self._entries

        read = 0
        # covering[i]: the longest TTL among the entries this request writes or reads at block i
        covering = [0.0] * len(chain)
        for b, ttl in marks:
            covering[b] = max(covering[b], self._seconds(ttl))
        for b, _ in reversed(marks):
            k = b
            while k >= 0 and pos[b] - pos[k] < rules.lookback:
                entry = entries.get(chain[k])
                if entry is not None and entry.available_at <= t < entry.expires:
                    # a hit refreshes the entry for its own TTL, whatever the TTL of the breakpoint that found it
                    entries[chain[k]] = replace(entry, expires=max(entry.expires, t + entry.ttl_seconds))
                    read = max(read, cum[k])
                    covering[k] = max(covering[k], entry.ttl_seconds)
                    break
                k -= 1

        upto_1h = upto = read
        for b, ttl in marks:
            if cum[b] <= read or cum[b] < rules.min_tokens:
                continue
            seconds = self._seconds(ttl)
            new = _Entry(seconds, t + seconds, available_at)
            old = entries.get(chain[b])
            if old is not None and t < old.expires:  # written by a parallel request, not yet readable
                new = _Entry(
                    max(old.ttl_seconds, seconds), max(old.expires, new.expires), min(old.available_at, available_at)
                )
            entries[chain[b]] = new
            upto = cum[b]
            if ttl == "1h":
                upto_1h = cum[b]
        if len(entries) > self._prune_at:
            self._entries = {k: e for k, e in entries.items() if e.expires > t}
            self._prune_at = 2 * len(self._entries) + 256

        return _usage(
            total=total,
            read=read,
            write_5m=upto - upto_1h,
            write_1h=upto_1h - read,
            reusable=self._core.reusable(flat.blocks, t, _block_windows(covering, rules.ttl_5m_seconds)),
            r=rules.read_multiplier,
            w5=rules.write_5m_multiplier,
            w1=rules.write_1h_multiplier,
        )

    def _seconds(self, ttl: CacheTtl) -> float:
        return self.rules.ttl_1h_seconds if ttl == "1h" else self.rules.ttl_5m_seconds

    def _flatten(self, body: Mapping[str, object]) -> _Flat:
        core, flat, build = self._core, _Flat(), self._build
        tools = body.get("tools")
        if tools is not None:
            listed = _list(tools, "tools")
            flat.add("", core.group(b"tools", listed, "tools", build, _tool_items(listed), "", len(flat.blocks)))
        system = body.get("system")
        if system is not None:
            flat.add("", core.group(b"system", system, "system", build, _system_items(system), "", len(flat.blocks)))
        if "messages" not in body:
            raise CacheSimulationError("body has no 'messages': not an Anthropic Messages request")
        for m, message in enumerate(_list(body.get("messages"), "messages")):
            prefix = f"messages[{m}]"
            items = _message_items(message, prefix)
            flat.add(prefix, core.group(b"message", message, prefix, build, items, prefix, len(flat.blocks)))
        return flat

    def _build(self, items: Iterable[tuple[str, int, str, Mapping[str, object]]], prefix: str, base: int) -> _Group:
        """Measure and check the blocks of one group; `base` is the group's first block index (for errors)."""
        blocks: list[_Block] = []
        for where, level, role, raw in items:
            position = base + len(blocks) + 1
            digest, tokens = self._core.measure(role, _without_marker(raw), prefix + where)
            kind = raw.get("type")
            kind = kind if isinstance(kind, str) else ""
            eligible = kind not in _UNCACHEABLE_KINDS and not (kind == "text" and not raw.get("text"))
            ttl: CacheTtl | None = None
            marker = raw.get("cache_control")
            if marker is not None:
                ttl = _marker_ttl(marker, prefix + where, position)
                if not eligible:
                    raise CacheBreakpointError(
                        prefix + where, position, f"a {kind or 'empty'} block cannot carry cache_control"
                    )
            image = kind == "image" or (kind == "tool_result" and _has_image(raw.get("content")))
            run = level == _MESSAGES and kind in _RUN_KINDS
            blocks.append(_Block(where, level, kind, digest, tokens, ttl, eligible, image, run))
        return _Group(tuple(blocks), any(b.image for b in blocks))

    def _breakpoints(self, flat: _Flat, body: Mapping[str, object]) -> list[tuple[int, CacheTtl]]:
        rules, blocks = self.rules, flat.blocks
        marks = [(i, b.ttl) for i, b in enumerate(blocks) if b.ttl is not None]
        auto = body.get("cache_control")
        if auto is not None:
            where = "cache_control (top level)"
            ttl = _marker_ttl(auto, where, None)
            if len(marks) >= rules.max_breakpoints:
                raise CacheBreakpointError(
                    where, None, f"automatic caching needs a free breakpoint but {len(marks)} explicit ones exist"
                )
            target = next((i for i in range(len(blocks) - 1, -1, -1) if blocks[i].eligible), None)
            if target is not None:
                existing = blocks[target].ttl
                if existing is None:
                    marks = sorted([*marks, (target, ttl)])
                elif existing != ttl:
                    raise CacheBreakpointError(
                        flat.where(target),
                        target + 1,
                        f"automatic caching asks for ttl {ttl!r} but this last cacheable block has ttl {existing!r}",
                    )
        if len(marks) > rules.max_breakpoints:
            i = marks[rules.max_breakpoints][0]
            raise CacheBreakpointError(
                flat.where(i), i + 1, f"{len(marks)} cache breakpoints; the API allows at most {rules.max_breakpoints}"
            )
        first_5m: int | None = None
        for i, ttl in marks:
            if ttl == "5m" and first_5m is None:
                first_5m = i
            elif ttl == "1h" and first_5m is not None:
                raise CacheBreakpointError(
                    flat.where(i),
                    i + 1,
                    f"a 1h breakpoint after the 5m breakpoint at {flat.where(first_5m)} (block {first_5m + 1}); "
                    "1h breakpoints must come before 5m ones",
                )
        return marks

    def _prefix(self, flat: _Flat, body: Mapping[str, object]) -> tuple[list[bytes], list[int], list[int]]:
        """Rolling hash, cumulative tokens and lookback position of every block."""
        salts: dict[int, bytes] = {}
        if self.rules.level_salts:
            output_config = body.get("output_config")
            effort = output_config.get("effort") if isinstance(output_config, Mapping) else None
            salt = {
                "effort": effort,
                "images": flat.image,
                "thinking": body.get("thinking"),
                "tool_choice": body.get("tool_choice"),
            }
            salts[_SYSTEM] = _canonical({"speed": body.get("speed")}, "speed")
            salts[_MESSAGES] = _canonical(salt, "tool_choice/thinking/output_config")
        group_runs, step = self.rules.group_tool_runs, self._core.step
        h = _chain(b"anthropic", str(body.get("model", "")).encode())
        level, total, p, prev_kind = _TOOLS, 0, 0, ""
        chain: list[bytes] = []
        cum: list[int] = []
        pos: list[int] = []
        for b in flat.blocks:
            while level < b.level:
                level += 1
                h = _chain(h, salts.get(level, b""))
            h = step(h, b.digest)
            total += b.tokens
            if not (group_runs and b.run and b.kind == prev_kind):
                p += 1
            prev_kind = b.kind if b.run else ""
            chain.append(h)
            cum.append(total)
            pos.append(p)
        return chain, cum, pos


def _has_image(content: object) -> bool:
    return isinstance(content, list) and any(isinstance(c, Mapping) and c.get("type") == "image" for c in content)


def _tool_items(tools: list[object]) -> Iterator[tuple[str, int, str, Mapping[str, object]]]:
    for i, tool in enumerate(tools):
        yield f"tools[{i}]", _TOOLS, "tools", _mapping(tool, f"tools[{i}]")


def _system_items(system: object) -> Iterator[tuple[str, int, str, Mapping[str, object]]]:
    if isinstance(system, str):
        if system:
            yield "system", _SYSTEM, "system", _text_block(system)
        return
    for i, block in enumerate(_list(system, "system")):
        yield f"system[{i}]", _SYSTEM, "system", _mapping(block, f"system[{i}]")


def _message_items(raw: object, prefix: str) -> Iterator[tuple[str, int, str, Mapping[str, object]]]:
    message = _mapping(raw, prefix)
    role = str(message.get("role", ""))
    content = message.get("content")
    if isinstance(content, str):
        yield ".content", _MESSAGES, role, _text_block(content)
        return
    for c, block in enumerate(_list(content, f"{prefix}.content")):
        yield f".content[{c}]", _MESSAGES, role, _mapping(block, f"{prefix}.content[{c}]")


# --- OpenAI -------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Stored:
    """One stored prompt prefix; mutable because every request that reaches it refreshes it."""

    dies: float
    """Creation time plus the hard cap."""
    expires: float
    """min(last use + idle TTL, dies)."""
    available_at: float


class OpenAICacheSimulator:
    """OpenAI automatic prompt caching (before GPT-5.6): stored prefixes per (model, prompt_cache_key)."""

    def __init__(self, *, rules: OpenAICacheRules | None = None, estimator: TokenEstimator = DEFAULT_ESTIMATOR) -> None:
        self.rules = rules if rules is not None else OpenAICacheRules()
        self._core = _Core(estimator)
        self._partitions: dict[tuple[str, str | None], dict[bytes, _Stored]] = {}
        self._prune_at = 4096

    def submit(self, request: TimedRequest) -> CacheUsage:
        """Simulate one Chat Completions or Responses request; returns its billed usage."""
        rules = self.rules
        t, available_at = self._core.start(request)
        body = request.body
        key = body.get("prompt_cache_key")
        if key is not None and not isinstance(key, str):
            raise CacheSimulationError(f"prompt_cache_key: expected a string, got {type(key).__name__}")
        blocks = self._flatten(body)
        h, step = _chain(b"openai", b""), self._core.step
        chain: list[bytes] = []
        cum: list[int] = []
        total = 0
        for b in blocks:
            h = step(h, b.digest)
            total += b.tokens
            chain.append(h)
            cum.append(total)

        store = self._partitions.setdefault((str(body.get("model", "")), key), {})
        common = 0
        for k in range(len(chain) - 1, -1, -1):
            node = store.get(chain[k])
            if node is not None and node.available_at <= t < node.expires:
                common = cum[k]
                break
        read = 0
        if common >= rules.min_tokens:
            read = min(total, rules.min_tokens + rules.increment * ((common - rules.min_tokens) // rules.increment))

        if total >= rules.min_tokens:
            idle, dies = t + rules.idle_ttl_seconds, t + rules.max_ttl_seconds
            for h in chain:
                node = store.get(h)
                if node is None or node.expires <= t:
                    store[h] = _Stored(dies, min(idle, dies), available_at)
                else:
                    node.expires = min(idle, node.dies)
                    node.available_at = min(node.available_at, available_at)
        if sum(len(s) for s in self._partitions.values()) > self._prune_at:
            for part, nodes in list(self._partitions.items()):
                self._partitions[part] = {h: n for h, n in nodes.items() if n.expires > t}
            self._prune_at = 2 * sum(len(s) for s in self._partitions.values()) + 4096

        return _usage(
            total=total,
            read=read,
            write_5m=0,
            write_1h=0,
            reusable=self._core.reusable(blocks, t, rules.idle_ttl_seconds),
            r=rules.read_multiplier,
            w5=0.0,
            w1=0.0,
        )

    def _flatten(self, body: Mapping[str, object]) -> list[_Block]:
        """Blocks in prompt order: tools, output schema, then the conversation."""
        core, build = self._core, self._build
        blocks: list[_Block] = []
        tools = body.get("tools")
        if tools is not None:
            items = [(f"[{i}]", "tools", tool) for i, tool in enumerate(_list(tools, "tools"))]
            blocks += core.group(b"tools", tools, "tools", build, items, "tools").blocks
        text = body.get("text")
        schema = body.get("response_format") or (text.get("format") if isinstance(text, Mapping) else None)
        if schema is not None:
            blocks += core.group(b"schema", schema, "schema", build, [("", "schema", schema)], "response_format").blocks
        if "messages" in body:
            for m, message in enumerate(_list(body.get("messages"), "messages")):
                where = f"messages[{m}]"
                blocks += core.group(b"message", message, where, build, _openai_message(message, where), where).blocks
            return blocks
        if "input" not in body and "instructions" not in body:
            raise CacheSimulationError("body has neither 'messages' nor 'input'/'instructions': not an OpenAI request")
        for name, role in (("instructions", "developer"), ("input", "user")):
            value = body.get(name)
            if isinstance(value, str):
                if value:
                    text_block = [("", role, _text_block(value))]
                    blocks += core.group(name.encode(), value, name, build, text_block, name).blocks
                continue
            for i, item in enumerate(_list(value, name)):
                where = f"{name}[{i}]"
                blocks += core.group(b"item", item, where, build, _openai_item(item, where), where).blocks
        return blocks

    def _build(self, items: Iterable[tuple[str, str, object]], prefix: str) -> _Group:
        blocks = []
        for where, role, raw in items:
            digest, tokens = self._core.measure(role, raw, prefix + where)
            blocks.append(_Block(where, _MESSAGES, "", digest, tokens))
        return _Group(tuple(blocks))


def _openai_item(raw: object, where: str) -> Iterator[tuple[str, str, object]]:
    item = _mapping(raw, where)
    if "role" in item:
        yield from _openai_message(item, where)
    else:  # function_call, function_call_output, reasoning, compaction, ...
        yield "", str(item.get("type", "item")), item


def _openai_message(raw: object, where: str) -> Iterator[tuple[str, str, object]]:
    message = _mapping(raw, where)
    role = str(message.get("role", ""))
    content = message.get("content")
    # Everything but role and content (tool_calls, tool_call_id, name, ...) is one more block.
    meta = {k: v for k, v in message.items() if k not in ("role", "content") and not (k == "type" and v == "message")}
    emitted = False
    if isinstance(content, str):
        yield ".content", role, _text_block(content)
        emitted = True
    else:
        for c, part in enumerate(_list(content, f"{where}.content")):
            yield f".content[{c}]", role, part
            emitted = True
    if meta or not emitted:
        yield "", role, meta
