"""Which reasoning blocks go back to the provider, decided in one place for every renderer (pure).

A block goes back only to the provider that made it. The turn being sent keeps every block of its
provider, unchanged and in order (Anthropic refuses a tool loop whose thinking changed; Responses
with `store: false` needs the encrypted items). Completed turns keep theirs (`history="keep"`: the
cached prefix holds) or drop them (`"drop"`), except an OpenAI-compatible server's reasoning before
tool calls, which DeepSeek requires. The rules and their reasons: `docs/reasoning.md`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeAlias

from lamina.context import Block, Message, ReasoningBlock, ToolUseBlock
from lamina.placement._targets import AnthropicTarget, OpenAIChatTarget, OpenAIResponsesTarget, RenderTarget

ReasoningOwner: TypeAlias = Literal["anthropic", "openai", "openai-compat"]
"""Whose reasoning a request format carries: Anthropic Messages, OpenAI Responses, Chat Completions."""


def replayed(
    messages: Sequence[Message],
    owner: ReasoningOwner,
    *,
    current: bool,
    history: Literal["keep", "drop"] = "keep",
    open_loop: bool = False,
) -> list[Message]:
    """`messages` with only the reasoning blocks that go back to `owner`.

    Args:
        messages: One turn's messages (or several completed turns').
        owner: The provider the request goes to.
        current: Whether they are the turn being sent (its tool loop: every own block stays).
        history: For completed turns: keep their reasoning or drop it.
        open_loop: The last assistant message here ends in tool calls that the next user message
            answers (a turn interrupted, a branch inside a tool loop): its reasoning stays, as the
            turn being sent's would.

    Returns:
        The messages, reasoning filtered; a message left empty is dropped and its neighbours of the
        same role merged, so the conversation stays well-formed.
    """
    if not any(isinstance(b, ReasoningBlock) for m in messages for b in m.blocks):
        return list(messages)
    out: list[Message] = []
    last_assistant = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    for index, message in enumerate(messages):
        calls = any(isinstance(b, ToolUseBlock) for b in message.blocks)
        whole = current or (open_loop and index == last_assistant)
        blocks = tuple(b for b in message.blocks if _kept(b, owner, current=whole, history=history, calls=calls))
        if not blocks:
            continue
        if out and out[-1].role == message.role:
            out[-1] = Message(message.role, (*out[-1].blocks, *blocks))
        else:
            out.append(Message(message.role, blocks))
    return out


def _kept(block: Block, owner: ReasoningOwner, *, current: bool, history: str, calls: bool) -> bool:
    if not isinstance(block, ReasoningBlock):
        return True
    if block.reasoning.provider != owner:
        return False
    if current or history == "keep" or block.reasoning.kind == "server_tool":
        return True  # a tool search's blocks stay: the deferred tools its references loaded are called later
    return owner == "openai-compat" and calls


def foreign_reasoning(messages: Sequence[Message], owner: ReasoningOwner) -> int:
    """How many reasoning blocks in `messages` another provider made (they are never sent to `owner`)."""
    return sum(1 for m in messages for b in m.blocks if isinstance(b, ReasoningBlock) and b.reasoning.provider != owner)


def reasoning_owner(target: RenderTarget) -> ReasoningOwner | None:
    """Whose reasoning requests in `target`'s format carry (None: a backend that keeps its own transcript)."""
    match target:
        case AnthropicTarget():
            return "anthropic"
        case OpenAIResponsesTarget():
            return "openai"
        case OpenAIChatTarget():
            return "openai-compat"
        case _:
            return None
