"""Each request of a stored session, rebuilt from the log: its layers, blocks, breakpoints and cache figures (pure).

A model call leaves an `AssistantMessage` (with the provider's usage) in the log, after the turn's
user message and its `TurnRecord` (the tail as sent) and the tool loop so far. The request is
rebuilt the way the engine built it: the provider view of the path up to the call (the latest
compaction's summary and the user's words lane, then the kept entries), the turn's record for the
tail, and the stable prefix the `stable` state changes recorded, matched by the digest the turn
record names; then it goes through the same renderer (`lamina.placement.render`), the same cache
layout (`lamina.reports.cache_layout`) and the same cache simulator as a live session. Tool
definitions are not in the log, so the rebuilt request has none; the notes say so, and the
provider's figures (which include them) stand beside the simulator's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from lamina.cachesim import (
    AnthropicCacheSimulator,
    CacheSimulator,
    CacheUsage,
    OpenAICacheSimulator,
    TimedRequest,
)
from lamina.compaction import apply_prunes
from lamina.context import Authority, StableContext, Tier, TurnContext, render_tail
from lamina.engine import assemble_turn, logged_turn
from lamina.engine._prefix import prefix_context  # the one reading of a recorded prefix, shared with the engine
from lamina.errors import LaminaError, LaminaRuntimeError
from lamina.placement import (
    AnthropicTarget,
    OpenAIChatTarget,
    RenderCache,
    RenderTarget,
    render,
)
from lamina.reports import TIER_LABELS, CacheLayout, LayoutBlock, cache_layout, compose_turn
from lamina.serve._model import (
    LAYER_NAMES,
    BlockOut,
    BreakpointOut,
    CacheFigures,
    ComponentOut,
    Layer,
    LayerName,
    LayerPart,
    RequestLayers,
    RequestSummary,
)
from lamina.session import (
    AssistantMessage,
    LogEntry,
    PartRecord,
    StateChange,
    ToolOutputPruned,
    TurnRecord,
    Usage,
    UserMessage,
    provider_view,
)
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator

TEXT_BOUND: Final = 4_000
"""Characters of a part's text a layer carries (the whole text is in the log)."""

NOT_LOGGED_TOOLS: Final = (
    "Tool definitions are not recorded in the session log, so the rebuilt request has none; the provider's "
    "figures include them."
)

WARM_UP: Final = 12
"""Requests the simulator replays before the first one asked for, when it starts a replay."""

_ENCODER: Final = msgspec.json.Encoder(order="sorted")
_NOTHING: Final = CacheUsage(total=0, read=0, write_5m=0, write_1h=0, uncached=0, reusable=0, cost_multiplier=1.0)
"""The simulated usage shown for a request that cannot be rebuilt."""
_MESSAGE_INDEX: Final = re.compile(r"^(?:messages|input)\[(\d+)\]")


class RequestDamageError(LaminaRuntimeError):
    """A request cannot be rebuilt from the log: a record it depends on is damaged (the pages show it as damage)."""


@dataclass(frozen=True, slots=True)
class Rebuilt:
    """One request rebuilt from the log."""

    index: int
    call: AssistantMessage
    turn: TurnContext
    target: RenderTarget
    body: Any
    current_start: int
    """Index of the first wire message of this turn (its user message) in the body's messages."""
    record: TurnRecord | None
    stable_recorded: bool
    t_start: float
    notes: tuple[str, ...]
    sent: tuple[LogEntry, ...] = ()
    """The provider-view entries the request carried (history, this turn's message and tool loop so far)."""
    summary: str | None = None
    """The compaction summary as logged (the request shows it neutralised)."""


def target_for(model: str) -> RenderTarget:
    """The wire format a model was most likely called in: OpenAI Chat for GPT and o-series names, else Anthropic."""
    name = model.lower().rsplit("/", 1)[-1]
    if name.startswith(("gpt", "o1", "o3", "o4", "chatgpt")):
        return OpenAIChatTarget(model=model)
    return AnthropicTarget(model=model or "unknown")


