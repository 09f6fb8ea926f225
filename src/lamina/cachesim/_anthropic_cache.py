"""Anthropic Messages prompt caching, as the published rules bill it (pure); the rules: `docs/cache-simulator.md`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from lamina.cachesim._cache_blocks import (
    MESSAGES,
    SYSTEM,
    TOOLS,
    as_list,
    message_items,
    system_items,
    tool_items,
    without_marker,
)
from lamina.cachesim._simulator import (
    CacheBreakpointError,
    CacheSimulationError,
    CacheTtl,
    CacheUsage,
    TimedRequest,
    _Block,
    _canonical,
    _chain,
    _Flat,
    _Group,
    _Simulation,
    _usage,
)

_RUN_KINDS: Final = frozenset({"tool_use", "tool_result"})
_UNCACHEABLE_KINDS: Final = frozenset({"thinking", "redacted_thinking"})


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
    strip_earlier_thinking: bool = False
    """The API drops the thinking of assistant turns before the last user turn (models before Opus 4.5
    and Sonnet 4.6): those blocks are neither billed nor part of the prefix. False: every thinking
    block sent is input (Opus 4.5+, Sonnet 4.6+, the models that keep earlier turns' thinking)."""

    def __post_init__(self) -> None:
        if self.min_tokens < 0 or self.max_breakpoints < 0 or self.lookback < 1:
            raise ValueError(f"invalid AnthropicCacheRules: {self!r}")
        if self.ttl_5m_seconds <= 0 or self.ttl_1h_seconds <= 0:
            raise ValueError(f"cache TTLs must be positive: {self!r}")


@dataclass(frozen=True, slots=True)
class _CacheEntry:
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


class AnthropicCacheSimulator(_Simulation[AnthropicCacheRules]):
    """Anthropic Messages prompt caching: explicit and automatic breakpoints, 20-position lookback, two TTLs."""

    def _current_rules(self) -> AnthropicCacheRules:
        return AnthropicCacheRules()

    def _clear(self) -> None:
        self._entries: dict[bytes, _CacheEntry] = {}
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
            new = _CacheEntry(seconds, t + seconds, available_at)
            old = entries.get(chain[b])
            if old is not None and t < old.expires:  # written by a parallel request, not yet readable
                new = _CacheEntry(
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
            listed = as_list(tools, "tools")
            flat.add("", core.group(b"tools", listed, "tools", build, tool_items(listed), "", len(flat.blocks)))
        system = body.get("system")
        if system is not None:
            flat.add("", core.group(b"system", system, "system", build, system_items(system), "", len(flat.blocks)))
        if "messages" not in body:
            raise CacheSimulationError("body has no 'messages': not an Anthropic Messages request")
        messages = as_list(body.get("messages"), "messages")
        turn_start = _last_user_turn(messages) if self.rules.strip_earlier_thinking else 0
        for m, message in enumerate(messages):
            prefix = f"messages[{m}]"
            items = message_items(message, prefix)
            if m < turn_start:  # the API strips this earlier turn's thinking before it reads the prompt
                kept = (item for item in items if item[3].get("type") not in _UNCACHEABLE_KINDS)
                group = core.group(b"stripped", message, prefix, build, kept, prefix, len(flat.blocks))
            else:
                group = core.group(b"message", message, prefix, build, items, prefix, len(flat.blocks))
            flat.add(prefix, group)
        return flat

    def _build(self, items: Iterable[tuple[str, int, str, Mapping[str, object]]], prefix: str, base: int) -> _Group:
        """Measure and check the blocks of one group; `base` is the group's first block index (for errors)."""
        blocks: list[_Block] = []
        for where, level, role, raw in items:
            position = base + len(blocks) + 1
            digest, tokens = self._core.measure(role, without_marker(raw), prefix + where)
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
            run = level == MESSAGES and kind in _RUN_KINDS
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
            salts[SYSTEM] = _canonical({"speed": body.get("speed")}, "speed")
            salts[MESSAGES] = _canonical(salt, "tool_choice/thinking/output_config")
        group_runs, step = self.rules.group_tool_runs, self._core.step
        h = _chain(b"anthropic", str(body.get("model", "")).encode())
        level, total, p, prev_kind = TOOLS, 0, 0, ""
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


def _last_user_turn(messages: list[object]) -> int:
    """The index of the last user message that is not only tool results (0: none): where the current turn starts."""
    for m in range(len(messages) - 1, -1, -1):
        message = messages[m]
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        content = message.get("content")
        if not isinstance(content, list) or not all(
            isinstance(c, Mapping) and c.get("type") == "tool_result" for c in content
        ):
            return m
    return 0


def _has_image(content: object) -> bool:
    return isinstance(content, list) and any(isinstance(c, Mapping) and c.get("type") == "image" for c in content)
