"""The transfer bundle's format: its member names, the manifest and the entries it lists (pure).

The layout is described in docs/session-log.md ("Transfer bundles").
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

import msgspec

from lamina.session._stamp import SUBFOLDERS

BUNDLE_FORMAT: Final = "lamina-session-bundle"
BUNDLE_VERSION: Final = 1
MANIFEST_NAME: Final = "manifest.json"
SUMMARY_NAME: Final = "transfer_summary.txt"
SESSION_PREFIX: Final = "session/"
PROVIDER_FOLDER: Final = "provider"
"""A session's copy of its provider's own transcript, when a backend keeps one."""
BUNDLE_FOLDERS: Final = (*SUBFOLDERS, PROVIDER_FOLDER)
CHUNK: Final = 1 << 20
"""Bytes read or written at a time when a member is copied."""
_Sha256 = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]
_Size = Annotated[int, msgspec.Meta(ge=0)]


class BundleFile(msgspec.Struct, frozen=True):
    """One member of a bundle as the manifest lists it."""

    path: str
    size: _Size
    sha256: _Sha256


class BundleManifest(msgspec.Struct, frozen=True, kw_only=True):
    """The bundle's table of contents (`manifest.json`)."""

    format: Literal["lamina-session-bundle"]
    version: Annotated[int, msgspec.Meta(ge=1, le=BUNDLE_VERSION)]
    session_id: str
    title: str = ""
    cwd: str = ""
    """The session's workspace at the source."""
    folder: str = ""
    """The session's folder at the source (paths in its entries start with it)."""
    created_at: float = 0.0
    exported_at: float = 0.0
    leaf_id: str | None = None
    provider_transcript: bool = False
    """Whether `session/provider/` holds the provider's own transcript."""
    files: tuple[BundleFile, ...]
