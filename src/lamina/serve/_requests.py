"""Each request of a stored session, rebuilt from the log and simulated in log order, memoised (pure).

The request is replayed as the composition report replays it (`lamina.reports.replay_request`),
rendered by the same renderer, laid out and simulated as a live session; docs/inspector.md tells how.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final, TypeVar

import msgspec

from lamina.cachesim import (
    AnthropicCacheSimulator,
    CacheSimulator,
    CacheUsage,
    OpenAICacheSimulator,
    TimedRequest,
)
from lamina.context import StableContext, ToolSpec, TurnContext
from lamina.engine import assemble_turn
from lamina.errors import LaminaError, LaminaRuntimeError
from lamina.placement import RenderCache, render
from lamina.reports import RecordedPrefixes, RecordedTools, cache_layout, explain_miss, replay_request
from lamina.serve._inspect import path_up_to
from lamina.serve._layers import BlockTokens, block_outs, composition_of, layer_totals, layers
from lamina.serve._model import (
    LAYER_NAMES,
    BreakpointOut,
    CacheFigures,
    RequestLayers,
    RequestSummary,
)
from lamina.serve._rebuilt import Rebuilt, format_of, target_for
from lamina.session import AssistantMessage, LogEntry, ToolOutputPruned, Usage, UserMessage
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator

NOT_LOGGED_TOOLS: Final = (
    "Tool definitions were not recorded in this session's log (an older log), so the rebuilt request has none; "
    "the provider's figures include them."
)

WARM_UP: Final = 12
"""Requests the simulator replays before the first one asked for, when it starts a replay."""

_ENCODER: Final = msgspec.json.Encoder()
"""The body as sent: its keys in the order the request had them."""
_NOTHING: Final = CacheUsage(total=0, read=0, write_5m=0, write_1h=0, uncached=0, reusable=0, cost_multiplier=1.0)
"""The simulated usage shown for a request that cannot be rebuilt."""
_T = TypeVar("_T")


class RequestDamageError(LaminaRuntimeError):
    """A request cannot be rebuilt from the log: a record it depends on is damaged (the pages show it as damage)."""


def figures_of_usage(usage: Usage | None) -> CacheFigures | None:
    """The provider's figures: `input` is what it billed uncached."""
    if usage is None:
        return None
    total = usage.input + usage.cache_read + usage.cache_write
    return CacheFigures(
        read=usage.cache_read,
        write=usage.cache_write,
        uncached=usage.input,
        total=total,
        hit_ratio=usage.cache_read / total if total else 0.0,
    )


def figures_of_simulation(usage: CacheUsage) -> CacheFigures:
    return CacheFigures(
        read=usage.read,
        write=usage.write,
        uncached=usage.uncached,
        total=usage.total,
        hit_ratio=usage.read / usage.total if usage.total else 0.0,
    )


