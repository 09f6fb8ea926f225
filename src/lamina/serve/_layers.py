"""A rebuilt request's layers: which layer each block of its body is in, their tokens and parts as shown (pure).

The blocks come from the one walk of a rendered body (`lamina.reports.body_blocks`), counted as the
budget's cache layout counts them (`lamina.reports.block_tokens`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from lamina.context import Authority, Tier, render_tail
from lamina.reports import TIER_LABELS, BodyBlock, CacheLayout, LayoutBlock, block_tokens, body_blocks, compose_turn
from lamina.serve._calls import calls_of_block
from lamina.serve._model import LAYER_NAMES, BlockOut, CallOut, ComponentOut, Layer, LayerName, LayerPart
from lamina.serve._rebuilt import Rebuilt
from lamina.session import PartRecord, TurnRecord
from lamina.tokens import TokenEstimator

__all__ = ["TEXT_BOUND", "BlockTokens", "block_outs", "composition_of", "layer_totals", "layers"]

TEXT_BOUND: Final = 4_000
"""Characters of a part's text a layer carries (the whole text is in the log)."""
CONVERSATION_ROWS: Final = 150
"""Blocks of the conversation a layer lists, the newest (the whole body downloads)."""


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


def _part(
    key: str,
    text: str,
    *,
    tokens: int,
    tier: Tier | None,
    provenance: str,
    authority: str,
    role: str = "",
    calls: Sequence[CallOut] = (),
    reasoning: tuple[str, int] = ("", 0),
) -> LayerPart:
    return LayerPart(
        key=key,
        tier=int(tier) if tier is not None else None,
        tier_name=TIER_LABELS[tier] if tier is not None else "",
        provenance=provenance,
        authority=authority,
        tokens=tokens,
        text=_cut(text),
        text_chars=len(text),
        role=role,
        calls=list(calls),
        reasoning=reasoning[0],
        sealed=reasoning[1],
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
        "history": _conversation(rebuilt, blocks, "history"),  # the summary and the lane as sent, in their blocks
        "current": _conversation(rebuilt, blocks, "current"),
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


def _text_of(block: object) -> str:
    """The text a block of the conversation carries, as sent (a tool call's input is shown as a call)."""
    if isinstance(block, str):
        return block
    if not isinstance(block, Mapping):
        return ""
    kind = block.get("type")
    if kind in ("image", "image_url", "input_image", "document", "file"):
        return f"[{kind}]"
    for key in ("text", "output"):
        if isinstance(block.get(key), str):
            return str(block[key])
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(c) for c in content)
    return ""


def _reasoning_of(block: object) -> tuple[str, str, int] | None:
    """A reasoning block's kind, readable text and sealed characters (signature, encrypted data); None for others.

    Anthropic `thinking` and `redacted_thinking` blocks, a Responses `reasoning` item, and what an
    OpenAI Chat assistant message carries besides its content when a server's reasoning is in it.
    """
    if not isinstance(block, Mapping):
        return None
    kind = block.get("type")
    if kind == "thinking":
        return "thinking", str(block.get("thinking") or ""), len(str(block.get("signature") or ""))
    if kind == "redacted_thinking":
        return "redacted_thinking", "", len(str(block.get("data") or ""))
    if kind == "reasoning":
        summary = [str(s.get("text", "")) for s in block.get("summary") or () if isinstance(s, Mapping)]
        return "reasoning", "\n\n".join(summary), len(str(block.get("encrypted_content") or ""))
    if kind is None:  # a Chat message's meta block: the field the server's reasoning came in
        for field in ("reasoning_content", "reasoning"):
            if isinstance(block.get(field), str):
                return "reasoning_content", str(block[field]), 0
    return None


def _roles(body: object) -> list[str]:
    items = (body.get("messages") or body.get("input") or []) if isinstance(body, Mapping) else []
    return [str(m.get("role") or m.get("type") or "") if isinstance(m, Mapping) else "" for m in items]


def _conversation(rebuilt: Rebuilt, blocks: Sequence[BlockOut], layer: LayerName) -> list[LayerPart]:
    """The blocks of a layer as sent, one part each: its text, or the tool calls it holds (the newest ones)."""
    roles = _roles(rebuilt.body)
    chosen = [(b, out) for (b, _), out in zip(_layered(rebuilt), blocks, strict=True) if out.layer == layer]
    left_out = max(len(chosen) - CONVERSATION_ROWS, 0)
    shown: list[LayerPart] = []
    if left_out:
        note = f"{left_out:,} earlier blocks of this layer are not listed; the whole request body downloads below."
        shown.append(_part("earlier blocks", note, tokens=0, tier=None, provenance="", authority=""))
    for block, out in chosen[left_out:]:
        label = "tool call" if block.label.startswith("tool call") else block.label
        thought = _reasoning_of(block.block)
        shown.append(
            _part(
                block.label,
                _text_of(block.block) if thought is None else thought[1],
                tokens=out.tokens,
                tier=Tier.TOOL_RESULTS if label == "tool result" else Tier.HISTORY,
                provenance=block.where,
                authority=_authority_of_label(label),
                role=roles[block.message] if block.message is not None and block.message < len(roles) else "",
                calls=calls_of_block(block.block),
                reasoning=("", 0) if thought is None else (thought[0], thought[2]),
            )
        )
    return shown


def _authority_of_label(label: str) -> str:
    if label == "tool result":
        return Authority.TOOL_OUTPUT.value
    if label == "user message":
        return Authority.USER_DATA.value
    return "history"
