"""TOML settings files read as msgspec Structs, their problems said in Lamina's words (pure).

`read_toml(text, Type)` parses and converts in one step; what does not fit raises `TomlProblem`
with the key at fault (`paths[2]`, `sandbox.network`) and a sentence naming the allowed fields or
values, with a "did you mean" for a misspelt key. `read_config_file` reads a file that way and
says the problem as a `ConfigError` naming the file (the CLI's settings, the trust file).
"""

from __future__ import annotations

import difflib
import re
import tomllib
from pathlib import Path
from typing import Final, TypeVar

import msgspec

from lamina.errors import ConfigError, UsageError

T = TypeVar("T")

_AT: Final = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_UNKNOWN: Final = re.compile(r"Object contains unknown field `(?P<name>[^`]*)`")
_EXPECTED: Final = re.compile(r"Expected `(?P<want>[^`]*)`, got `(?P<got>[^`]*)`")
_BOUNDED: Final = re.compile(r"Expected `(?P<want>[^`]*)`(?P<bound> .*)")


class TomlProblem(UsageError, ValueError):
    """A settings file that does not fit its type: the key at fault (None: the file) and what is wrong."""

    def __init__(self, key: str | None, problem: str) -> None:
        super().__init__(f"{key}: {problem}" if key is not None else problem)
        self.key = key
        self.problem = problem


def read_config_file(path: Path, into: type[T]) -> T | None:
    """The settings file at `path` as an `into`, or None when there is no such file.

    Raises:
        ConfigError: The file cannot be read or does not fit `into`; the message names the file,
            the key and what it may be (`read_toml`).
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return read_toml(data.decode("utf-8-sig"), into)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 (invalid byte at offset {exc.start})") from None
    except TomlProblem as exc:
        raise ConfigError(f"{path}: {exc}") from None


def read_toml(text: str, into: type[T]) -> T:
    """The TOML `text` as an `into` (a msgspec Struct with `forbid_unknown_fields`), strictly typed.

    Raises:
        TomlProblem: Not TOML, an unknown key (with the fields there are and the closest one), a
            value of the wrong type or not among the allowed values (with them).
    """
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TomlProblem(None, f"not valid TOML ({exc})") from None
    try:
        return msgspec.convert(raw, into, strict=True)
    except msgspec.ValidationError as exc:
        raise _problem(str(exc), into) from None


def _problem(message: str, into: type) -> TomlProblem:
    found = _AT.search(message)
    path = found.group("path") if found else ""
    text = message[: found.start()] if found else message
    key = path.lstrip(".").replace("[...]", "") or None
    unknown = _UNKNOWN.fullmatch(text)
    if unknown is not None:
        name = unknown.group("name")
        fields = _fields_at(into, path)
        close = difflib.get_close_matches(name, fields, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        listed = f"; the fields are {', '.join(fields)}" if fields else ""
        return TomlProblem(f"{key}.{name}" if key else name, f"unknown field {name!r}{hint}{listed}")
    expected = _EXPECTED.fullmatch(text)
    if expected is not None:
        return TomlProblem(key, f"must be {_words(expected.group('want'))}, not {_words(expected.group('got'))}")
    bounded = _BOUNDED.fullmatch(text)
    if bounded is not None:
        return TomlProblem(key, f"must be {_words(bounded.group('want'))}{bounded.group('bound')}")
    if text.startswith("Invalid enum value"):
        allowed = _allowed_at(into, path)
        said = f"; allowed: {', '.join(repr(value) for value in allowed)}" if allowed else ""
        return TomlProblem(key, text[0].lower() + text[1:] + said)
    return TomlProblem(key, text[0].lower() + text[1:])


_WORDS: Final = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "array": "a list",
    "object": "a table",
    "object | array": "a table or a list",
    "array | object": "a list or a table",
}


def _words(name: str) -> str:
    """The type names msgspec gives, in words: `str | null` → `a string` (a missing key is already allowed)."""
    if name in _WORDS:
        return _WORDS[name]
    kinds = [kind for kind in name.split(" | ") if kind != "null"]
    return " or ".join(_WORDS.get(kind, kind) for kind in kinds)


def _type_at(into: type, path: str) -> msgspec.inspect.Type | None:
    """The type at `path` (`.a.b`; list items skipped) of the Struct `into`, or None."""
    info: msgspec.inspect.Type = msgspec.inspect.type_info(into)
    for part in filter(None, path.replace("[...]", "").split(".")):
        name = re.sub(r"\[\d+\]$", "", part)
        info = _unwrapped(info)
        if not isinstance(info, msgspec.inspect.StructType):
            return None
        field = next((f for f in info.fields if f.encode_name == name), None)
        if field is None:
            return None
        info = field.type
        if part != name:  # an item of a list
            info = _unwrapped(info)
            info = getattr(info, "item_type", info)
    return _unwrapped(info)


def _unwrapped(info: msgspec.inspect.Type) -> msgspec.inspect.Type:
    if isinstance(info, msgspec.inspect.UnionType):
        kept = [t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)]
        if len(kept) == 1:
            return kept[0]
    return info


def _fields_at(into: type, path: str) -> list[str]:
    info = _type_at(into, path)
    return [f.encode_name for f in info.fields] if isinstance(info, msgspec.inspect.StructType) else []


def _allowed_at(into: type, path: str) -> tuple[object, ...]:
    info = _type_at(into, path)
    return tuple(info.values) if isinstance(info, msgspec.inspect.LiteralType) else ()
