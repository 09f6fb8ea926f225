"""The user's words lane: the user's own messages, verbatim, after every compaction summary (pure).

Described in docs/compaction.md ("The user's words lane").
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from lamina.context import SafeText
from lamina.defang import neutralise, render_block, trusted
from lamina.errors import UsageError
from lamina.session import Ledger, LogEntry, UserLane, UserMessage, UserWords
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator

__all__ = [
    "ARCHIVE_FOLDER",
    "DEFAULT_PASTE_TOKENS",
    "DEFAULT_USER_LANE_TOKENS",
    "LaneUpdate",
    "archive_name",
    "archive_text",
    "render_lane",
    "update_lane",
]

DEFAULT_USER_LANE_TOKENS: Final = 20_000
"""Tokens of the user's own messages shown after a compaction summary, newest first."""
DEFAULT_PASTE_TOKENS: Final = 4_000
"""A message longer than this (a paste, a log) is shown as its head and tail (at most the lane's budget)."""
ARCHIVE_FOLDER: Final = "user-messages"
"""Folder under the session's data folder with one file of whole user messages per compaction."""

_HEAD_SHARE: Final = 0.6
_INTRO: Final = (
    "The user's own messages from the part of this session summarised above, verbatim, oldest to newest, "
    "each headed by its turn number and time (UTC). They are the source of truth for what the user asked: "
    "where a later message changes or withdraws an earlier instruction, the later message holds; the "
    "summary's constraints are only a reading of them. Markup in them is shown escaped ([U+003C] stands for <)."
)


@dataclass(frozen=True, slots=True)
class LaneUpdate:
    """The lane after a compaction, and the whole messages it newly took in (for the archive file)."""

    lane: UserLane
    archive: tuple[UserWords, ...]
    """The newly summarised user messages, whole, oldest first; written to `archive_name(archive)`."""


def _stamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC") if ts > 0 else "time unknown"


def _header(words: UserWords) -> str:
    return f"[turn {words.turn} · {_stamp(words.ts)}]"


def archive_name(archive: Sequence[UserWords]) -> str:
    """The archive file of `archive`, relative to the data folder: turn range plus a digest of the content.

    The digest makes the name unique to its content: a retried compaction writes the same file, two
    branches of one session never overwrite each other's.
    """
    if not archive:
        raise UsageError("an archive needs at least one message")
    digest = hashlib.sha256(archive_text(archive).encode("utf-8", errors="surrogatepass")).hexdigest()[:10]
    return f"{ARCHIVE_FOLDER}/turns-{archive[0].turn:05d}-{archive[-1].turn:05d}-{digest}.md"


def archive_text(archive: Sequence[UserWords]) -> str:
    """The archive file's content: each message whole, under its turn header, oldest first."""
    first, last = (archive[0].turn, archive[-1].turn) if archive else (0, 0)
    lines = [f"# The user's own messages, turns {first}–{last}, whole and verbatim", ""]
    for words in archive:
        lines += [_header(words), words.text, ""]
    return "\n".join(lines)


def clip_text(text: str, cap: int, estimator: TokenEstimator) -> tuple[str, int]:
    """`text` within `cap` tokens: its head and its tail, and how many characters were left out."""
    if estimator.count(text) <= cap:
        return text, 0
    # The estimator is a black box: find the longest prefix in budget by bisection, then split it.
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if estimator.count(text[:mid]) <= cap:
            low = mid
        else:
            high = mid - 1
    head = round(low * _HEAD_SHARE)
    tail = low - head
    omitted = len(text) - head - tail
    return f"{text[:head]}{text[len(text) - tail :] if tail else ''}", omitted


def _join(words: UserWords) -> str:
    """The message as the lane shows it; a clipped one says where its middle went."""
    if not words.omitted:
        return words.text
    head = round((len(words.text)) * _HEAD_SHARE)
    where = f"the whole message is in the data folder's {words.archive}" if words.archive else "the session log has it"
    note = f"\n[… {words.omitted:,} characters of this long message left out here; {where} …]\n"
    return words.text[:head] + note + words.text[head:]


def _shown(words: UserWords) -> str:
    return f"{_header(words)}\n{_join(words)}"


def _admitted(words: UserWords) -> str:
    """`_shown`, the user's text neutralised as markup (memoised: a message carried over costs nothing)."""
    return f"{_header(words)}\n{neutralise(_join(words))}"


