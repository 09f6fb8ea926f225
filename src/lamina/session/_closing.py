"""What a `with` block closes at its end: an open session, a store."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


class Closing(ABC):
    """Closed when the `with` block that holds it ends."""

    @abstractmethod
    def close(self) -> None:
        """Let go of what it holds. Safe to call twice."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None, /
    ) -> None:
        self.close()
