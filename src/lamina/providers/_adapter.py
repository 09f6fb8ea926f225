"""What the adapters share: the target and capabilities they answer with; the SDK adapters' client and reasoning."""

from __future__ import annotations

import dataclasses
from typing import Generic, Protocol, Self, TypeVar

from lamina.placement import AnthropicTarget, OpenAIChatTarget, OpenAIResponsesTarget, ReasoningConfig, RenderTarget
from lamina.providers._provider import Capabilities

_T = TypeVar("_T", bound=RenderTarget)
_R = TypeVar("_R", AnthropicTarget, OpenAIChatTarget, OpenAIResponsesTarget)


class _Closable(Protocol):
    async def close(self) -> None: ...


_C = TypeVar("_C", bound=_Closable)


class Adapter(Generic[_T]):
    """A provider's placement target and its model's capabilities, as every adapter reports them."""

    _target: _T
    _capabilities: Capabilities

    @property
    def target(self) -> _T:
        """The placement target whose bodies this provider accepts."""
        return self._target

    @property
    def capabilities(self) -> Capabilities:
        """What the model in use can do, for placement and attachments."""
        return self._capabilities


class SdkAdapter(Adapter[_R], Generic[_R, _C]):
    """An adapter on an official SDK: its client (given, or built on first use and then owned) and reasoning."""

    def __init__(self, client: _C | None, api_key: str | None, base_url: str | None, timeout: float | None) -> None:
        """Keep the client, or what builds one on first use.

        Args:
            client: An SDK client to use as is (the caller owns it); None: built on first use.
            api_key: The API key for the client built here; None: the SDK's default.
            base_url: The server for the client built here; None: the SDK's default.
            timeout: Per-request timeout in seconds for the client built here; None: the SDK's default.
        """
        self._client = client
        self._owns_client = client is None
        self._api_key = api_key
        self._base_url = base_url
        self._timeout = timeout

    @property
    def reasoning(self) -> ReasoningConfig:
        """How the model reasons (sent with every request from now on when set)."""
        return self._target.reasoning

    @reasoning.setter
    def reasoning(self, value: ReasoningConfig) -> None:
        self._target = dataclasses.replace(self._target, reasoning=value)

    async def aclose(self) -> None:
        """Close the SDK client if this provider built it."""
        if self._client is not None and self._owns_client:
            await self._client.close()
            self._client = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
