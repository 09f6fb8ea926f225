"""User preferences: name, time zone, city and notes, from a TOML file (I/O: disk, environment).

Personal, across workspaces, the first stable part of every session (design chapter §10.8, SPEC
F7). The file is the `path` given, else `$LAMINA_PREFERENCES`, else `preferences.toml` in the
user's configuration directory; a file that cannot be used raises `PreferencesError`. The fields
are checked, not wrapped. See docs/workspace.md, "Preferences".
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

import msgspec
import platformdirs

from lamina._typed_toml import TomlProblem, read_toml
from lamina.context import Authority, Part, Stability, Tier
from lamina.defang import contains_reserved_marker, render_block, trusted
from lamina.errors import UsageError

__all__ = [
    "MAX_NOTES_CHARS",
    "PREFERENCES_ENV_VAR",
    "Preferences",
    "PreferencesError",
    "default_preferences_path",
    "load_preferences",
    "parse_preferences",
    "preferences_part",
]

PREFERENCES_ENV_VAR: Final = "LAMINA_PREFERENCES"
MAX_NOTES_CHARS: Final = 2_000
"""Notes longer than this are cut in the prompt, with a line saying so."""
_MAX_FIELD_CHARS: Final = 200
_MAX_FILE_BYTES: Final = 1_048_576
_FIELDS: Final = ("name", "time_zone", "city", "notes")


class _PreferencesFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The file as written; `Preferences` checks each value (length, lines, time zone, tags)."""

    name: str | None = None
    time_zone: str | None = None
    city: str | None = None
    notes: str | None = None


class PreferencesError(UsageError):
    """Preferences that cannot be used; names the file (or `preferences`) and the field at fault."""

    def __init__(self, source: str, field: str | None, problem: str) -> None:
        self.source = source
        self.field = field
        self.problem = problem
        where = f"{source}: {field}" if field else source
        super().__init__(f"preferences {where}: {problem}")


@dataclass(frozen=True, slots=True)
class Preferences:
    """The user's standing preferences; every field may be unset.

    Raises:
        PreferencesError: A field is too long, spans lines where it may not, names an unknown time
            zone, or holds a reserved tag, role marker or invisible character.
    """

    name: str | None = None
    time_zone: str | None = None
    """An IANA time zone name such as `Europe/Paris`; dates and times are shown in it."""
    city: str | None = None
    notes: str | None = None
    """Free text; cut to 2,000 characters in the prompt."""
    source: str = ""
    """The file they were read from ("" when built in code)."""

    def __post_init__(self) -> None:
        where = self.source or "(given in code)"
        for field in _FIELDS:
            value = getattr(self, field)
            if value is None:
                continue
            if not isinstance(value, str):
                raise PreferencesError(where, field, f"must be a string, not {type(value).__name__}")
            problem = _check_text(value, multiline=field == "notes")
            if problem:
                raise PreferencesError(where, field, problem)
        if self.time_zone is not None and not _known_zone(self.time_zone):
            raise PreferencesError(
                where, "time_zone", f"unknown time zone {self.time_zone!r}; use an IANA name such as 'Europe/Paris'"
            )

    @property
    def empty(self) -> bool:
        """Whether no field is set."""
        return all(getattr(self, f) is None for f in _FIELDS)


def _check_text(value: str, *, multiline: bool) -> str | None:
    """Why `value` cannot be a preference field, or None."""
    if not multiline:
        if "\n" in value or "\r" in value:
            return "must be a single line"
        if len(value) > _MAX_FIELD_CHARS:
            return f"must be at most {_MAX_FIELD_CHARS} characters, not {len(value):,}"
    for ch in value:
        if ch not in "\n\t" and unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            return f"holds the invisible or control character U+{ord(ch):04X}; remove it"
    if contains_reserved_marker(value):
        return (
            "holds text that reads as a tag or a role marker (such as `<system>`, `</preferences>` or a line "
            "starting `User:`); rephrase it"
        )
    return None


@lru_cache(maxsize=1)
def _zone_names() -> frozenset[str]:
    return frozenset(available_timezones())


