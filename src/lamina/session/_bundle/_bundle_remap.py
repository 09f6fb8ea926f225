"""Moving a log's paths to the machine it is imported on, reasoning left byte for byte as it was (pure).

Described in docs/session-log.md ("Transfer bundles").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Final

import msgspec

from lamina.errors import EntryDecodeError
from lamina.session._entries import AssistantMessage, decode_entry, encode_entry

_REASONING: Final = b'"reasoning":[{'
"""In a line of an assistant message with reasoning (a quoted one in a text is escaped: `\\"reasoning\\"`)."""


def remap_paths(log: bytes, pairs: list[tuple[str, str]]) -> bytes:
    """The log with each old path (at a path boundary, inside JSON strings) replaced by the new one.

    Only paths with at least one folder below the root are remapped (a workspace at `/` is not).
    One pass, longest old path first, so a new path is never remapped again (a store inside the
    workspace, say). The model's reasoning is never remapped: its provider signed it (or
    encrypted it) as it was, and refuses it changed.
    """
    table = {
        msgspec.json.encode(old)[1:-1]: msgspec.json.encode(new)[1:-1]
        for old, new in pairs
        if old != new and len(PurePosixPath(old).parts) >= 2  # never "/" or "": they are in every text
    }
    if not table:
        return log
    alternatives = b"|".join(re.escape(old) for old in sorted(table, key=len, reverse=True))
    # a path boundary: not where a longer name goes on (`/ws2`, `/ws-old`, `/ws.bak`)
    pattern = re.compile(b"(?:" + alternatives + rb")(?![A-Za-z0-9_\-]|\.[A-Za-z0-9_])")

    def remap(data: bytes) -> bytes:
        return pattern.sub(lambda match: table[match.group()], data)

    if _REASONING not in log:
        return remap(log)
    lines = log.split(b"\n")
    return b"\n".join(_remap_reasoned(line, remap) if _REASONING in line else remap(line) for line in lines)


def _remap_reasoned(line: bytes, remap: Callable[[bytes], bytes]) -> bytes:
    """One line remapped, the reasoning of the assistant message it holds kept as it was."""
    try:
        entry = decode_entry(line)
    except EntryDecodeError:
        return remap(line)
    if not isinstance(entry, AssistantMessage) or not entry.reasoning:
        return remap(line)
    moved = decode_entry(remap(encode_entry(msgspec.structs.replace(entry, reasoning=()))))
    kept = msgspec.structs.replace(moved, reasoning=entry.reasoning)
    return encode_entry(kept)