def format_of(target: RenderTarget) -> str:
    return "openai_chat" if isinstance(target, OpenAIChatTarget) else "anthropic"


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
        self._prefixes: dict[str, StableContext] = {}
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
        self._block_tokens: dict[int, tuple[object, int]] = {}
        """Tokens of wire messages the render cache shares between requests, by identity (the object kept alive)."""
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
            if isinstance(entry, AssistantMessage):
                self._call_index[entry.id] = len(self._calls)
                self._calls.append(entry)
            elif isinstance(entry, StateChange) and entry.key == "stable":
                context = prefix_context(entry)
                if context is not None:
                    self._prefixes.setdefault(context.digest, context)
        return True

    @property
    def count(self) -> int:
        """How many requests the log records."""
        return len(self._calls)

    def index_of(self, entry_id: str) -> int | None:
        """The request index of the assistant message `entry_id`."""
        return self._call_index.get(entry_id)

    def calls(self) -> list[AssistantMessage]:
        return list(self._calls)

    def _path_before(self, call: AssistantMessage) -> list[LogEntry]:
        path: list[LogEntry] = []
        seen: set[str] = set()
        current = call.parent_id
        while current is not None and current not in seen:
            seen.add(current)
            entry = self._by_id.get(current)
            if entry is None:
                break
            path.append(entry)
            current = entry.parent_id
        path.reverse()
        return path

    # -- one request -----------------------------------------------------------------------------

    def rebuild(self, index: int) -> Rebuilt:
        """The request answered by the `index`-th assistant message of the log.

        Raises:
            RequestDamageError: a record the request depends on cannot be rendered again (say, a
                turn record's part under a key no block has).
        """
        try:
            return self._rebuild(index)
        except LaminaError as exc:
            if isinstance(exc, RequestDamageError):
                raise
            raise RequestDamageError(self._damage_of(index, exc)) from exc

    def _damage_of(self, index: int, exc: LaminaError) -> str:
        return f"request #{index} (answered by {self._calls[index].id}) cannot be rebuilt from the log: {exc}"

    def body(self, index: int) -> bytes:
        """Request `index`'s whole body as rebuilt, as JSON (raises `RequestDamageError` like `rebuild`)."""
        return _ENCODER.encode(self.rebuild(index).body)

    def _rebuild(self, index: int) -> Rebuilt:
        call = self._calls[index]
        path = self._path_before(call)
        view = provider_view(path)
        entries = apply_prunes(view.entries)  # old tool output shown as its note, as the engine sent it
        notes: list[str] = [NOT_LOGGED_TOOLS]
        logged = logged_turn(entries)
        record, continuation = logged.record, logged.continuation
        if record is None:
            notes.append("No turn record for this request: its tail is not in the log.")
        stable, recorded = self._stable_for(record)
        if not recorded and record is not None:
            notes.append(
                f"The stable parts of version {record.stable_version} are not recorded in the log (an older "
                "log, or a version delivered once in a tail and pinned by a later compaction): the stable "
                "prefix is shown empty."
            )
        boundary = view.boundary
        turn = logged.assemble(
            session_id=self.session_id,
            stable=stable,
            boundary=boundary,
            data_dir=self.data_dir,
            turn_id=call.turn_id or "",
        )
        target = target_for(call.model)
        prunes = tuple(e.id for e in entries if isinstance(e, ToolOutputPruned))
        cache = self._render_caches.setdefault(prunes, RenderCache())
        body = render(turn, target, continuation=continuation, cache=cache)
        now = _message_count(render(_only_now(turn), target, continuation=continuation))
        previous = path[-1] if path else None
        t_start = previous.ts if previous is not None else call.ts
        return Rebuilt(
            index=index,
            call=call,
            turn=turn,
            target=target,
            body=body,
            current_start=max(_message_count(body) - now, 0),
            record=record,
            stable_recorded=recorded,
            t_start=t_start,
            notes=tuple(notes),
            sent=tuple(entries),
            summary=boundary.summary if boundary is not None else None,
        )

    def _stable_for(self, record: TurnRecord | None) -> tuple[StableContext, bool]:
        if record is None:
            return StableContext((), 0, ""), False
        known = self._prefixes.get(record.stable_digest)
        if known is not None:
            return known, True
        return StableContext((), record.stable_version, record.stable_digest), False

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
        if not isinstance(rebuilt.target, AnthropicTarget):
            layout = cache_layout(rebuilt.body, rebuilt.target, turn=rebuilt.turn, estimator=self.estimator)
            return _layer_totals(rebuilt, layout, self.estimator)
        return _anthropic_layer_totals(rebuilt, self.estimator, self._block_tokens)

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
        try:
            return self._layers_of(index)
        except LaminaError as exc:
            if isinstance(exc, RequestDamageError):
                raise
            raise RequestDamageError(self._damage_of(index, exc)) from exc

    def _layers_of(self, index: int) -> RequestLayers:
        usage, replay_from = self._simulated[index]
        rebuilt = self.rebuild(index)
        layout = cache_layout(rebuilt.body, rebuilt.target, turn=rebuilt.turn, estimator=self.estimator)
        blocks = [_block_out(b, _layer_of(b, rebuilt)) for b in layout.blocks]
        layers = _layers(rebuilt, layout, blocks, self.estimator)
        record = rebuilt.record
        return RequestLayers(
            index=index,
            entry_id=rebuilt.call.id,
            turn_id=rebuilt.call.turn_id,
            user_entry_id=rebuilt.turn.user_entry_id or None,
            ts=rebuilt.call.ts,
            model=rebuilt.call.model,
            format=format_of(rebuilt.target),
            layers=layers,
            blocks=blocks,
            breakpoints=[
                BreakpointOut(position=b.position, where=b.where, ttl=b.ttl, tokens=b.tokens, cacheable=b.cacheable)
                for b in layout.breakpoints
            ],
            provider=figures_of_usage(rebuilt.call.usage),
            simulated=figures_of_simulation(usage),
            stable_version=record.stable_version if record is not None else None,
            stable_digest=record.stable_digest if record is not None else None,
            stable_recorded=rebuilt.stable_recorded,
            composition=_composition(rebuilt, self.estimator),
            notes=[
                *rebuilt.notes,
                replay_note(index, replay_from),
                *layout.notes[:-1],  # the last layout note is about a first request
            ],
        )


