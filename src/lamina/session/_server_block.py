"""A provider's own compaction block as the log keeps it (pure): see docs/compaction.md, "Server compaction"."""

from __future__ import annotations

from typing import Literal

import msgspec


class ServerCompaction(msgspec.Struct, frozen=True, kw_only=True):
    """A provider's own compaction: its signed block or encrypted item, kept byte for byte (invariant 9).

    Requests to the provider that made it send `block` first, as it came; no other provider ever
    sees it. Lamina's ledger, the user's words lane and the state restatement follow it, as they
    follow a summary of Lamina's own (see docs/compaction.md, "Server compaction").
    """

    provider: Literal["anthropic", "openai"]
    """Whose it is: Anthropic Messages or OpenAI Responses."""
    form: Literal["summarize", "compact_20260112", "responses_compact"]
    """How it was made: Anthropic's standalone `compaction` request, its inline edit, OpenAI's `/responses/compact`."""
    model: str
    """The model that wrote it."""
    block: str
    """The `compaction` block (Anthropic) or item (OpenAI) as JSON text, exactly as the response held it."""
    readable: str = ""
    """What can be read of it: Anthropic's `content` ("" for OpenAI's encrypted item)."""


def server_block(server: ServerCompaction | msgspec.UnsetType) -> ServerCompaction | None:
    """A boundary's `server` field as an optional block (None: a compaction of Lamina's own, or an older log)."""
    return None if isinstance(server, msgspec.UnsetType) else server
