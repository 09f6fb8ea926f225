"""A rebuilt request's layers: which layer each block of its body is in, their tokens and parts as shown (pure).

The blocks come from the one walk of a rendered body (`lamina.reports.body_blocks`), counted as the
budget's cache layout counts them (`lamina.reports.block_tokens`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from lamina.context import Authority, Tier, render_tail
from lamina.reports import TIER_LABELS, BodyBlock, CacheLayout, LayoutBlock, block_tokens, body_blocks, compose_turn
from lamina.serve._model import LAYER_NAMES, BlockOut, ComponentOut, Layer, LayerName, LayerPart
from lamina.serve._rebuilt import Rebuilt
from lamina.session import PartRecord, TurnRecord
from lamina.tokens import TokenEstimator

__all__ = ["TEXT_BOUND", "BlockTokens", "block_outs", "composition_of", "layer_totals", "layers"]

TEXT_BOUND: Final = 4_000
"""Characters of a part's text a layer carries (the whole text is in the log)."""


class BlockTokens:
    """Tokens of the history blocks the render cache shares between requests, by identity (the block kept alive)."""

    def __init__(self, estimator: TokenEstimator) -> None:
        self.estimator = estimator
        self._held: dict[int, tuple[object, int]] = {}

    def count(self, block: object) -> int:
        """The tokens of `block` (`lamina.reports.block_tokens`), counted once per block object."""
        held = self._held.get(id(block))
        if held is None or held[0] is not block:
            held = (block, block_tokens(block, self.estimator))
            self._held[id(block)] = held
        return held[1]


def layer_of(block: BodyBlock, current_start: int) -> LayerName:
    """The layer a block of a rebuilt body is in.

    Args:
        block: One block of the body.
        current_start: The index of the first message of the request's own turn.

    Returns:
        `stable` for the stable prefix, `tail` for this turn's tail, `current` for the rest of this
        turn, `history` for the earlier turns.
    """
    if block.stable or block.message is None:
        return "stable"
    if block.message < current_start:
        return "history"
    return "tail" if block.label.startswith("tail:") else "current"


def _layered(rebuilt: Rebuilt) -> Iterable[tuple[BodyBlock, LayerName]]:
    for block in body_blocks(rebuilt.body, rebuilt.target, turn=rebuilt.turn):
        yield block, layer_of(block, rebuilt.current_start)


def _one_shot_tokens(record: TurnRecord | None, estimator: TokenEstimator) -> list[tuple[PartRecord, int]]:
    if record is None:
        return []
    return [(p, estimator.count(render_tail((), (p,)))) for p in record.one_shots]


def _add(totals: dict[str, int], layer: LayerName, tokens: int, one_shots: Sequence[tuple[PartRecord, int]]) -> None:
    """Add a block's tokens to its layer; a tail block's one-shot share to `one_shot`."""
    if layer == "tail":
        one_shot = min(sum(t for _, t in one_shots), tokens)
        totals["tail"] += tokens - one_shot
        totals["one_shot"] += one_shot
    else:
        totals[layer] += tokens


def layer_totals(rebuilt: Rebuilt, memo: BlockTokens) -> dict[str, int]:
    """Tokens per layer of a rebuilt request, counting each shared history block once (see `BlockTokens`).

    Args:
        rebuilt: The request.
        memo: The session's memo of history blocks' tokens.

    Returns:
        Tokens per layer, every layer of `LAYER_NAMES` present.
    """
    totals: dict[str, int] = dict.fromkeys(LAYER_NAMES, 0)
    one_shots = _one_shot_tokens(rebuilt.record, memo.estimator)
    for block, layer in _layered(rebuilt):
        tokens = memo.count(block.block) if layer == "history" else block_tokens(block.block, memo.estimator)
        _add(totals, layer, tokens, one_shots)
    return totals


def block_outs(rebuilt: Rebuilt, layout: CacheLayout) -> list[BlockOut]:
    """The blocks of a rebuilt request's cache layout, each in its layer (the layout walks the same blocks)."""
    return [_block_out(b, layer) for b, (_, layer) in zip(layout.blocks, _layered(rebuilt), strict=True)]


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


def composition_of(rebuilt: Rebuilt, estimator: TokenEstimator) -> list[ComponentOut]:
    """The request component by component: `lamina.reports` over the rebuilt turn and its tool loop."""
    composition = compose_turn(rebuilt.turn, rebuilt.continuation, estimator=estimator)
    return [ComponentOut(kind=c.kind, name=c.name, tokens=c.tokens) for c in composition.components if c.tokens]


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


