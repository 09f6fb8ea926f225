"""OpenAI automatic prompt caching (before GPT-5.6), as published (pure); the rules: `docs/cache-simulator.md`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from lamina.cachesim._cache_blocks import MESSAGES, openai_sections
from lamina.cachesim._simulator import (
    CacheSimulationError,
    CacheUsage,
    TimedRequest,
    _Block,
    _chain,
    _Group,
    _Simulation,
    _usage,
)


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


@dataclass(slots=True)
class _StoredPrefix:
    """One stored prompt prefix; mutable because every request that reaches it refreshes it."""

    dies: float
    """Creation time plus the hard cap."""
    expires: float
    """min(last use + idle TTL, dies)."""
    available_at: float


class OpenAICacheSimulator(_Simulation[OpenAICacheRules]):
    """OpenAI automatic prompt caching (before GPT-5.6): stored prefixes per (model, prompt_cache_key)."""

    def _current_rules(self) -> OpenAICacheRules:
        return OpenAICacheRules()

    def _clear(self) -> None:
        self._partitions: dict[tuple[str, str | None], dict[bytes, _StoredPrefix]] = {}
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
                    store[h] = _StoredPrefix(dies, min(idle, dies), available_at)
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
        for tag, value, where, items in openai_sections(body):
            blocks += core.group(tag, value, where, build, items, where).blocks
        return blocks

    def _build(self, items: Iterable[tuple[str, str, object]], prefix: str) -> _Group:
        blocks = []
        for where, role, raw in items:
            digest, tokens = self._core.measure(role, raw, prefix + where)
            blocks.append(_Block(where, MESSAGES, "", digest, tokens))
        return _Group(tuple(blocks))
