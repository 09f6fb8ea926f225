"""Reserved names and the patterns that find a tag, a special token or a role line in a reading (pure)."""

from __future__ import annotations

import re

from lamina.defang._readings import _L_CLASS

__all__ = ["RESERVED_TAG_NAMES"]

RESERVED_TAG_NAMES: frozenset[str] = frozenset(
    {
        "branch_seed",
        "compaction_summary",
        "context_files",
        "date_time",
        "instructions",
        "interruption",
        "ledger",
        "memory",
        "mode_transition",
        "one_shot",
        "pinned",
        "preferences",
        "project_context",
        "project_manifest",
        "recovery",
        "session_state",
        "skill",
        "skills",
        "source",
        "source_guide",
        "sources",
        "stable_context",
        "system",
        "tool_result",
        "transfer_summary",
        "untrusted",
        "volatile_context",
    }
)
"""Block names Lamina uses for its own trusted structure; untrusted text can never open or close one."""

# Tags that pose as conversation roles or tool calls: never ours, never allowed in untrusted text.
_ROLE_TAG_NAMES = frozenset(
    {
        "assistant",
        "developer",
        "end_of_turn",
        "function_call",
        "function_calls",
        "function_results",
        "human",
        "im_end",
        "im_start",
        "invoke",
        "start_of_turn",
        "tool_call",
        "tool_calls",
        "tool_use",
        "user",
    }
)
_BRACKET_WORDS = ("inst", "sys", "system", "user", "assistant", "human", "developer")
_ROLE_WORDS = ("system", "developer", "user", "human", "assistant", "ai", "instruction", "instructions")


def _word_pattern(word: str) -> str:
    """`word`, where a look-alike of `l`, `I` or `|` (one class in UTS #39) may stand for an `i` or an `l`."""
    return "".join(f"[{c}{_L_CLASS}]" if c in "il" else re.escape(c) for c in word)


def _name_pattern(name: str) -> str:
    return r"[\s_\-.]*".join(_word_pattern(word) for word in name.split("_"))


_TAG_NAMES = "|".join(_name_pattern(n) for n in sorted(RESERVED_TAG_NAMES | _ROLE_TAG_NAMES, key=len, reverse=True))
_ROLES = "|".join(_word_pattern(w) for w in sorted(_ROLE_WORDS, key=len, reverse=True))
_BAR = f"[|{_L_CLASS}]"
_NOT_BAR = f"[^|{_L_CLASS}"
_LEAD = r"(?:[>*_`~|+#\-]|[^\S\n])*+"
_TRAIL = r"(?:[*_`~]|[^\S\n])*+"
# A tag of ours or a role tag: `</untrusted>`, `< / System >`, `<x:memory a="1">`, `<\/skill>`.
_TAG_RE = re.compile(rf"<[\s/\\!?]*+(?:[a-z0-9_.\-]{{1,32}}:)?(?:{_TAG_NAMES})(?![a-z0-9])")
# Where a tag may start, whatever follows the name.
_TAG_START_RE = re.compile(rf"<[\s/\\!?]*+(?:[a-z0-9_.\-]{{1,32}}:)?(?:{_TAG_NAMES})")
_PLAIN_WINDOW = 2
"""Characters past such a start that the plain view covers: the one after the name, and one more."""
# The same on a plain view (see `_plain_view`), where only lower-case letters continue a name.
_PLAIN_TAG_RE = re.compile(rf"<[\s/\\!?]*+(?i:[a-z0-9_.\-]{{1,32}}:)?(?i:{_TAG_NAMES})(?![a-z0-9])")
_MARKER_RES = (
    _TAG_RE,
    # Special tokens: `<|im_start|>`, `<|endoftext|>`, `<｜begin▁of▁sentence｜>`; on one line, or short.
    re.compile(rf"<\s*+{_BAR}(?:{_NOT_BAR}\n]*+|{_NOT_BAR}]{{0,64}}+){_BAR}\s*+>"),
    # Llama chat markers.
    re.compile(rf"<\s*+<\s*+/?\s*+{_word_pattern('sys')}\s*+>\s*+>"),
    re.compile(
        rf"\[\s*+/?\s*+(?:{'|'.join(map(_word_pattern, _BRACKET_WORDS))})\s*+\]",
    ),
)
# A role word after the line's decoration (`>`, `#`, `*`, `-`) and before a colon, or a heading of one.
_ROLE_LINE_RE = re.compile(rf"^[^\S\n]*+(?P<at>(?P<lead>{_LEAD})(?P<role>{_ROLES}){_TRAIL}(?P<end>:|$))", re.MULTILINE)
_INDENTED_RE = re.compile(r"[+\-]?[ \t]")
"""How an indented line starts: with a space or a tab, also after a diff's `+` or `-` (or a list's `-`)."""
