"""Attachments as requests show them: what the model in use takes, for each render target (pure)."""

from __future__ import annotations

from lamina.attachments import AttachmentRenderer, AttachmentStore, MediaSupport
from lamina.context import AttachmentBlocks
from lamina.placement import AnthropicTarget, OpenAIChatTarget, OpenAIResponsesTarget, RenderTarget


def attachment_blocks(store: AttachmentStore, target: RenderTarget, media: MediaSupport | None) -> AttachmentBlocks:
    """How the files in `store` are shown in requests for `target`.

    Args:
        store: The session's stored attachments.
        target: The render target.
        media: What the model takes besides text; None: what the target's official API takes.

    Returns:
        The renderer of the attachments' blocks.
    """
    match target:
        case AnthropicTarget():
            return AttachmentRenderer(store, "anthropic", media or MediaSupport(vision=True, pdf=True))
        case OpenAIChatTarget() | OpenAIResponsesTarget():
            return AttachmentRenderer(store, "openai", media or MediaSupport(vision=True))
        case _:  # a text-only prompt: notes for images, converted text for documents
            return AttachmentRenderer(store, "anthropic", MediaSupport())
