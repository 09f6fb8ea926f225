"""`lamina proxy report`: per request of a proxied session, its usage, bill, the edits made and why it missed (pure).

Read from the session's entries: each `proxy.request` entry, the `AssistantMessage` (usage) or
`proxy.error` entry after it. A request that read nothing from the cache after an earlier one did
is a miss; its cause is the gap when that is past the cache's lifetime (5 minutes), else a prefix
that changed. Each edit's saving and cost are the figures logged with it when it was made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from lamina.pricing import CachePrices, cost_of
from lamina.proxy._sessions import ERROR_ENTRY, REQUEST_ENTRY
from lamina.session import AssistantMessage, Custom, LogEntry, Usage

_TTL_SECONDS: Final = CachePrices.anthropic().ttl_5m_seconds


@dataclass(frozen=True, slots=True)
class RequestReport:
    """One request of a proxied session."""

    entry_id: str
    api: str
    model: str
    ts: float
    status: int
    """200 when the upstream answered with a usage, the upstream's status when it refused, 0 when nothing came back."""
    usage: Usage | None
    usd: float | None
    """The bill at list prices (None: the model's prices are unknown, or no usage)."""
    edits: tuple[Mapping[str, Any], ...]
    saved: float
    """What the edits saved, in base-price input tokens (as estimated when they were made)."""
    cost: float
    """What the edits cost in rewritten cache, in base-price input tokens."""
    miss: str | None
    """Why it read nothing from a cache an earlier request wrote: `ttl expiry` or `prefix change` (None: no miss)."""

    @property
    def net(self) -> float:
        """Saved less cost (positive: the edits paid)."""
        return self.saved - self.cost


@dataclass(frozen=True, slots=True)
class ProxyReport:
    """A proxied session's requests, with the totals."""

    session_id: str
    requests: tuple[RequestReport, ...]

    @property
    def saved(self) -> float:
        return sum(r.saved for r in self.requests)

    @property
    def cost(self) -> float:
        return sum(r.cost for r in self.requests)

    @property
    def net(self) -> float:
        return self.saved - self.cost

    @property
    def usd(self) -> float:
        return sum(r.usd or 0.0 for r in self.requests)

    def to_json(self) -> dict[str, Any]:
        """The report as one JSON document."""
        return {
            "session": self.session_id,
            "requests": [
                {
                    "entry": r.entry_id,
                    "api": r.api,
                    "model": r.model,
                    "ts": r.ts,
                    "status": r.status,
                    "usage": None if r.usage is None else _usage_json(r.usage),
                    "usd": r.usd,
                    "edits": [dict(e) for e in r.edits],
                    "saved": r.saved,
                    "cost": r.cost,
                    "net": r.net,
                    "miss": r.miss,
                }
                for r in self.requests
            ],
            "totals": {"saved": self.saved, "cost": self.cost, "net": self.net, "usd": self.usd},
        }


def _usage_json(usage: Usage) -> dict[str, int]:
    return {
        "input": usage.input,
        "output": usage.output,
        "cache_read": usage.cache_read,
        "cache_write": usage.cache_write,
        "reasoning": usage.reasoning,
    }


def proxy_report(session_id: str, entries: Sequence[LogEntry]) -> ProxyReport:
    """The report of the proxied session `session_id` whose entries are `entries` (in append order)."""
    out: list[RequestReport] = []
    pending: Custom | None = None
    status, usage = 0, None
    cached_before: float | None = None  # when a request last read or wrote the cache

    def close() -> None:
        nonlocal cached_before
        if pending is None:
            return
        report = _request(pending, status, usage, cached_before)
        out.append(report)
        if usage is not None and (usage.cache_read or usage.cache_write):
            cached_before = pending.ts

    for entry in entries:
        if isinstance(entry, Custom) and entry.name == REQUEST_ENTRY:
            close()
            pending, status, usage = entry, 0, None
        elif isinstance(entry, AssistantMessage) and pending is not None and entry.usage is not None:
            status, usage = 200, entry.usage
        elif isinstance(entry, Custom) and entry.name == ERROR_ENTRY and isinstance(entry.data, Mapping):
            found = entry.data.get("status")
            status = found if isinstance(found, int) else 0
    close()
    return ProxyReport(session_id, tuple(out))


def _request(entry: Custom, status: int, usage: Usage | None, cached_before: float | None) -> RequestReport:
    data: Mapping[str, Any] = entry.data if isinstance(entry.data, Mapping) else {}
    edits = tuple(e for e in data.get("edits") or () if isinstance(e, Mapping))
    model = str(data.get("model") or "")
    miss = None
    if usage is not None and usage.cache_read == 0 and cached_before is not None:
        miss = "ttl expiry" if entry.ts - cached_before > _TTL_SECONDS else "prefix change"
    return RequestReport(
        entry_id=entry.id,
        api=str(data.get("api") or ""),
        model=model,
        ts=entry.ts,
        status=status,
        usage=usage,
        usd=None if usage is None else cost_of(model, usage),
        edits=edits,
        saved=sum(float(e.get("saved") or 0.0) for e in edits),
        cost=sum(float(e.get("cost") or 0.0) for e in edits),
        miss=miss,
    )