class SessionRequests:
    """Every request of one session's log, rebuilt on demand and simulated in order (memoised).

    `entries` is the whole log in file order. The log only grows while a session is written, so
    `extend` takes a longer list with the same start and keeps what was computed.
    """

    def __init__(
        self,
        session_id: str,
        entries: Sequence[LogEntry],
        *,
        data_dir: str = "data",
        estimator: TokenEstimator = DEFAULT_ESTIMATOR,
    ) -> None:
        self.session_id = session_id
        self.data_dir = data_dir
        self.estimator = estimator
        self._entries: list[LogEntry] = []
        self._by_id: dict[str, LogEntry] = {}
        self._calls: list[AssistantMessage] = []
        self._call_index: dict[str, int] = {}
        self._prefixes = RecordedPrefixes()
        self._tools = RecordedTools()
        self._tools_at: list[tuple[ToolSpec, ...] | None] = []
        """Request index -> the tool definitions the log recorded last before it (append order)."""
        self._render_caches: dict[tuple[str, ...], RenderCache] = {}
        """One memo per set of prunes a view went through: a pruned turn keeps its entry ids."""
        self._simulators: dict[str, CacheSimulator] = {}
        self._simulated: dict[int, tuple[CacheUsage, int]] = {}
        """Request index -> its simulated usage and the index the replay that computed it started from."""
        self._layer_tokens: dict[int, dict[str, int]] = {}
        self._damaged: dict[int, str] = {}
        """Request index -> why it cannot be rebuilt (a damaged turn record, ...); the replay goes on without it."""
        self._replay: tuple[int, int] | None = None
        """The replay in progress: its first request and the next one to submit."""
        self._last_t = float("-inf")
        self._block_tokens = BlockTokens(estimator)
        self.extend(entries)

    # -- the log ---------------------------------------------------------------------------------

    def extend(self, entries: Sequence[LogEntry]) -> bool:
        """Take the log again; False (and nothing kept) when it is not an extension of the one held."""
        held = len(self._entries)
        if len(entries) < held or (held and entries[held - 1].id != self._entries[-1].id):
            return False
        for entry in entries[held:]:
            self._entries.append(entry)
            self._by_id.setdefault(entry.id, entry)
            self._prefixes.observe(entry)
            self._tools.observe(entry)
            if isinstance(entry, AssistantMessage):
                self._call_index[entry.id] = len(self._calls)
                self._calls.append(entry)
                self._tools_at.append(self._tools.current)
        return True

    @property
    def count(self) -> int:
        """How many requests the log records."""
        return len(self._calls)

    def index_of(self, entry_id: str) -> int | None:
        """The request index of the assistant message `entry_id`."""
        return self._call_index.get(entry_id)

    def tools_recorded(self, index: int) -> bool:
        """Whether the log recorded the tool definitions before request `index` (older logs did not)."""
        return self._tools_at[index] is not None

    def calls(self) -> list[AssistantMessage]:
        return list(self._calls)

    # -- one request -----------------------------------------------------------------------------

    def rebuild(self, index: int) -> Rebuilt:
        """The request answered by the `index`-th assistant message of the log.

        Raises:
            RequestDamageError: a record the request depends on cannot be rendered again (say, a
                turn record's part under a key no block has).
        """
        return self._undamaged(index, self._rebuild)

    def _undamaged(self, index: int, make: Callable[[int], _T]) -> _T:
        """`make(index)`; a `LaminaError` it raises becomes the `RequestDamageError` naming request `index`."""
        try:
            return make(index)
        except RequestDamageError:
            raise
        except LaminaError as exc:
            raise RequestDamageError(self._damage_of(index, exc)) from exc

    def _damage_of(self, index: int, exc: LaminaError) -> str:
        return f"request #{index} (answered by {self._calls[index].id}) cannot be rebuilt from the log: {exc}"

    def body(self, index: int) -> bytes:
        """Request `index`'s whole body as rebuilt, as JSON (raises `RequestDamageError` like `rebuild`)."""
        return _ENCODER.encode(self.rebuild(index).body)

    def _rebuild(self, index: int) -> Rebuilt:
        call = self._calls[index]
        path = path_up_to(self._by_id, call.parent_id)
        replayed = replay_request(
            path,
            prefixes=self._prefixes,
            session_id=self.session_id,
            data_dir=self.data_dir,
            turn_id=call.turn_id or "",
            recorded=self._tools_at[index],
            applied=call.context_edits,
        )
        record, turn, continuation = replayed.record, replayed.turn, replayed.continuation
        notes: list[str] = [] if replayed.tools_recorded else [NOT_LOGGED_TOOLS]
        if record is None:
            notes.append("No turn record for this request: its tail is not in the log.")
        elif not replayed.stable_recorded:
            notes.append(
                f"The stable parts of version {record.stable_version} are not recorded in the log (an older "
                "log, or a version delivered once in a tail and pinned by a later compaction): the stable "
                "prefix is shown empty."
            )
        target = target_for(call.model)
        prunes = tuple(e.id for e in replayed.sent if isinstance(e, ToolOutputPruned))
        cache = self._render_caches.setdefault(prunes, RenderCache())
        body = render(turn, target, continuation=continuation, cache=cache)
        now = _message_count(render(_only_now(turn), target, continuation=continuation))
        previous = path[-1] if path else None
        return Rebuilt(
            index=index,
            call=call,
            replayed=replayed,
            target=target,
            body=body,
            current_start=max(_message_count(body) - now, 0),
            t_start=previous.ts if previous is not None else call.ts,
            notes=tuple(notes),
        )

    # -- the simulator, in log order ---------------------------------------------------------------

    def simulate(self, indices: Sequence[int]) -> None:
        """Replay requests through the cache simulator in log order, so that every index in `indices` is done.

        A replay continues from where the last one stopped when that is at most `WARM_UP` requests
        before the first index wanted; otherwise it starts again, with empty caches, `WARM_UP`
        requests earlier (Lamina's rolling breakpoints make a request read what the one before it
        wrote, so the warm-up gives the figures a replay from the first request would).
        """
        for index in sorted(i for i in set(indices) if i not in self._simulated):
            if index in self._simulated:
                continue
            replay = self._replay
            if replay is None or not replay[1] <= index <= replay[1] + WARM_UP:
                first = max(0, index - WARM_UP)
                self._simulators = {}
                self._last_t = float("-inf")
                replay = (first, first)
            first, position = replay
            while position <= index:
                self._submit(position, first)
                position += 1
            self._replay = (first, position)

    def _submit(self, index: int, replay_from: int) -> None:
        try:
            rebuilt = self.rebuild(index)
            layer_tokens = self._layer_tokens.get(index) or self._layer_totals(rebuilt)
        except LaminaError as exc:  # the rebuild, or the layer totals rendering the tail again
            self._damaged[index] = str(exc) if isinstance(exc, RequestDamageError) else self._damage_of(index, exc)
            self._simulated.setdefault(index, (_NOTHING, replay_from))
            self._layer_tokens.setdefault(index, dict.fromkeys(LAYER_NAMES, 0))
            return
        fmt = format_of(rebuilt.target)
        simulator = self._simulators.get(fmt)
        if simulator is None:
            simulator = self._simulators[fmt] = (
                OpenAICacheSimulator(estimator=self.estimator)
                if fmt == "openai_chat"
                else AnthropicCacheSimulator(estimator=self.estimator)
            )
        t = max(rebuilt.t_start, self._last_t)
        self._last_t = t
        usage = simulator.submit(TimedRequest(t, rebuilt.body, t_first_byte=max(rebuilt.call.ts, t)))
        self._simulated.setdefault(index, (usage, replay_from))
        self._layer_tokens.setdefault(index, layer_tokens)

    def _layer_totals(self, rebuilt: Rebuilt) -> dict[str, int]:
        return layer_totals(rebuilt, self._block_tokens)

    def replayed_from(self, index: int) -> int:
        self.simulate([index])
        return self._simulated[index][1]

    def summary(self, index: int, *, on_path: bool) -> RequestSummary:
        self.simulate([index])
        call = self._calls[index]
        return RequestSummary(
            index=index,
            entry_id=call.id,
            turn_id=call.turn_id,
            ts=call.ts,
            model=call.model,
            on_path=on_path,
            layers=self._layer_tokens[index],
            provider=figures_of_usage(call.usage),
            simulated=figures_of_simulation(self._simulated[index][0]),
            damage=self._damaged.get(index),
            cache_miss=miss_words(call),
        )

    def layers(self, index: int) -> RequestLayers:
        """One request's layers, blocks and breakpoints, with both sides' cache figures.

        Raises:
            RequestDamageError: the request cannot be rebuilt from the log (see `rebuild`).
        """
        self.simulate([index])
        damage = self._damaged.get(index)
        if damage is not None:
            raise RequestDamageError(damage)
        return self._undamaged(index, self._layers_of)

    def _layers_of(self, index: int) -> RequestLayers:
        usage, replay_from = self._simulated[index]
        rebuilt = self.rebuild(index)
        layout = cache_layout(rebuilt.body, rebuilt.target, turn=rebuilt.turn, estimator=self.estimator)
        blocks = block_outs(rebuilt, layout)
        record = rebuilt.record
        return RequestLayers(
            index=index,
            entry_id=rebuilt.call.id,
            turn_id=rebuilt.call.turn_id,
            user_entry_id=rebuilt.turn.user_entry_id or None,
            ts=rebuilt.call.ts,
            model=rebuilt.call.model,
            format=format_of(rebuilt.target),
            layers=layers(rebuilt, blocks, self.estimator),
            blocks=blocks,
            breakpoints=[
                BreakpointOut(position=b.position, where=b.where, ttl=b.ttl, tokens=b.tokens, cacheable=b.cacheable)
                for b in layout.breakpoints
            ],
            provider=figures_of_usage(rebuilt.call.usage),
            simulated=figures_of_simulation(usage),
            stable_version=record.stable_version if record is not None else None,
            stable_digest=record.stable_digest if record is not None else None,
            stable_recorded=rebuilt.replayed.stable_recorded,
            tools=[t.name for t in rebuilt.turn.tools],
            tools_recorded=rebuilt.replayed.tools_recorded,
            composition=composition_of(rebuilt, self.estimator),
            cache_miss=miss_words(rebuilt.call),
            notes=[
                *rebuilt.notes,
                replay_note(index, replay_from),
                *layout.notes[:-1],  # the last layout note is about a first request
            ],
        )