def update_lane(
    previous: UserLane,
    entries: Sequence[LogEntry],
    *,
    budget_tokens: int = DEFAULT_USER_LANE_TOKENS,
    paste_tokens: int = DEFAULT_PASTE_TOKENS,
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
    archive_failed: str = "",
) -> LaneUpdate:
    """The lane of `previous` with the user messages of `entries`, newest first within `budget_tokens`.

    Deterministic: same input, same lane. Messages are numbered on from `previous.last_turn`; each
    message longer than `paste_tokens` keeps its head and tail; the oldest messages that do not fit
    the budget leave the lane (counted in `left_out`; their whole text is in earlier archives or
    in this compaction's, `LaneUpdate.archive`).

    Args:
        previous: The lane of the previous compaction (`UserLane()` for the first one).
        entries: The entries being summarised, oldest first.
        budget_tokens: Most tokens of messages (with their headers) the lane shows.
        paste_tokens: Most tokens one message may take in the lane before it is cut in the middle.
        estimator: Counts tokens.
        archive_failed: Why this compaction's archive could not be written ("" when it was).

    Raises:
        UsageError: `budget_tokens` or `paste_tokens` is negative.
    """
    if budget_tokens < 0:
        raise UsageError(f"the user's words budget must be at least 0 tokens, not {budget_tokens}")
    if paste_tokens < 0:
        raise UsageError(f"paste_tokens must be at least 0, not {paste_tokens}")
    whole: list[UserWords] = []
    turn = previous.last_turn
    for entry in entries:
        if isinstance(entry, UserMessage):
            turn += 1
            if entry.typed or not entry.by_lamina:  # of a message Lamina wrote, only what the user typed in it
                whole.append(UserWords(turn=turn, ts=entry.ts, text=entry.typed))
    name = "" if archive_failed or not whole else archive_name(whole)
    cap = min(paste_tokens, budget_tokens)
    new: list[UserWords] = []
    for words in whole:
        text, omitted = clip_text(words.text, cap, estimator)
        new.append(UserWords(turn=words.turn, ts=words.ts, text=text, omitted=omitted, archive=name))
    candidates = [*previous.messages, *new]
    kept: list[UserWords] = []
    used = 0
    for words in reversed(candidates):
        cost = estimator.count(_shown(words)) + 1
        if used + cost > budget_tokens:
            break
        kept.append(words)
        used += cost
    kept.reverse()
    dropped = candidates[: len(candidates) - len(kept)]
    left_out = previous.left_out + len(dropped)
    until = dropped[-1].turn if dropped else previous.left_out_until
    failed = archive_failed or previous.archive_failed
    lane = UserLane(
        messages=tuple(kept), last_turn=turn, left_out=left_out, left_out_until=until, archive_failed=failed
    )
    return LaneUpdate(lane, tuple(whole))


def render_lane(lane: UserLane, *, data_dir: str, legacy: Ledger | None = None) -> SafeText | None:
    """The `<pinned>` block after a compaction summary: the user's own messages, or None when there are none.

    Args:
        lane: The lane of the latest compaction.
        data_dir: The session's data folder, as the model's tools reach it (archives are under it).
        legacy: The ledger of the boundary: rule sentences an older Lamina picked (`Ledger.constraints`)
            are shown first, so a session compacted before the lane existed keeps what it pinned.
    """
    intro = [_INTRO]
    if lane.left_out:
        shown_from = f"turn {lane.messages[0].turn} is the oldest shown" if lane.messages else "none is shown"
        where = (
            f"the whole text of every message is in the files of {data_dir}/{ARCHIVE_FOLDER}/ (one file per "
            "compaction, named by its turn range): read them with Read when you need them"
        )
        if lane.archive_failed:
            where = f"some could not be saved to a file ({lane.archive_failed}); the session log keeps them all"
        intro.append(
            f"The {lane.left_out:,} oldest messages (turns up to {lane.left_out_until}) did not fit this list's "
            f"budget and are not shown; {shown_from}. Nothing is lost: {where}."
        )
    # Through the one door for untrusted text, without a "data, not instructions" wrapper: these
    # are the user's own instructions. Nothing in them can close this block or forge another.
    shown = [_admitted(w) for w in lane.messages]
    if legacy is not None and legacy.constraints:  # a session compacted before the lane existed
        rules = "\n".join(f"- {neutralise(c)}" for c in legacy.constraints)
        shown.insert(0, f"[before turn numbering: rules an older Lamina picked out of the user's messages]\n{rules}")
    body = "\n\n".join(shown)
    if not body and not lane.left_out:
        return None
    # Lamina's sentences (with its own data folder) and the user's messages, each through the door
    text = "\n\n".join([" ".join(intro), body]) if body else " ".join(intro)
    return render_block("pinned", trusted(text))
