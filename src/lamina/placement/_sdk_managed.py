"""Placement for SDK-managed backends such as the Claude Agent SDK (pure).

The backend owns the system prompt, the transcript, resume and compaction, so Lamina sends only
the new user message: its attachments as text (notes for images, converted text for documents),
its text, then the stable parts (when the backend has not seen this version in the current
context window), then the volatile and one-shot tail. The stable parts travel with
the first turn, after a compaction and whenever they change, not with every turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lamina.defang import render_block
from lamina.turn import TurnContext


@dataclass(frozen=True, slots=True)
class SdkManagedPrompt:
    """What an SDK-managed backend is given for one turn."""

    prompt: str
    """The user message with its tail."""
    session_id: str


def render_sdk_managed(turn: TurnContext, attached: Sequence[str] = ()) -> SdkManagedPrompt:
    """The prompt for one turn; `attached` are the user's attachments as text (notes or converted text)."""
    pieces = [*attached, turn.user_text]
    if not turn.stable_seen:
        pieces += [render_block("stable_context", p.text, key=p.key) for p in turn.stable.parts if p.text]
    if turn.tail:
        pieces.append(turn.tail)
    return SdkManagedPrompt(prompt="\n\n".join(pieces), session_id=turn.session_id)