def layers(rebuilt: Rebuilt, blocks: Sequence[BlockOut], estimator: TokenEstimator) -> list[Layer]:
    """A rebuilt request's layers: each one's tokens (from its blocks) and its parts as the page lists them.

    Args:
        rebuilt: The request.
        blocks: Its blocks, each in its layer (`block_outs`).
        estimator: Counts the parts' texts.

    Returns:
        One layer per name of `LAYER_NAMES`, in order.
    """
    one_shots = _one_shot_tokens(rebuilt.record, estimator)
    tokens: dict[str, int] = dict.fromkeys(LAYER_NAMES, 0)
    for block in blocks:
        _add(tokens, block.layer, block.tokens, one_shots)
    parts: dict[LayerName, list[LayerPart]] = {
        "stable": _stable_parts(rebuilt, estimator),
        "history": [*_summary_parts(rebuilt, estimator), *_grouped_parts(blocks, "history")],
        "current": _grouped_parts(blocks, "current"),
        "tail": _tail_parts(rebuilt, estimator),
        "one_shot": [_one_shot_part(record, count) for record, count in one_shots],
    }
    return [Layer(name=name, tokens=tokens[name], parts=parts[name]) for name in LAYER_NAMES]


def _stable_parts(rebuilt: Rebuilt, estimator: TokenEstimator) -> list[LayerPart]:
    return [
        _part(
            part.key,
            part.text,
            tokens=estimator.count(part.text),
            tier=part.tier,
            provenance=part.provenance,
            authority=part.authority.value,
        )
        for part in rebuilt.turn.stable.parts
    ]


def _tail_parts(rebuilt: Rebuilt, estimator: TokenEstimator) -> list[LayerPart]:
    if rebuilt.record is None:
        return []
    return [
        _part(
            record.key,
            record.text,
            tokens=estimator.count(render_tail((record,), ())),
            tier=Tier.SESSION_STATE,
            provenance=record.key,
            authority=Authority.SYSTEM_RULE.value,
        )
        for record in rebuilt.record.volatile
    ]


def _one_shot_part(record: PartRecord, count: int) -> LayerPart:
    return _part(
        record.key,
        record.text,
        tokens=count,
        tier=Tier.ONE_SHOT,
        provenance=f"outbox:{record.part_id}" if record.part_id else "outbox",
        authority=Authority.SYSTEM_RULE.value,
    )


def _summary_parts(rebuilt: Rebuilt, estimator: TokenEstimator) -> list[LayerPart]:
    turn = rebuilt.turn
    shown = (
        ("compaction summary", turn.summary, "compaction", Authority.TOOL_OUTPUT),
        ("user's words", turn.pinned, "compaction lane", Authority.USER_DATA),
    )
    return [
        _part(name, text, tokens=estimator.count(text), tier=Tier.HISTORY, provenance=where, authority=who.value)
        for name, text, where, who in shown
        if text
    ]


def _grouped_parts(blocks: Sequence[BlockOut], layer: LayerName) -> list[LayerPart]:
    """The blocks of a layer grouped by label, one part each (the history's summary and lane are parts already)."""
    shown: list[LayerPart] = []
    for label, (count, total) in _grouped(b for b in blocks if b.layer == layer).items():
        if label in ("compaction summary", "user's words") and layer == "history":
            continue
        shown.append(
            _part(
                label,
                f"{count} block{'s' if count != 1 else ''}",
                tokens=total,
                tier=Tier.TOOL_RESULTS if label == "tool result" else Tier.HISTORY,
                provenance="session log",
                authority=_authority_of_label(label),
            )
        )
    return shown


def _grouped(blocks: Iterable[BlockOut]) -> Mapping[str, tuple[int, int]]:
    grouped: dict[str, tuple[int, int]] = {}
    for block in blocks:
        label = "tool call" if block.label.startswith("tool call") else block.label
        count, total = grouped.get(label, (0, 0))
        grouped[label] = (count + 1, total + block.tokens)
    return grouped


def _authority_of_label(label: str) -> str:
    if label == "tool result":
        return Authority.TOOL_OUTPUT.value
    if label == "user message":
        return Authority.USER_DATA.value
    return "history"
