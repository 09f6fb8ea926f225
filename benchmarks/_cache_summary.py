"""The summarising call on the cache against a fresh one, and a session's bill with pre-warm on and off (#46).

Each scenario runs a real agent (`open_agent`) through the Anthropic provider against the test
suite's wire server, whose cache simulator bills every request on one scripted clock (30 s between
turns). Bills are in base-price input tokens: the simulator's input bill, and output at 5x.

- `summary_call_*`: the same session (a 100,000-token window, so a compaction comes every few
  turns) run twice, its summarising calls fresh (a summariser without a cached prefix: what Lamina
  did before) and on the cache (the agent's own); each compaction's call billed both ways.
- `prewarm_*`: a session compacted with `/compact` between turns, the user back two minutes
  later; its whole bill with pre-warm off, priced and always, and the tokens the first request
  after each compaction had to write before the model could start (what a pre-warm takes off the
  user's time). `prewarm_refresh_*`: a user back after 65 minutes each time, the agent asked to
  pre-warm (priced) a minute before the 1-hour entry expires.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from tests.wire.fixtures import anthropic_provider
from tests.wire.script import Reply
from tests.wire.server import ManualClock, Received, WireServer

from benchmarks import Figure
from lamina.agent import AgentOptions, Prewarmed, PrewarmSetting, open_agent
from lamina.compaction import ProviderSummariser
from lamina.providers import Capabilities
from lamina.session import InMemorySessionStore
from lamina.tokens import DEFAULT_ESTIMATOR

_OUTPUT: Final = 5.0
"""An output token in base-price input tokens."""
_WINDOW: Final = Capabilities(context_window=100_000)
_SUMMARY: Final = (
    "## Goal\nAnswer the user's questions about the service.\n\n## Progress\n### Done\n"
    + "".join(f"- Answered question {n}: the handler in service/api_{n}.py.\n" for n in range(30))
    + "\n## Next steps\n- The next question."
)


def _answer(n: int) -> Reply:
    return Reply(text=f"Answer {n}: " + "the handler reads the request and writes the reply; " * 120)


def _question(n: int) -> str:
    return f"Question {n}: how does service/api_{n}.py handle it? " + "context line " * 900


def _bill(received: Received) -> float:
    """What the wire server billed for one request, output included, in base-price input tokens."""
    usage = received.usage
    if usage is None:
        return 0.0
    text = received.step.text if isinstance(received.step, Reply) else ""
    return usage.cost_multiplier * usage.total + _OUTPUT * DEFAULT_ESTIMATOR.count(text)


def _summarising(received: Received) -> bool:
    body = received.body if isinstance(received.body, dict) else {}
    messages = body.get("messages") or [{}]
    return "<instructions>" in json.dumps(messages[-1]) and received.usage is not None


def _fresh_summary(received: Received) -> bool:
    body = received.body if isinstance(received.body, dict) else {}
    messages = body.get("messages") or []
    first = messages[0].get("content") if messages else None
    return isinstance(first, str) and first.startswith("<instructions>") and received.usage is not None


def summary_call_figures(folder: Path, turns: int) -> list[Figure]:
    """Each compaction's summarising call, billed fresh and on the cache (the same session run both ways)."""
    fresh = asyncio.run(_scripted_summary_calls(folder / "fresh", turns, fresh=True))
    cached = asyncio.run(_scripted_summary_calls(folder / "cached", turns, fresh=False))
    ratios = [c / f for c, f in zip(cached, fresh, strict=False) if f]
    return [
        Figure(
            "summary_calls", len(ratios), "calls", note=f"compactions in a {turns}-turn session, 100,000-token window"
        ),
        Figure("summary_call_fresh", round(statistics.mean(fresh), 1), "base-price tokens", note="mean per call"),
        Figure("summary_call_cached", round(statistics.mean(cached), 1), "base-price tokens", note="mean per call"),
        Figure(
            "summary_call_cached_vs_fresh",
            round(max(ratios), 4) if ratios else 0.0,
            "ratio",
            note=f"the worst compaction (mean {statistics.mean(ratios):.3f}); goal at most 0.3" if ratios else "",
        ),
    ]


async def _scripted_summary_calls(folder: Path, turns: int, *, fresh: bool) -> list[float]:
    """The session with a summary answered wherever a summarising request comes (the script is built as it goes)."""
    clock = ManualClock()
    with _SummaryWire(clock=clock) as wire:
        async with anthropic_provider(wire, capabilities=_WINDOW) as provider:
            store = InMemorySessionStore(folder, clock=clock)
            options = AgentOptions(clock=clock, keep_tokens=2_000, prewarm="off")
            with open_agent(store, provider, workspace=folder, options=options) as agent:
                if fresh:  # Lamina before: no cached prefix, always a fresh request
                    agent.summariser = ProviderSummariser(provider, session_id=agent.session.id, prefix=lambda: None)
                for n in range(turns):
                    clock.advance(30.0)
                    wire.next_answer = _answer(n)
                    await agent.run_turn(_question(n))
    return [_bill(r) for r in wire.requests if _summarising(r) or _fresh_summary(r)]


