"""Requests as the model in use takes them: attachments per render target, completed turns reused (I/O: the files)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lamina.attachments import AttachmentRenderer, AttachmentStore, MediaSupport
from lamina.context import AttachmentBlocks, TurnContext
from lamina.placement import (
    AnthropicTarget,
    OpenAIChatTarget,
    OpenAIResponsesTarget,
    RenderCache,
    RenderedRequest,
    RenderTarget,
    render,
)
from lamina.session import LogEntry


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


class RequestRenderer:
    """Renders a session's requests, reusing completed turns' rendering while the history and the model's media hold."""

    def __init__(self, attachments: AttachmentStore, media: Callable[[], MediaSupport] | None) -> None:
        """A renderer with nothing rendered yet.

        Args:
            attachments: The session's stored attachments.
            media: What the model takes besides text, read at each request (None: what the target's API takes).
        """
        self._attachments = attachments
        self._media = media
        self._rendered_for: MediaSupport | None = None
        self._cache = RenderCache()

    def blocks(self, target: RenderTarget) -> AttachmentBlocks:
        """How the session's attached files are shown in requests for `target`."""
        return attachment_blocks(self._attachments, target, self._media() if self._media is not None else None)

    def render(self, turn: TurnContext, target: RenderTarget, continuation: Sequence[LogEntry]) -> RenderedRequest:
        """The request of `turn` with `continuation` (its tool loop so far), for `target`."""
        media = self._media() if self._media is not None else None
        if media != self._rendered_for:  # completed turns were converted for another model
            self._rendered_for, self._cache = media, RenderCache()
        blocks = attachment_blocks(self._attachments, target, media)
        return render(turn, target, continuation=continuation, cache=self._cache, attachments=blocks)

    def forget(self) -> None:
        """A prune rewrote the history: completed turns are rendered again."""
        self._cache = RenderCache()