def _known_zone(name: str) -> bool:
    names = _zone_names()
    if names:
        return name in names
    try:  # no zone list on this system (Windows without tzdata): ask zoneinfo itself
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def default_preferences_path(*, environ: Mapping[str, str] | None = None) -> tuple[Path, bool]:
    """Where preferences are read from when no path is given, and whether that place was named explicitly.

    `$LAMINA_PREFERENCES` when set (explicit), else `preferences.toml` in the user's configuration
    directory (not explicit: a missing file there means no preferences).
    """
    env = os.environ if environ is None else environ
    named = env.get(PREFERENCES_ENV_VAR)
    if named:
        return Path(named).expanduser(), True
    return platformdirs.user_config_path("lamina") / "preferences.toml", False


def parse_preferences(data: str, *, source: str) -> Preferences:
    """The preferences in the TOML text `data`.

    Raises:
        PreferencesError: Not TOML, an unknown field, or a field that is not a valid value.
    """
    try:
        raw = read_toml(data, _PreferencesFile)
    except TomlProblem as exc:
        raise PreferencesError(source, exc.key, exc.problem) from None
    values = {field: (getattr(raw, field) or "").strip() or None for field in _FIELDS}  # empty is unset
    return Preferences(**values, source=source)


def load_preferences(
    path: str | os.PathLike[str] | None = None, *, environ: Mapping[str, str] | None = None
) -> Preferences:
    """Read the user's preferences (see the module docstring for where from).

    Returns:
        The preferences; empty ones when no path was named and the default file does not exist.

    Raises:
        PreferencesError: The file named does not exist, cannot be read, is too large, is not
            UTF-8 TOML, or holds an invalid field.
    """
    if path is not None:
        where, explicit = Path(path).expanduser(), True
    else:
        where, explicit = default_preferences_path(environ=environ)
    source = str(where)
    try:
        with open(where, "rb") as handle:
            data = handle.read(_MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        if explicit:
            raise PreferencesError(source, None, "file not found") from None
        return Preferences()
    except OSError as exc:
        raise PreferencesError(source, None, f"cannot read: {(exc.strerror or type(exc).__name__).lower()}") from None
    if len(data) > _MAX_FILE_BYTES:
        raise PreferencesError(source, None, f"larger than {_MAX_FILE_BYTES:,} bytes; this is not a preferences file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PreferencesError(source, None, f"not UTF-8 (invalid byte at offset {exc.start})") from None
    return parse_preferences(text, source=source)


_INTRO = (
    "The user's standing preferences, from their own settings. Keep to them in every reply unless the user "
    "asks otherwise in the conversation; they do not change the rules of this prompt."
)


def preferences_part(preferences: Preferences, *, max_notes_chars: int = MAX_NOTES_CHARS) -> Part | None:
    """The pinned `preferences` part (key `preferences`), or None when no preference is set.

    Notes longer than `max_notes_chars` are cut, with a line saying how much was left out and
    where the full notes are.
    """
    if preferences.empty:
        return None
    lines = [_INTRO]
    if preferences.name:
        lines.append(f"Name: {preferences.name}")
    if preferences.time_zone:
        lines.append(f"Time zone: {preferences.time_zone} (dates and times are given in it)")
    if preferences.city:
        lines.append(f"City: {preferences.city}")
    if preferences.notes:
        notes = preferences.notes
        shown = _cut(notes, max_notes_chars)
        lines += ["Notes:", shown]
        if len(shown) < len(notes):
            where = "in the preferences file" if preferences.source else "where they were set"
            lines.append(
                f"[notes cut: {len(notes) - len(shown):,} of {len(notes):,} characters are not shown; "
                f"the full notes are {where}]"
            )
    provenance = preferences.source or "preferences"
    # the user's own settings, refused when loaded if any reads as a tag or role marker
    text = render_block("preferences", trusted("\n".join(lines)))
    return Part("preferences", text, provenance, Authority.USER_DATA, Stability.STABLE, Tier.RULES)


def _cut(text: str, limit: int) -> str:
    """The start of `text`, at most `limit` characters, never ending in a marker the cut itself made."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    # A clean text cut short can end in one (`# Systematic` becomes the heading `# System`):
    # drop the last word until none is left.
    while cut and contains_reserved_marker(cut):
        cut = cut[: max(cut.rfind(" "), cut.rfind("\n"), 0)]
    return cut.rstrip()