class _SummaryWire(WireServer):
    """The wire server answering a summarising request with the summary, any other with the turn's answer."""

    next_answer: Reply = Reply(text="")

    def answer(self, path: str, headers: Any, raw: bytes) -> Any:
        asks = b"<instructions>" in raw
        with self._lock:
            self._script.clear()
            self._script.append(Reply(text=_SUMMARY) if asks else self.next_answer)
        return super().answer(path, headers, raw)


async def _prewarm_session(folder: Path, turns: int, setting: PrewarmSetting, *, away: float) -> tuple[float, int, int]:
    """The scenario's bill, the tokens the first requests after compactions wrote, and the pre-warms sent."""
    clock = ManualClock()
    firsts: list[int] = []
    sent = 0
    with _SummaryWire(clock=clock) as wire:
        async with anthropic_provider(wire) as provider:
            store = InMemorySessionStore(folder, clock=clock)
            options = AgentOptions(clock=clock, keep_tokens=2_000, prewarm=setting)
            with open_agent(store, provider, workspace=folder, options=options) as agent:
                for n in range(turns):
                    clock.advance(30.0)
                    wire.next_answer = _answer(n)
                    await agent.run_turn(_question(n))
                    if n % 4 == 3:  # `/compact` between turns, then the user is away
                        await agent.compact()
                        sent += sum(1 for r in wire.requests[-1:] if r.body.get("max_tokens") == 0)
                        clock.advance(away)
                        wire.next_answer = _answer(1000 + n)
                        before = len(wire.requests)
                        await agent.run_turn(_question(1000 + n))
                        first = wire.requests[before].usage
                        firsts.append(first.write if first is not None else 0)
    return sum(_bill(r) for r in wire.requests), round(statistics.mean(firsts)) if firsts else 0, sent


async def _refresh_session(folder: Path, turns: int, *, refresh: bool) -> tuple[float, int]:
    """A user back after 65 minutes each time; with `refresh`, a priced pre-warm asked a minute before the expiry."""
    clock = ManualClock()
    sent = 0
    with _SummaryWire(clock=clock) as wire:
        async with anthropic_provider(wire) as provider:
            store = InMemorySessionStore(folder, clock=clock)
            options = AgentOptions(clock=clock, keep_tokens=2_000, prewarm="priced")
            with open_agent(store, provider, workspace=folder, options=options) as agent:
                for n in range(turns):
                    wire.next_answer = _answer(n)
                    await agent.run_turn(_question(n))
                    left = agent._calls.warming.expires_in() or 0.0
                    if refresh and left > 60.0:  # what an idle scheduler would do: ask a minute before the expiry
                        clock.advance(left - 60.0)
                        warmed: Prewarmed = await agent._calls.warming.prewarm()
                        sent += warmed.sent
                        clock.advance(65 * 60.0 - (left - 60.0))
                    else:
                        clock.advance(65 * 60.0)
    return sum(_bill(r) for r in wire.requests), sent


def prewarm_figures(folder: Path, turns: int) -> list[Figure]:
    """The pre-warm scenarios' bills, off against on."""
    bills: dict[str, tuple[float, int, int]] = {}
    for setting in ("off", "priced", "always"):
        bills[setting] = asyncio.run(_prewarm_session(folder / f"prewarm-{setting}", turns, setting, away=120.0))
    off, always = bills["off"], bills["always"]
    refresh_off = asyncio.run(_refresh_session(folder / "refresh-off", max(4, turns // 3), refresh=False))
    refresh_on = asyncio.run(_refresh_session(folder / "refresh-on", max(4, turns // 3), refresh=True))
    return [
        Figure("prewarm_bill_off", round(off[0]), "base-price tokens", note="/compact every 4 turns, back after 2 min"),
        Figure(
            "prewarm_bill_priced", round(bills["priced"][0]), "base-price tokens", note=f"{bills['priced'][2]} sent"
        ),
        Figure("prewarm_bill_always", round(always[0]), "base-price tokens", note=f"{always[2]} pre-warms sent"),
        Figure("prewarm_bill_always_vs_off", round(always[0] / off[0], 4), "ratio"),
        Figure(
            "prewarm_first_request_written_off",
            off[1],
            "tokens",
            note="written by the first request after a compaction (on the user's time), mean",
        ),
        Figure("prewarm_first_request_written_always", always[1], "tokens"),
        Figure("prewarm_refresh_bill_off", round(refresh_off[0]), "base-price tokens", note="back after 65 min"),
        Figure(
            "prewarm_refresh_bill_priced",
            round(refresh_on[0]),
            "base-price tokens",
            note=f"{refresh_on[1]} priced pre-warms a minute before the expiry",
        ),
        Figure("prewarm_refresh_priced_vs_off", round(refresh_on[0] / refresh_off[0], 4), "ratio"),
    ]


def cache_bills(*, quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    """The summarising call fresh and on the cache, and the pre-warm scenarios (`python -m benchmarks compaction`)."""
    turns = 30 if quick else 70
    with tempfile.TemporaryDirectory(prefix="lamina-bench-cache-summary-") as tmp:
        progress(f"summarising calls: a {turns}-turn session, fresh and on the cache (the wire server)")
        figures = summary_call_figures(Path(tmp), turns)
        progress("pre-warm: off, priced and always, and a priced refresh before the 1-hour expiry")
        figures += prewarm_figures(Path(tmp), 8 if quick else 16)
    return figures
