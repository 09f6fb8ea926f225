"""Why each model call of a session missed the prompt cache: the provider's diagnostics beside the simulator's.

`CacheWatch` adds the diagnostics field to a request where the model has them (and the agent's
`cache_diagnostics` is on), then checks the answer: the provider's reason, settled against its
usage (nothing diverged but less was read: `ttl_expired`), and Lamina's prediction from the cache
simulator fed the same requests. The agent records the `CacheCheck` on the call's assistant message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from lamina.placement import (
    AnthropicTarget,
    OpenAIChatTarget,
    OpenAIResponsesTarget,
    RenderedRequest,
    RenderTarget,
    SdkManagedPrompt,
)
from lamina.providers import Completed, Provider, ask_cache_diagnostics
from lamina.session import CacheCheck, CacheMiss, LogEntry, Usage

if TYPE_CHECKING:  # the simulator is loaded on the first call checked, never by `import lamina`
    from lamina.cachesim import CacheMissPredictor, MissFormat


def miss_format(target: RenderTarget) -> MissFormat | None:
    """Whose cache rules a target's requests follow (None: no cache Lamina can predict)."""
    if isinstance(target, AnthropicTarget):
        return "anthropic"
    if isinstance(target, OpenAIChatTarget | OpenAIResponsesTarget):
        return "openai"
    return None


@dataclass
class CacheWatch:
    """The session's last response id and usage, and the predictor fed its requests."""

    enabled: Callable[[], bool] = lambda: True
    """Whether to ask and predict at all (the agent's `cache_diagnostics`)."""
    previous_id: str | None = None
    """The previous call's response id (None: none yet, or another provider's)."""
    previous_usage: Usage | None = None
    predictor: CacheMissPredictor | None = None
    last: CacheCheck | None = None
    """The check of the latest call, for its assistant message."""
    _asked: bool = field(default=False, repr=False)

    def prepare(self, request: RenderedRequest, provider: Provider) -> RenderedRequest:
        """`request` as it is to be sent: with the diagnostics field where the model has diagnostics.

        Args:
            request: The rendered body.
            provider: The provider it goes to.

        Returns:
            The body to send.
        """
        self.last = None
        fmt = miss_format(provider.target)
        if self.predictor is not None and self.predictor.fmt != fmt:  # another provider: nothing compares
            self.predictor, self.previous_id, self.previous_usage = None, None, None
        self._asked = self.enabled() and provider.capabilities.cache_diagnostics and fmt is not None
        if not self._asked:
            return request
        return ask_cache_diagnostics(request, provider.target, self.previous_id)

    def check(
        self, request: RenderedRequest, completed: Completed, provider: Provider, view: Sequence[LogEntry]
    ) -> CacheCheck | None:
        """The call's cache check, from its answer and the simulator; kept in `last`.

        Args:
            request: The body as sent.
            completed: The provider's answer.
            provider: The provider that answered.
            view: The entries the request carried (the last one's time is when it was sent).

        Returns:
            The check, or None when the watch is off or the target has no cache to predict.
        """
        fmt = miss_format(provider.target)
        if not self.enabled() or fmt is None:
            return None
        from lamina.cachesim import cache_held, settle_miss

        breakpoints = isinstance(provider.target, OpenAIChatTarget | OpenAIResponsesTarget) and (
            provider.target.cache_breakpoints
        )
        predicted = self._predict(request, fmt, view[-1].ts if view else 0.0, breakpoints)
        reported = completed.cache_miss if self._asked else None
        if reported is not None and self.previous_usage is not None:
            usage, before = completed.usage, self.previous_usage
            held = cache_held(
                fmt,
                read=before.cache_read,
                write=before.cache_write,
                total=before.input + before.cache_read + before.cache_write,
                breakpoints=breakpoints,
            )
            reported = settle_miss(reported, held=held, read=usage.cache_read)
        self.previous_id = completed.response_id or None
        self.previous_usage = completed.usage
        found = reported is not None or predicted is not None
        self.last = CacheCheck(provider=reported, predicted=predicted) if found else None
        return self.last

    def _predict(self, request: RenderedRequest, fmt: MissFormat, t: float, breakpoints: bool) -> CacheMiss | None:
        from lamina.cachesim import CacheMissPredictor, CacheSimulationError, TimedRequest

        if isinstance(request, SdkManagedPrompt):
            return None
        if self.predictor is None:
            self.predictor = CacheMissPredictor(fmt, breakpoints=breakpoints)
        try:
            _, predicted = self.predictor.submit(TimedRequest(t, cast("Mapping[str, object]", request)))
        except CacheSimulationError:  # a clock that went back, a body the simulator refuses: no prediction
            self.predictor = None
            return None
        return predicted
