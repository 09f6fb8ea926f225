"""What the engine's method groups use of the engine: its parts and its core methods (pure).

The groups are `_settings`, `_media`, `_plans`, `_compacting`, `_branching` and `_resume`.
`ContextEngine` is the one class that has all of them; each group is a mixin over this host, so
it can be read (and type-checked) alone, and each piece of state stays in its part.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from lamina.attachments import AttachmentStore, MediaSupport
from lamina.context import Part, ToolSpec
from lamina.engine._outbox import Outbox
from lamina.engine._plans import SessionPlans
from lamina.engine._prefix import StablePrefix
from lamina.engine._session_book import ProviderSessionBook
from lamina.engine._settings import SessionSettings
from lamina.engine._state import PathState
from lamina.engine._view import LiveView
from lamina.placement import RenderCache
from lamina.session import Entry, LogEntry, ProviderView, SessionLog
from lamina.tokens import TokenEstimator

E = TypeVar("E", bound=Entry)
"""An entry of any kind, given back as the type it was given."""


class EngineHost:
    """The engine's parts and core methods, as the method groups see them (`ContextEngine` defines them)."""

    session: SessionLog
    estimator: TokenEstimator
    tools: tuple[ToolSpec, ...]
    settings: SessionSettings
    plans: SessionPlans
    _path: PathState
    _outbox: Outbox
    _stable: StablePrefix
    _stable_source: Callable[[], Sequence[Part]]
    provider_sessions: ProviderSessionBook
    _view: LiveView
    _media: MediaSupport | None
    _render_cache: RenderCache
    attachments: AttachmentStore

    def record(self, entry: E, *, durable: bool | None = None) -> E:
        """Append an entry to the log and fold it into the parts (`ContextEngine.record`)."""
        raise NotImplementedError

    def _check_open(self) -> None:
        raise NotImplementedError

    def _data_dir(self) -> str:
        raise NotImplementedError

    def _rebuild_view(self, view: ProviderView | None = None) -> None:
        raise NotImplementedError

    def _track_session_wide(self, entry: LogEntry) -> None:
        raise NotImplementedError

    def queue_one_shot(self, kind: str, text: str, *, hidden: bool = False) -> str:
        """Queue a part to be delivered to the model exactly once (`ContextEngine.queue_one_shot`)."""
        raise NotImplementedError