def replay_note(index: int, replay_from: int) -> str:
    if replay_from == 0:
        return "The simulator replayed every request of the log before this one, in order."
    return (
        f"The simulator replayed the requests from #{replay_from} on, starting with empty caches "
        f"({index - replay_from} before this one): entries written earlier and read here without being written "
        "again in between are not seen."
    )


def _block_tokens(block: Mapping[str, Any], estimator: TokenEstimator) -> int:
    """A block's tokens as the cache simulator and `cache_layout` count them (canonical JSON, no marker)."""
    if "cache_control" in block:
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return estimator.count(_ENCODER.encode(block).decode())


def _anthropic_layer_totals(
    rebuilt: Rebuilt, estimator: TokenEstimator, memo: dict[int, tuple[object, int]]
) -> dict[str, int]:
    """Tokens per layer of an Anthropic body, counting each shared history message once (see `_block_tokens`)."""
    body = rebuilt.body
    totals: dict[str, int] = dict.fromkeys(LAYER_NAMES, 0)
    for tool in body.get("tools") or ():
        totals["stable"] += _block_tokens(tool, estimator)
    for block in body.get("system") or ():
        totals["stable"] += _block_tokens(block, estimator)
    tail = rebuilt.turn.tail
    context = bool(rebuilt.turn.stable.context_parts)
    one_shots = _one_shot_tokens(rebuilt.record, estimator)
    for m, message in enumerate(body.get("messages") or ()):
        blocks = message.get("content") or ()
        if m == 0 and context:
            totals["stable"] += sum(_block_tokens(b, estimator) for b in blocks)
        elif m >= rebuilt.current_start:
            for block in blocks:
                tokens = _block_tokens(block, estimator)
                if tail and block.get("type") == "text" and block.get("text") == tail:
                    volatile, one_shot = _split_tail(tokens, one_shots)
                    totals["tail"] += volatile
                    totals["one_shot"] += one_shot
                else:
                    totals["current"] += tokens
        else:
            held = memo.get(id(message))
            if held is None or held[0] is not message:
                held = (message, sum(_block_tokens(b, estimator) for b in blocks))
                memo[id(message)] = held
            totals["history"] += held[1]
    return totals


def _composition(rebuilt: Rebuilt, estimator: TokenEstimator) -> list[ComponentOut]:
    """The request component by component: `lamina.reports` over the rebuilt turn and its tool loop."""
    continuation = rebuilt.sent[len(rebuilt.turn.history) :]
    composition = compose_turn(rebuilt.turn, continuation, estimator=estimator)
    return [ComponentOut(kind=c.kind, name=c.name, tokens=c.tokens) for c in composition.components if c.tokens]


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


def _message_index(where: str) -> int | None:
    match = _MESSAGE_INDEX.match(where)
    return int(match.group(1)) if match else None


def _layer_of(block: LayoutBlock, rebuilt: Rebuilt) -> LayerName:
    if block.region == "stable" or block.where.startswith(("tools", "system", "instructions")):
        return "stable"
    if block.label.startswith("tail:"):
        return "tail"
    index = _message_index(block.where)
    if index is not None and index >= rebuilt.current_start:
        return "current"
    return "history"


def _block_out(block: LayoutBlock, layer: LayerName) -> BlockOut:
    return BlockOut(
        position=block.position,
        where=block.where,
        label=block.label,
        layer=layer,
        tokens=block.tokens,
        cumulative=block.cumulative,
        region=block.region,
        breakpoint=block.breakpoint,
    )


def _one_shot_tokens(record: TurnRecord | None, estimator: TokenEstimator) -> list[tuple[PartRecord, int]]:
    if record is None:
        return []
    return [(p, estimator.count(render_tail((), (p,)))) for p in record.one_shots]


