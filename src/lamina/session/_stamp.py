"""What every store stamps on what it keeps: session and entry ids, titles, text UTF-8 can hold (no I/O)."""

from __future__ import annotations

import re
import secrets
import threading
import time
from typing import Any, Final, TypeVar

import msgspec

from lamina.errors import UsageError
from lamina.session._entries import Entry, encode_entry

SUBFOLDERS: Final = ("attachments", "data", "plans")
"""The folders of a session's files."""
TITLE_MAX_CHARS: Final = 120
_SESSION_ID_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

E = TypeVar("E", bound=Entry)

_id_lock: Final = threading.Lock()
_last_id_us = 0


def _new_entry_id() -> str:
    """16 hex digits: microseconds since the epoch (13, strictly increasing in this process) and 3 random.

    Ids made later sort after earlier ones, so a writer that resumed from the tail still knows a new
    id is not in the older part of the log (see `Canonical.distinct`).
    """
    global _last_id_us
    with _id_lock:
        _last_id_us = max(time.time_ns() // 1_000, _last_id_us + 1)
        micros = _last_id_us
    return f"{micros:013x}{secrets.token_hex(2)[1:]}"


def new_session_id(now: float) -> str:
    """A fresh session id: the UTC time and six random hex digits."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(now)) + "-" + secrets.token_hex(3)


def check_session_id(session_id: str) -> str:
    """Reject ids that could name a path outside the store (`..`, `/`, empty)."""
    if not _SESSION_ID_RE.fullmatch(session_id) or ".." in session_id:
        raise UsageError(f"invalid session id {session_id!r}: use letters, digits, '.', '_' and '-' only")
    return session_id


def _title_from(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_MAX_CHARS else line[: TITLE_MAX_CHARS - 1] + "…"


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _show_surrogate(match: re.Match[str]) -> str:
    return f"[U+{ord(match.group()):04X}]"


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub(_show_surrogate, value)
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    return value


def _storable(entry: E) -> E:
    """`entry` as UTF-8 can hold it, so no text can make an append fail.

    A lone surrogate (a file name that is not UTF-8, read with surrogateescape) is shown as
    `[U+DCFF]`. The caller gets this copy back, so what is logged is what is sent.
    """
    try:
        encode_entry(entry)
    except UnicodeEncodeError:
        return msgspec.convert(_scrub(msgspec.to_builtins(entry)), type(entry))
    return entry
