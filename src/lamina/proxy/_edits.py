"""The edits the proxy may make to a request, each off by default (pure).

With every edit off the body is forwarded as the client sent it, byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lamina.proxy._exchange import ReadRequest


@dataclass(frozen=True, slots=True)
class EditSettings:
    """Which edits the proxy may make (all off: an exact pass-through)."""

    breakpoints: bool = False
    """Anthropic: add the rolling cache breakpoint a client left out, within the four the API allows."""

    @property
    def any(self) -> bool:
        """Whether any edit is on."""
        return self.breakpoints


def edit_request(read: ReadRequest, raw: bytes, settings: EditSettings) -> tuple[bytes, tuple[Mapping[str, Any], ...]]:
    """The body to forward for `read` (whose bytes are `raw`), and the edits made (none: `raw` itself)."""
    if not settings.any:
        return raw, ()
    return raw, ()
