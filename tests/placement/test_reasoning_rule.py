"""The one replay rule of reasoning blocks (`lamina.placement.replayed`), over arbitrary conversations."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from lamina.context import Message, ReasoningBlock, TextBlock, ToolUseBlock
from lamina.defang import trusted
from lamina.placement import ReasoningOwner, foreign_reasoning, replayed
from lamina.session import Reasoning

OWNERS: tuple[ReasoningOwner, ...] = ("anthropic", "openai", "openai-compat")
KINDS = {"anthropic": "thinking", "openai": "reasoning", "openai-compat": "reasoning_content"}


def _reasoning(owner: ReasoningOwner, n: int) -> ReasoningBlock:
    kind = KINDS[owner]
    return ReasoningBlock(Reasoning(provider=owner, kind=kind, text=f"thought {n}", signature=f"sig{n}"))  # type: ignore[arg-type]


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    messages: list[Message] = []
    for n in range(draw(st.integers(1, 6))):
        messages.append(Message("user", (TextBlock(trusted(f"ask {n}")),)))
        blocks: list[object] = [_reasoning(o, n) for o in draw(st.lists(st.sampled_from(OWNERS), max_size=3))]
        if draw(st.booleans()) or not blocks:
            blocks.append(TextBlock(trusted(f"answer {n}")))
        if draw(st.booleans()):
            blocks.append(ToolUseBlock(f"call-{n}", "Read", {"path": "a"}))
        messages.append(Message("assistant", tuple(blocks)))  # type: ignore[arg-type]  # may hold reasoning only
    return messages


def _reasoning_of(messages: list[Message]) -> list[Reasoning]:
    return [b.reasoning for m in messages for b in m.blocks if isinstance(b, ReasoningBlock)]


@given(conversations(), st.sampled_from(OWNERS), st.booleans(), st.sampled_from(["keep", "drop"]), st.booleans())
def test_no_block_crosses_providers_and_the_conversation_stays_well_formed(
    messages: list[Message], owner: ReasoningOwner, current: bool, history: str, open_loop: bool
) -> None:
    out = replayed(messages, owner, current=current, history=history, open_loop=open_loop)  # type: ignore[arg-type]
    assert all(r.provider == owner for r in _reasoning_of(out))
    assert foreign_reasoning(out, owner) == 0
    assert all(m.blocks for m in out)
    assert all(a.role != b.role for a, b in itertools.pairwise(out))
    others = [b for m in messages for b in m.blocks if not isinstance(b, ReasoningBlock)]
    assert [b for m in out for b in m.blocks if not isinstance(b, ReasoningBlock)] == others  # nothing else touched


@given(conversations(), st.sampled_from(OWNERS))
def test_the_turn_being_sent_and_kept_history_send_every_own_block_unchanged_in_order(
    messages: list[Message], owner: ReasoningOwner
) -> None:
    own = [r for r in _reasoning_of(messages) if r.provider == owner]
    assert _reasoning_of(replayed(messages, owner, current=True, history="drop")) == own
    assert _reasoning_of(replayed(messages, owner, current=False, history="keep")) == own


@given(conversations(), st.sampled_from(OWNERS), st.booleans())
def test_dropped_history_keeps_only_what_a_provider_requires(
    messages: list[Message], owner: ReasoningOwner, open_loop: bool
) -> None:
    out = replayed(messages, owner, current=False, history="drop", open_loop=open_loop)
    last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    required = [
        b.reasoning
        for i, m in enumerate(messages)
        for b in m.blocks
        if isinstance(b, ReasoningBlock)
        and b.reasoning.provider == owner
        and (
            (open_loop and i == last)
            or (owner == "openai-compat" and any(isinstance(x, ToolUseBlock) for x in m.blocks))
        )
    ]
    assert _reasoning_of(out) == required
