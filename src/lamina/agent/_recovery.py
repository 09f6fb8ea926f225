"""The recovery block: what a fresh provider session is told when the old one cannot be resumed (pure).

`recovery_text` builds it from log entries before the message being sent: the newest user and
assistant messages within a token budget, one neutralised line each, shown oldest first. How it
is delivered, and why nothing in it is parsed: `docs/agent.md`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from lamina.compaction import clip_text
from lamina.defang import neutralise
from lamina.session import AssistantMessage, LogEntry, UserMessage
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator

__all__ = [
    "DEFAULT_RECOVERY_TOKENS",
    "RECOVERY_KIND",
    "RecoveryBlock",
    "recovery_text",
]

DEFAULT_RECOVERY_TOKENS: Final = 4_000
"""Budget of a recovery block, in estimated tokens."""

RECOVERY_KIND: Final = "recovery"
"""The one-shot kind of a recovery block."""

_MESSAGE_SHARE: Final = 2
"""One message takes at most 1/2 of the budget, so one huge message cannot crowd out every other one."""
_MIN_MESSAGE_TOKENS: Final = 16


@dataclass(frozen=True, slots=True)
class RecoveryBlock:
    """A recovery block and what it holds."""

    text: str
    shown: int
    """Messages shown (whole or clipped)."""
    left_out: int
    """Older messages that did not fit the budget."""


def recovery_text(
    entries: Sequence[LogEntry],
    *,
    summary: str | None = None,
    budget_tokens: int = DEFAULT_RECOVERY_TOKENS,
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
    reason: str = "",
) -> RecoveryBlock | None:
    """The recovery block for a fresh provider session, from the user and assistant messages in `entries`.

    Args:
        entries: The conversation before the message being sent (the caller leaves that one out).
        summary: The latest compaction summary, shown when the budget leaves room after the messages.
        budget_tokens: Tokens for the messages, newest first, and then the summary.
        estimator: Counts the tokens.
        reason: Why the old session could not be resumed, told to the model.

    Returns:
        The block; None when there is nothing to recover (no earlier message and no summary).
    """
    messages = [e for e in entries if isinstance(e, UserMessage | AssistantMessage) and e.text.strip()]
    if not messages and not summary:
        return None
    cap = max(_MIN_MESSAGE_TOKENS, budget_tokens // _MESSAGE_SHARE)
    left = budget_tokens
    kept: list[str] = []
    for entry in reversed(messages):  # newest first: the budget goes to the latest messages
        role = "user" if isinstance(entry, UserMessage) else "assistant"
        text, omitted = clip_text(" ⏎ ".join(entry.text.split("\n")), min(cap, left), estimator)
        if omitted:
            text = f"{text} [… {omitted:,} characters left out …]"
        line = f"- {role}: {neutralise(text)}"
        cost = estimator.count(line)
        if kept and cost > left:
            break
        kept.append(line)
        left -= cost
        if left <= _MIN_MESSAGE_TOKENS:
            break
    left_out = len(messages) - len(kept)
    why = f" ({reason})" if reason else ""
    head = [
        f"The provider session that held this conversation could not be resumed{why}, so this is a fresh one. "
        "Here is the conversation so far, as Lamina's session log keeps it, for context only: it is not a new "
        "request, and the user's new message follows."
    ]
    if summary and estimator.count(summary) <= left:
        head.append(f"Summary of the earlier conversation:\n{neutralise(summary)}")
    elif summary:
        left_out += 1  # the summary did not fit: say something was left out
    if left_out:
        head.append(f"({left_out} earlier item(s) left out; the session log keeps every message.)")
    if kept:
        head.append("The most recent messages, oldest first, one line each:\n" + "\n".join(reversed(kept)))
    body = "\n\n".join(head)
    return RecoveryBlock(body, len(kept), left_out)
