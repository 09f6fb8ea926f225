"""The plot's series of each session kept on disk by log position, so a fresh server does not compute it again (I/O).

One file per session and shown leaf under the cache folder (`lamina serve` uses the user's cache
directory): the log position it was computed at (entries, last entry's id), the shown branch's
request indices and the summaries of the newest ones. A server that finds the log where the file
left it answers from the file; one that finds the log grown takes the file as its starting point
and computes only the new requests. A file that cannot be read or written is ignored: the series is
computed as before. docs/inspector.md ("The plot's cache") tells the rest.
"""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path
from typing import Final

import msgspec

from lamina._atomic import atomic_write
from lamina.serve._model import RequestSeries, RequestSummary

FORMAT: Final = 1
"""The files' format; a file of another one is not read (a new version computes the series again)."""


class SavedSeries(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What one session's series held at one log position."""

    format: int = FORMAT
    position: int
    """How many entries the log had."""
    last_id: str
    """The id of the log's last entry then (a log rewritten since is not taken for a grown one)."""
    calls: int
    """How many requests the log had."""
    leaf: str | None
    """The shown leaf the series was computed for (resolved: never None for a log with entries)."""
    indices: list[int]
    """The request indices on the path to `leaf`, oldest first."""
    summaries: dict[int, RequestSummary]
    """The shown requests' summaries."""
    replayed: dict[int, int]
    """For each shown request: the request its simulator replay started from."""
    series: RequestSeries


_DECODER: Final = msgspec.json.Decoder(SavedSeries)
_ENCODER: Final = msgspec.json.Encoder()


class PlotCache:
    """The cache folder of one store: a file per session and shown leaf."""

    def __init__(self, folder: Path, store_location: str) -> None:
        self.folder = folder / hashlib.sha256(store_location.encode()).hexdigest()[:16]
        self.writes = 0
        """How many files were written."""

    def _file(self, session_id: str, leaf: str | None) -> Path:
        name = hashlib.sha256((leaf if leaf is not None else "").encode()).hexdigest()[:24]
        return self.folder / session_id / f"{name}.json"

    def load(self, session_id: str, leaf: str | None) -> SavedSeries | None:
        """The series kept for `leaf` (None: the session's own leaf), or None (no file, or one that cannot be used)."""
        try:
            saved = _DECODER.decode(self._file(session_id, leaf).read_bytes())
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None
        return saved if saved.format == FORMAT and _consistent(saved) else None

    def save(self, session_id: str, leaf: str | None, saved: SavedSeries) -> None:
        """Keep `saved` (written beside, then renamed over the old file); a folder that cannot take it is skipped."""
        path = self._file(session_id, leaf)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, _ENCODER.encode(saved), durable=False)  # a cache: a power loss only loses it
            self.writes += 1
        except OSError:
            pass


def _consistent(saved: SavedSeries) -> bool:
    """Whether the file's parts agree: its request indices ascend below `calls`, and it describes only those."""
    indices = saved.indices
    if any(not 0 <= i < saved.calls for i in indices) or any(a >= b for a, b in itertools.pairwise(indices)):
        return False
    shown = set(indices)
    return (
        saved.series.leaf_id == saved.leaf
        and all(i in shown and summary.index == i for i, summary in saved.summaries.items())
        and all(i in shown for i in saved.replayed)
    )
