"""Placement for SDK-managed backends such as the Claude Agent SDK (pure).

The backend owns the system prompt, the transcript, resume and compaction, so Lamina sends only
the new user message: its attachments as text (notes for images, converted text for documents),
its text, then the stable parts (when the backend has not seen this version in its current
context), then the volatile and one-shot tail. The stable parts travel with the first turn of
every provider session (a new session, a recovered one), after a compaction (Lamina's or the
backend's own) and whenever they change, not with every turn: what the backend has seen is
tracked per provider session in the log, so a process that resumes the session knows it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lamina.context import TurnContext
from lamina.defang import render_block
from lamina.session import ProviderSession


@dataclass(frozen=True, slots=True)
class SdkManagedPrompt:
    """What an SDK-managed backend is given for one turn."""

    prompt: str
    """The user message with its tail."""
    session_id: str
    """Lamina's session id."""
    resume: ProviderSession | None = None
    """The provider session to continue (as persisted in the log); None: the provider's own memory of `session_id`."""
    new_session: bool = False
    """Start a fresh provider session whatever the provider remembers (the log says there is none)."""
    keep_session: bool = True
    """Remember the provider session this request ends in; False for one-off requests (summaries)."""
    command: bool = False
    """`prompt` is a command of the backend's own (`/compact`), not verbatim text for the model."""


def render_sdk_managed(turn: TurnContext, attached: Sequence[str] = ()) -> SdkManagedPrompt:
    """The prompt for one turn; `attached` are the user's attachments as text (notes or converted text)."""
    pieces = [*attached, turn.user_text]
    if not turn.stable_seen:
        pieces += [render_block("stable_context", p.text, key=p.key) for p in turn.stable.parts if p.text]
    if turn.tail:
        pieces.append(turn.tail)
    return SdkManagedPrompt(prompt="\n\n".join(pieces), session_id=turn.session_id)
