"""Compaction's pieces around the pure `lamina.compaction`: its outcome, its events, the archive write."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lamina.session import CompactionBoundary

CompactionStatus = Literal["compacted", "already_compacted", "nothing_to_compact", "not_enough_freed"]


@dataclass(frozen=True, slots=True)
class CompactionEvent:
    """Compaction progress for a UI: `started`, `completed` or `failed`."""

    kind: Literal["started", "completed", "failed"]
    trigger: str
    message: str


@dataclass(frozen=True, slots=True)
class CompactionOutcome:
    """What a compaction request did."""

    status: CompactionStatus
    message: str
    boundary: CompactionBoundary | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    summary_by: str | None = None


def write_durably(folder: Path, name: str, text: str) -> None:
    """Write a file atomically and durably, before the entry that names it is appended.

    Archives of whole user messages have names unique to their content, so a retried or repeated
    write leaves the same bytes.
    """
    target = folder / name
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        # a lone surrogate cannot be encoded: shown as "?" in the file (the log keeps the exact text)
        with temporary.open("w", encoding="utf-8", errors="replace", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)