def _split_tail(tail_tokens: int, one_shots: Sequence[tuple[PartRecord, int]]) -> tuple[int, int]:
    """(volatile, one-shot) tokens of a tail block of `tail_tokens`."""
    one_shot = min(sum(t for _, t in one_shots), tail_tokens)
    return tail_tokens - one_shot, one_shot


def _layer_totals(rebuilt: Rebuilt, layout: CacheLayout, estimator: TokenEstimator) -> dict[str, int]:
    totals: dict[str, int] = dict.fromkeys(LAYER_NAMES, 0)
    one_shots = _one_shot_tokens(rebuilt.record, estimator)
    for block in layout.blocks:
        layer = _layer_of(block, rebuilt)
        if layer == "tail":
            volatile, one_shot = _split_tail(block.tokens, one_shots)
            totals["tail"] += volatile
            totals["one_shot"] += one_shot
        else:
            totals[layer] += block.tokens
    return totals


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_BOUND else text[:TEXT_BOUND]


def _part(key: str, text: str, *, tokens: int, tier: Tier | None, provenance: str, authority: str) -> LayerPart:
    return LayerPart(
        key=key,
        tier=int(tier) if tier is not None else None,
        tier_name=TIER_LABELS[tier] if tier is not None else "",
        provenance=provenance,
        authority=authority,
        tokens=tokens,
        text=_cut(text),
        text_chars=len(text),
    )


def _layers(
    rebuilt: Rebuilt, layout: CacheLayout, blocks: Sequence[BlockOut], estimator: TokenEstimator
) -> list[Layer]:
    turn = rebuilt.turn
    parts: dict[LayerName, list[LayerPart]] = {name: [] for name in LAYER_NAMES}
    tokens = dict.fromkeys(LAYER_NAMES, 0)
    one_shots = _one_shot_tokens(rebuilt.record, estimator)
    for block in blocks:
        if block.layer == "tail":
            volatile, one_shot = _split_tail(block.tokens, one_shots)
            tokens["tail"] += volatile
            tokens["one_shot"] += one_shot
        else:
            tokens[block.layer] += block.tokens
    for part in turn.stable.parts:
        parts["stable"].append(
            _part(
                part.key,
                part.text,
                tokens=estimator.count(part.text),
                tier=part.tier,
                provenance=part.provenance,
                authority=part.authority.value,
            )
        )
    if rebuilt.record is not None:
        for record in rebuilt.record.volatile:
            parts["tail"].append(
                _part(
                    record.key,
                    record.text,
                    tokens=estimator.count(render_tail((record,), ())),
                    tier=Tier.SESSION_STATE,
                    provenance=record.key,
                    authority=Authority.SYSTEM_RULE.value,
                )
            )
    for record, count in one_shots:
        parts["one_shot"].append(
            _part(
                record.key,
                record.text,
                tokens=count,
                tier=Tier.ONE_SHOT,
                provenance=f"outbox:{record.part_id}" if record.part_id else "outbox",
                authority=Authority.SYSTEM_RULE.value,
            )
        )
    if turn.summary:
        parts["history"].append(
            _part(
                "compaction summary",
                turn.summary,
                tokens=estimator.count(turn.summary),
                tier=Tier.HISTORY,
                provenance="compaction",
                authority=Authority.TOOL_OUTPUT.value,
            )
        )
    if turn.pinned:
        parts["history"].append(
            _part(
                "user's words",
                turn.pinned,
                tokens=estimator.count(turn.pinned),
                tier=Tier.HISTORY,
                provenance="compaction lane",
                authority=Authority.USER_DATA.value,
            )
        )
    layer: LayerName
    for layer in ("history", "current"):
        grouped = _grouped(b for b in blocks if b.layer == layer)
        for label, (count, total) in grouped.items():
            if label in ("compaction summary", "user's words") and layer == "history":
                continue
            tier = Tier.TOOL_RESULTS if label == "tool result" else Tier.HISTORY
            parts[layer].append(
                _part(
                    label,
                    f"{count} block{'s' if count != 1 else ''}",
                    tokens=total,
                    tier=tier,
                    provenance="session log",
                    authority=_authority_of_label(label),
                )
            )
    return [Layer(name=name, tokens=tokens[name], parts=parts[name]) for name in LAYER_NAMES]


def _grouped(blocks: Any) -> Mapping[str, tuple[int, int]]:
    grouped: dict[str, tuple[int, int]] = {}
    for block in blocks:
        label = "tool call" if block.label.startswith("tool call") else block.label
        count, total = grouped.get(label, (0, 0))
        grouped[label] = (count + 1, total + block.tokens)
    return grouped


def _authority_of_label(label: str) -> str:
    if label in ("tool result",):
        return Authority.TOOL_OUTPUT.value
    if label == "user message":
        return Authority.USER_DATA.value
    return "history"


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
