"""The one door for untrusted text: neutralised, wrapped in a block nothing inside can end or forge (pure)."""

from __future__ import annotations

from lamina.defang._controls import show_controls
from lamina.defang._labelled_blocks import defang, escape_path, join, render_block, trusted
from lamina.defang._neutralise import contains_reserved_marker, neutralise
from lamina.defang._safe import Authority, SafeText
from lamina.defang._tags import RESERVED_TAG_NAMES

__all__ = [
    "RESERVED_TAG_NAMES",
    "Authority",
    "SafeText",
    "contains_reserved_marker",
    "defang",
    "escape_path",
    "join",
    "neutralise",
    "render_block",
    "show_controls",
    "trusted",
]