def miss_words(call: AssistantMessage) -> str | None:
    """Why the call missed the cache, as its log entry records it (None: nothing missed, or nothing recorded)."""
    report = explain_miss(call.cache_check)
    return None if report is None else report.words


def replay_note(index: int, replay_from: int) -> str:
    if replay_from == 0:
        return "The simulator replayed every request of the log before this one, in order."
    return (
        f"The simulator replayed the requests from #{replay_from} on, starting with empty caches "
        f"({index - replay_from} before this one): entries written earlier and read here without being written "
        "again in between are not seen."
    )


def _message_count(body: object) -> int:
    messages = body.get("messages") if isinstance(body, Mapping) else None
    return len(messages) if isinstance(messages, list) else 0


def _only_now(turn: TurnContext) -> TurnContext:
    """The turn without its history, prelude and stable parts: what renders as its own messages."""
    last = turn.history[-1] if turn.history else None
    return assemble_turn(
        turn_id=turn.id,
        session_id=turn.session_id,
        user=last if isinstance(last, UserMessage) and last.id == turn.user_entry_id else None,
        history=[last] if last is not None else [],
        stable=StableContext((), 0, ""),
        volatile=turn.volatile,
        one_shots=turn.one_shots,
    )


__all__ = [
    "NOT_LOGGED_TOOLS",
    "WARM_UP",
    "Rebuilt",
    "RequestDamageError",
    "SessionRequests",
    "figures_of_usage",
    "format_of",
    "replay_note",
    "target_for",
]
