"""A model's reasoning block as the log keeps it: exactly as its provider returned it."""

from __future__ import annotations

from typing import Literal

import msgspec


class Reasoning(msgspec.Struct, frozen=True, kw_only=True):
    """One block of a model's reasoning, kept exactly as its provider returned it.

    Signed or encrypted content goes back to the provider that made it, unchanged; no other
    provider ever sees it (see `docs/reasoning.md`); a tool search's blocks too (`server_tool`).
    """

    provider: Literal["anthropic", "openai", "openai-compat"]
    """Whose content it is: Anthropic Messages, OpenAI Responses, or an OpenAI-compatible server."""
    kind: Literal["thinking", "redacted_thinking", "reasoning", "reasoning_content", "server_tool"]
    """Anthropic `thinking` or `redacted_thinking`, a Responses `reasoning` item, a server's `reasoning_content`,
    or a server tool's block (`server_tool`: `server_tool_use`, `tool_search_*` items; JSON in `data`)."""
    text: str = ""
    """The readable reasoning: Anthropic's thinking text (empty when omitted), a server's reasoning text."""
    signature: str = ""
    """Anthropic's signature of a thinking block."""
    data: str = ""
    """Opaque content: a redacted thinking block's data, a Responses item's `encrypted_content`."""
    item_id: str = ""
    """A Responses reasoning item's id (`rs_…`)."""
    summary: tuple[str, ...] = ()
    """A Responses reasoning item's summary texts, in order."""
    field: str = ""
    """For a server's reasoning: the message field it came in (`reasoning_content`, `reasoning`)."""

    @property
    def readable(self) -> str:
        """What can be read of it: its text, else its summaries (never a signature or encrypted data)."""
        return self.text or "\n\n".join(self.summary)
