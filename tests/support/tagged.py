"""A token estimator for cache tests: a block counts the `#N` tags in its text, so a test chooses exact counts."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

_TAG: Final = re.compile(r"#(\d+)")


@dataclass(frozen=True)
class TaggedEstimator:
    """Counts a block as the sum of the `#N` tags in its text, so tests choose exact token counts."""

    def count(self, text: str) -> int:
        return sum(int(n) for n in _TAG.findall(text))
