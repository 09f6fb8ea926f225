"""Attachments as the engine handles them: what the model takes, the files stored, how requests show them (I/O)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lamina.attachments import AttachmentInput, AttachmentRenderer, MediaSupport
from lamina.context import AttachmentBlocks
from lamina.engine._host import EngineHost
from lamina.placement import AnthropicTarget, OpenAIChatTarget, OpenAIResponsesTarget, RenderCache, RenderTarget
from lamina.session import AttachmentRef


class MediaMixin(EngineHost):
    """The attachment methods of `ContextEngine`."""

    @property
    def media(self) -> MediaSupport | None:
        """What the model takes besides text; None: what the target's official API takes."""
        return self._media

    @media.setter
    def media(self, value: MediaSupport | None) -> None:
        if value != self._media:
            self._media = value
            self._render_cache = RenderCache()  # completed turns were converted for the old model

    def attach(self, items: Sequence[AttachmentInput], *, base: Path | None = None) -> tuple[AttachmentRef, ...]:
        """Check, convert and store files for the next user message (see `AttachmentStore.add_all`).

        Raises:
            AttachmentError: a file cannot be used; nothing was stored and nothing logged.
        """
        return self.attachments.add_all(items, base=base)

    def attachment_blocks(self, target: RenderTarget) -> AttachmentBlocks:
        """How this session's attached files are shown in requests for `target` (and counted by reports)."""
        match target:
            case AnthropicTarget():
                support = self._media or MediaSupport(vision=True, pdf=True)
                return AttachmentRenderer(self.attachments, "anthropic", support)
            case OpenAIChatTarget() | OpenAIResponsesTarget():
                return AttachmentRenderer(self.attachments, "openai", self._media or MediaSupport(vision=True))
            case _:  # a text-only prompt: notes for images, converted text for documents
                return AttachmentRenderer(self.attachments, "anthropic", MediaSupport())
