"""What an interrupted tool call printed before the user stopped it, kept for its "interrupted" result.

A call cancelled mid-run (Ctrl-C in the chat) is recorded with the output it had printed so far
(its last `KEPT_CHARS` characters), so the model is told what it did rather than that it returned
nothing. The output is kept per task (a context variable), by call id, until the turn records it.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Final

from lamina.context import INTERRUPTED_RESULT

KEPT_CHARS: Final = 20_000
"""The most of an interrupted call's output its result keeps (the end of it)."""
INTERRUPTED_WITH_OUTPUT: Final = (
    "[interrupted by the user: this tool call did not complete; the output it printed until then follows]\n"
)
_SEEN: ContextVar[dict[str, str] | None] = ContextVar("lamina_interrupted_output", default=None)


class OutputSeen:
    """The output one running call has printed so far (its end, `KEPT_CHARS` at most)."""

    def __init__(self) -> None:
        self.text = ""

    def add(self, output: str) -> None:
        self.text = (self.text + output)[-KEPT_CHARS:]

    def keep(self, call_id: str) -> None:
        """The call was cancelled: keep its output for `interrupted_content` (in this task)."""
        if not self.text:
            return
        seen = _SEEN.get()
        if seen is None:
            seen = {}
            _SEEN.set(seen)
        seen[call_id] = self.text


def interrupted_content(call_id: str) -> str:
    """The result of a call the user interrupted: what it printed, when it printed anything (taken)."""
    seen = _SEEN.get()
    output = seen.pop(call_id, "") if seen is not None else ""
    return INTERRUPTED_WITH_OUTPUT + output if output else INTERRUPTED_RESULT
