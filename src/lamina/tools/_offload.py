"""Large tool results: kept in a file, with a head-and-tail preview for the model (I/O: disk).

A result larger than the threshold (`OffloadPolicy.threshold_tokens`; by default 10% of the
model's context window, clamped to 2,000–12,000 tokens) is written whole to
`<data_dir>/tool-results/<call_id>.txt`, and the model receives a preview instead: a note with the
file's path and size, the first lines and the last lines. The data folder is readable by Read and
Grep, so the model can open the rest when it needs it. The pipeline applies this to every tool's
result, built-in or not, after the tool ran.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from lamina.errors import LaminaError, UsageError
from lamina.session import SessionFiles
from lamina.tokens import TokenEstimator
from lamina.workspace import locate

DEFAULT_FRACTION: Final = 0.10
"""Share of the context window one tool result may take before it is offloaded."""
MIN_THRESHOLD_TOKENS: Final = 2_000
MAX_THRESHOLD_TOKENS: Final = 12_000
RESULTS_FOLDER: Final = "tool-results"
"""Folder under the session's data folder that holds offloaded results."""
MAX_PREVIEW_TOKENS: Final = 2_000

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.-]")
_MAX_NAME: Final = 100


def offload_threshold(
    context_window: int,
    *,
    fraction: float = DEFAULT_FRACTION,
    minimum: int = MIN_THRESHOLD_TOKENS,
    maximum: int = MAX_THRESHOLD_TOKENS,
) -> int:
    """Tokens above which a tool result is offloaded: `fraction` of `context_window`, clamped to `[minimum, maximum]`.

    Raises:
        UsageError: `context_window` is not positive, `fraction` not in (0, 1], or `minimum > maximum`.
    """
    if context_window <= 0:
        raise UsageError(f"context_window must be positive, got {context_window}")
    if not 0 < fraction <= 1:
        raise UsageError(f"fraction must be in (0, 1], got {fraction}")
    if not 0 < minimum <= maximum:
        raise UsageError(f"need 0 < minimum <= maximum, got minimum={minimum}, maximum={maximum}")
    return max(minimum, min(maximum, round(context_window * fraction)))


