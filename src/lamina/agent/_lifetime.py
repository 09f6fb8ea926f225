"""What an agent holds open and lets go of: the event loop of its sync turns, the engine and provider it owns (I/O)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from lamina.engine import ContextEngine
from lamina.providers import Provider

_T = TypeVar("_T")


@dataclass(slots=True)
class Lifetime:
    """An agent's open or closed state, the one event loop of its sync turns, and the closing of what it owns."""

    closed: bool = False
    _runner: asyncio.Runner | None = field(default=None, repr=False)
    """The one event loop of `run_turn_sync`: an SDK client's connections outlive a turn, not their loop."""
    _closing: asyncio.Task[None] | None = field(default=None, repr=False)
    """The provider's closing, left to the running loop when `close` was called from async code."""

    def is_closed(self) -> bool:
        """Whether the agent was closed."""
        return self.closed

    def run(self, work: Coroutine[Any, Any, _T]) -> _T:
        """Run `work` on the agent's own event loop, made on first use and kept until the agent is closed."""
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner.run(work)

    def close(self, engine: ContextEngine | None, provider: Provider | None) -> None:
        """Close `provider`'s own client and `engine` (None: not the agent's to close); safe to call twice."""
        if self.closed:
            return
        with self._releasing(engine):
            aclose = _aclose(provider)
            self._closing = self._close_provider(aclose) if aclose is not None else None

    async def aclose(self, engine: ContextEngine | None, provider: Provider | None) -> None:
        """`close` for async callers: the provider's own client is closed on the running loop."""
        if self.closed:
            return
        with self._releasing(engine):
            aclose = _aclose(provider)
            if aclose is not None:
                await aclose()

    @contextmanager
    def _releasing(self, engine: ContextEngine | None) -> Iterator[None]:
        """Closed from now on; whatever happens inside, the event loop and `engine` are let go of after it."""
        self.closed = True
        try:
            yield
        finally:
            if self._runner is not None:
                self._runner.close()
                self._runner = None
            if engine is not None:
                engine.close()

    def _close_provider(self, aclose: Callable[[], Coroutine[Any, Any, None]]) -> asyncio.Task[None] | None:
        if self._runner is not None:  # the loop its client's connections were made on
            self._runner.run(aclose())
            return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(aclose())
            return None
        return loop.create_task(aclose())  # closed from async code without await: the loop ends it


def _aclose(provider: Provider | None) -> Callable[[], Coroutine[Any, Any, None]] | None:
    aclose: Callable[[], Coroutine[Any, Any, None]] | None = getattr(provider, "aclose", None)
    return aclose
