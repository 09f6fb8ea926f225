"""Lamina's own blocks and names: `render_block`, the `defang` wrapper, `trusted`, `join`, `escape_path` (pure)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

from lamina.defang._neutralise import _fit
from lamina.defang._readings import _L_CLASS, _escape, _fold_char
from lamina.defang._safe import Authority, SafeText
from lamina.defang._tags import RESERVED_TAG_NAMES, _name_pattern
from lamina.errors import UsageError

__all__ = ["defang", "escape_path", "join", "render_block", "trusted"]

_WRAPPER = "untrusted"
_SOURCE_LIMIT = 200
"""Most characters the escaped `source` attribute may take; a longer one is cut and ends in `…`."""


_ATTRIBUTE_NAME_RE = re.compile(r"[a-z][a-z0-9_]*")
_ATTRIBUTE_PUNCTUATION = frozenset(" ._-/:@+,()~=#!$*^{}…")


@lru_cache(maxsize=8192)
def _attribute_char(ch: str) -> str:
    """`ch` if it is a letter, digit or harmless punctuation however it is read, else its escape."""
    folded = _fold_char(ch)
    plain = (ch in _ATTRIBUTE_PUNCTUATION or unicodedata.category(ch)[0] in "LN") and bool(folded)
    if plain and all(c.isalnum() or c in _ATTRIBUTE_PUNCTUATION for c in folded):
        return ch
    return _escape(ch)


def _escape_attribute(value: str) -> str:
    return "".join(map(_attribute_char, value))


def _clip_attribute(value: str, limit: int) -> str:
    """The longest prefix of `value` whose escaped form fits `limit`, ending in `…` if cut."""
    if len(_escape_attribute(value)) <= limit:
        return value
    used = 0
    for i, ch in enumerate(value):
        used += len(_attribute_char(ch))
        if used > limit - 1:
            return value[:i] + "…"
    return value  # pragma: no cover - the escaped value was longer than limit


@lru_cache(maxsize=64)
def _own_tag_re(name: str) -> re.Pattern[str]:
    """The `<` of every tag, opening or closing, of block `name` (any case, spacing or slashes)."""
    return re.compile(rf"<(?=[\s/\\!?]*+{_name_pattern(name)}(?![a-z0-9]))", re.IGNORECASE)


def render_block(name: str, body: SafeText, /, **attrs: str) -> SafeText:
    """One of Lamina's own trusted blocks: `<name a="…">`, a line feed, `body`, a line feed, `</name>`.

    Every module builds our tags through this function. `body` is inserted as it is, except that
    the `<` of any tag of the block's own name in it (`</pinned>`, `< / PINNED >`, `<pinned>`) is
    shown as `[U+003C]`: the block ends exactly at its own closing tag whatever the body holds, so
    no content can make a block ambiguous or make rendering fail, also for text stored by an older
    Lamina. Untrusted text is neutralised before it gets here (`defang`). Attribute values are
    escaped: anything but letters, digits and harmless punctuation becomes `[U+XXXX]`, so no value
    can end its quotes or hold a tag.

    Args:
        name: A name from `RESERVED_TAG_NAMES`.
        body: The block's trusted content.
        **attrs: Attributes in the order given; names are lower-case identifiers.

    Raises:
        UsageError: `name` is not reserved or an attribute name is not an identifier (never
            because of `body` or an attribute value).
    """
    if name not in RESERVED_TAG_NAMES:
        raise UsageError(f"block name {name!r} is not one of Lamina's reserved tag names")
    for key in attrs:
        if not _ATTRIBUTE_NAME_RE.fullmatch(key):
            raise UsageError(f"attribute name {key!r} of block {name!r} is not a lower-case identifier")
    inner = _own_tag_re(name).sub("[U+003C]", body)
    rendered = "".join(f' {key}="{_escape_attribute(value)}"' for key, value in attrs.items())
    return SafeText(f"<{name}{rendered}>\n{inner}\n</{name}>")


def defang(text: str, *, source: str, authority: Authority, max_chars: int = 20_000) -> SafeText:
    """Untrusted `text` wrapped in one `<untrusted>` block that nothing inside can end or forge.

    The block's label names the source and authority; it holds the neutralised content (see
    `docs/defanging.md`): reserved tags and role markers are escaped or quoted, invisible characters
    shown as `[U+XXXX]`; everything else passes through unchanged. There is no per-block note: the
    system prompt says once what `<untrusted>` blocks, tool results and these escapes are.

    Args:
        text: The untrusted text.
        source: Where it came from (a path, a tool name); escaped, and cut to 200 characters.
        authority: Its authority; never `Authority.SYSTEM_RULE`, which is trusted.
        max_chars: Most characters of neutralised content; the rest is cut, and a last line
            `[truncated: N characters cut]` says how many characters of `text` were left out.

    Raises:
        UsageError: `authority` is `SYSTEM_RULE` or `max_chars` is negative.
    """
    authority = Authority(authority)
    if authority is Authority.SYSTEM_RULE:
        raise UsageError("system_rule text is trusted: render it with render_block, not defang")
    if max_chars < 0:
        raise UsageError(f"max_chars must be at least 0, not {max_chars}")
    content, cut = _fit(text, max_chars)
    body = content
    if cut:
        body += f"\n[truncated: {cut} characters cut]"
    return render_block(
        _WRAPPER, SafeText(body), source=_clip_attribute(source, _SOURCE_LIMIT), authority=authority.value
    )


def trusted(text: str) -> SafeText:
    """`text` marked as fit for a request as it is.

    Only for Lamina's own text (built from literals, numbers, escaped names and other `SafeText`)
    and the user's own typing, never for text read from outside (files, tools, sources, models'
    summaries), which goes through `neutralise` or `defang`.
    """
    return SafeText(text)


def join(separator: str, texts: Iterable[SafeText]) -> SafeText:
    """`separator.join(texts)`: joining safe texts with a separator of Lamina's is still safe."""
    return SafeText(separator.join(texts))


_PATH_PUNCTUATION = frozenset(" ._-/+@,()~!$^{}'")


def escape_path(path: str, *, allow: str = "") -> SafeText:
    """`path` with every character but letters, digits and harmless punctuation shown as `[U+XXXX]`.

    Angle and square brackets, `&`, `%`, `=`, backslashes, colons, `#`, line breaks, invisible and
    look-alike punctuation are all escaped, so a path (or a name) cannot start a tag, an entity,
    an escape sequence or a role line such as `System:`. For every file and folder name, and
    other names from outside Lamina, shown in Lamina's own prompt text.

    Args:
        path: A path as text (use POSIX separators).
        allow: Extra characters to keep as they are (`":"` for a drive letter).
    """
    out = []
    for ch in path:
        out.append(ch if _shown_in_a_path(ch, allow) else f"[U+{ord(ch):04X}]")
    return SafeText("".join(out))


def _plain_in_a_path(ch: str, allow: str) -> bool:
    return ch in _PATH_PUNCTUATION or ch in allow or unicodedata.category(ch)[0] in "LN"


def _shown_in_a_path(ch: str, allow: str) -> bool:
    """Whether `ch` stays as it is in a path: plain, and not a letter that reads as punctuation (`𐌭` as `<`)."""
    if not _plain_in_a_path(ch, allow):
        return False
    return all(c == _L_CLASS or _plain_in_a_path(c, allow) for c in _fold_char(ch))
