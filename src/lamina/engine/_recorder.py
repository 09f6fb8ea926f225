"""What the engine's parts are given to write with: the engine's one write path, as a callable (pure)."""

from __future__ import annotations

from typing import Protocol, TypeVar

from lamina.session import Entry

E = TypeVar("E", bound=Entry)
"""An entry of any kind, given back as the type it was given."""


class Recorder(Protocol):
    """`ContextEngine.record`: appends an entry to the log and folds it into every part; returns it stamped."""

    def __call__(self, entry: E, *, durable: bool | None = None) -> E:
        """Append `entry` (durably at once when `durable` is true; default: only critical entries)."""
        ...