@dataclass(frozen=True, slots=True)
class OffloadPolicy:
    """When a tool result is offloaded to a file, and how large its preview is."""

    threshold_tokens: int = MAX_THRESHOLD_TOKENS
    """Results estimated above this many tokens are offloaded. The default fits a 120k+ window;
    use `for_context_window` to derive it from the model."""
    preview_tokens: int | None = None
    """Size of the head-and-tail preview; None means a quarter of the threshold, at most 2,000."""

    def __post_init__(self) -> None:
        if self.threshold_tokens <= 0:
            raise UsageError(f"threshold_tokens must be positive, got {self.threshold_tokens}")
        if self.preview_tokens is not None and not 0 < self.preview_tokens < self.threshold_tokens:
            raise UsageError(
                f"preview_tokens must be positive and below threshold_tokens ({self.threshold_tokens}), "
                f"got {self.preview_tokens}"
            )

    @classmethod
    def for_context_window(
        cls,
        context_window: int,
        *,
        fraction: float = DEFAULT_FRACTION,
        minimum: int = MIN_THRESHOLD_TOKENS,
        maximum: int = MAX_THRESHOLD_TOKENS,
        preview_tokens: int | None = None,
    ) -> OffloadPolicy:
        """The policy for a model with `context_window` tokens: `fraction` of it, clamped to `minimum`-`maximum`."""
        threshold = offload_threshold(context_window, fraction=fraction, minimum=minimum, maximum=maximum)
        return cls(threshold_tokens=threshold, preview_tokens=preview_tokens)

    @property
    def preview_budget(self) -> int:
        """Tokens the preview may take (head and tail together)."""
        if self.preview_tokens is not None:
            return self.preview_tokens
        return max(1, min(MAX_PREVIEW_TOKENS, self.threshold_tokens // 4))


@dataclass(frozen=True, slots=True)
class OffloadedResult:
    """A result that was too large for the context: where it went and what the model sees instead."""

    path: Path | None
    """The file holding the whole result; None if it could not be written (then only the preview remains)."""
    preview: str
    """What the model receives: a note with the path and size, the head and the tail."""
    chars: int
    tokens: int
    """Estimated tokens of the whole result."""
    lines: int


def result_path(data_dir: Path, call_id: str) -> Path:
    """`<data_dir>/tool-results/<name>.txt`, with `call_id` made safe as a single file name.

    Anything but letters, digits, `_`, `.` and `-` becomes `_`, leading dots are dropped and the
    name is capped, so no id can leave the folder (`../x`, `/etc/x`) or hide a file. An id that had
    to change gets a short hash of the original, so two different ids never share a file.
    """
    safe = _UNSAFE.sub("_", call_id).lstrip(".")[:_MAX_NAME]
    if safe != call_id or not safe:
        digest = hashlib.sha256(call_id.encode("utf-8", errors="surrogatepass")).hexdigest()[:12]
        safe = f"{safe or 'call'}-{digest}"
    return data_dir / RESULTS_FOLDER / f"{safe}.txt"


def offload_result(
    content: str,
    *,
    call_id: str,
    data_dir: Path,
    policy: OffloadPolicy,
    estimator: TokenEstimator,
    files: SessionFiles | None = None,
) -> OffloadedResult | None:
    """Write `content` to the data folder and build its preview, or None if it is under the threshold.

    With `files` (the session's), the result is put there (durable before the entry naming it) and
    the preview shows its path as the session shows it. Never raises for a disk or database
    problem: when the file cannot be written, the preview says so and `path` is None.
    """
    tokens = estimator.count(content)
    if tokens <= policy.threshold_tokens:
        return None
    target = result_path(data_dir, call_id)
    path: Path | None = target
    problem = ""
    data = content.encode("utf-8", errors="surrogateescape")
    try:
        if files is not None:
            name = f"data/{RESULTS_FOLDER}/{target.name}"
            files.put_file(name, data)
            path = Path(files.shown_path(name))
        else:  # by descriptor, inside the data folder: a link planted in it cannot send the file elsewhere
            with locate(target, (data_dir.resolve(),), make_folders=True) as where:
                where.replace(data)
    except OSError as exc:
        problem = exc.strerror or type(exc).__name__
        path = None
    except LaminaError as exc:  # the database store could not take it
        problem = str(exc)
        path = None
    return OffloadedResult(
        path=path,
        preview=_preview(content, tokens, path, problem, policy.preview_budget, estimator),
        chars=len(content),
        tokens=tokens,
        lines=_line_count(content),
    )


def _preview(content: str, tokens: int, path: Path | None, problem: str, budget: int, estimator: TokenEstimator) -> str:
    head = _fit(content, budget * 3 // 5, estimator, from_end=False)
    tail = _fit(content[len(head) :], budget - estimator.count(head), estimator, from_end=True)
    omitted = content[len(head) : len(content) - len(tail)]
    size = f"{len(content):,} characters, about {tokens:,} tokens, {_line_count(content):,} lines"
    if path is not None:
        where = (
            f"The full result is saved at {path}; open it with Read (offset and limit) or search it with Grep "
            "instead of running the call again."
        )
    else:
        where = f"The full result could not be saved ({problem}); only this preview remains."
    note = f"[This tool result is too large for the context ({size}). {where} Shown: its start and its end.]"
    gap = f"[… {len(omitted):,} characters omitted …]"
    if head.endswith("\n") and omitted.endswith("\n"):  # whole lines left out: say which, for Read's offset
        first = head.count("\n") + 1
        gap = f"[… lines {first:,}–{first + omitted.count(chr(10)) - 1:,} omitted ({len(omitted):,} characters) …]"
    return "\n".join(part for part in (note, head.rstrip("\n"), gap, tail.lstrip("\n")) if part)


def _fit(text: str, budget: int, estimator: TokenEstimator, *, from_end: bool) -> str:
    """The longest start (or end) of `text` within `budget` tokens, cut at a line break when one is near."""
    if budget <= 0 or not text:
        return ""
    piece: Callable[[int], str] = (lambda k: text[len(text) - k :]) if from_end else (lambda k: text[:k])
    if estimator.count(text) <= budget:
        return text
    # Exponential then binary search on the length: the estimator is a black box, counting is O(n).
    low, high = 0, min(len(text), max(budget * 4, 16))
    while high < len(text) and estimator.count(piece(high)) <= budget:
        low, high = high, min(len(text), high * 2)
    while low < high:
        mid = (low + high + 1) // 2
        if estimator.count(piece(mid)) <= budget:
            low = mid
        else:
            high = mid - 1
    cut = piece(low)
    # Prefer whole lines, unless that would throw away more than half of what fits.
    if from_end:
        newline = cut.find("\n")
        if 0 <= newline < len(cut) // 2:
            return cut[newline + 1 :]
    else:
        newline = cut.rfind("\n")
        if newline >= len(cut) // 2:
            return cut[: newline + 1]
    return cut


def _line_count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)
