"""TOML settings files read as msgspec Structs, their problems said in Lamina's words (pure).

`read_toml(text, Type)` parses and converts in one step (`convert_table` a table already read);
what does not fit raises `TomlProblem` with the key at fault (`paths[2]`, `sandbox.network`, the key
of a table of values: `paths.src`) and a sentence naming the allowed fields or values (or a field's
`Meta(description=...)`), with a "did you mean" for a misspelt key. `read_config_file` says the
problem as a `ConfigError` naming the file (the CLI's settings, the trust file).
"""

from __future__ import annotations

import difflib
import re
import tomllib
import types
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Final, TypeVar, Union, get_args, get_origin

import msgspec

from lamina.errors import ConfigError, UsageError

T = TypeVar("T")

_AT: Final = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_UNKNOWN: Final = re.compile(r"Object contains unknown field `(?P<name>.*)`", re.DOTALL)  # any key, backticks too
_EXPECTED: Final = re.compile(r"Expected `(?P<want>[^`]*)`, got `(?P<got>[^`]*)`")
_BOUNDED: Final = re.compile(r"Expected `(?P<want>[^`]*)`(?P<bound> .*)")
_MISSING: Final = re.compile(r"Object missing required field `(?P<name>[^`]*)`")
_STEP: Final = re.compile(r"\.[^.\[]+|\[\d+\]|\[\.\.\.\]")


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
    return convert_table(raw, into)


def convert_table(raw: Mapping[str, object], into: type[T]) -> T:
    """The TOML table `raw` (as `tomllib` reads it) as an `into`, strictly typed; for a sub-table read on its own.

    Raises:
        TomlProblem: As `read_toml`, the key relative to `raw`.
    """
    try:
        return msgspec.convert(raw, into, strict=True)
    except msgspec.ValidationError as exc:
        raise _problem(str(exc), into, raw) from None


def did_you_mean(word: object, choices: Iterable[object]) -> str:
    """` (did you mean 'x'?)` for the choice closest to a misspelt `word`, or "" when none is close."""
    words = [choice for choice in choices if isinstance(choice, str)]
    close = difflib.get_close_matches(word, words, n=1) if isinstance(word, str) else []
    return f" (did you mean {close[0]!r}?)" if close else ""


def _problem(message: str, into: type, raw: object) -> TomlProblem:
    found = _AT.search(message)
    text = message[: found.start()] if found else message
    key, at, value = _locate(into, found.group("path") if found else "", raw)
    info = msgspec.inspect.type_info(at) if at is not None else None
    unknown = _UNKNOWN.fullmatch(text)
    if unknown is not None:
        name = unknown.group("name")
        struct = _unwrapped(info)
        fields = [f.encode_name for f in struct.fields] if isinstance(struct, msgspec.inspect.StructType) else []
        listed = f"; the fields are {', '.join(fields)}" if fields else ""
        return TomlProblem(
            f"{key}.{name}" if key else name, f"unknown field {name!r}{did_you_mean(name, fields)}{listed}"
        )
    missing = _MISSING.fullmatch(text)
    if missing is not None:
        return TomlProblem(f"{key}.{missing.group('name')}" if key else missing.group("name"), "is required")
    return TomlProblem(key or None, _wrong_value(text, info, value))


def _wrong_value(text: str, info: msgspec.inspect.Type | None, value: object) -> str:
    """What is wrong with a value msgspec refused (`text`), in words: the field's description, allowed values."""
    said, allowed = _described(info), _allowed(info)
    expected = _EXPECTED.fullmatch(text)
    if expected is not None:
        want = said or (f"one of {', '.join(map(repr, allowed))}" if allowed else _words(expected.group("want")))
        return f"must be {want}, not {_words(expected.group('got'))}"
    bounded = _BOUNDED.fullmatch(text)
    if bounded is not None:
        if said:
            return f"must be {said}, not {value!r}"
        return f"must be {_words(bounded.group('want'))}{bounded.group('bound')}"
    said = text[0].lower() + text[1:]
    if text.startswith("Invalid enum value"):
        listed = f"; allowed: {', '.join(repr(choice) for choice in allowed)}" if allowed else ""
        return said + did_you_mean(value, allowed) + listed
    return said


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


def _locate(into: object, path: str, raw: object) -> tuple[str, object | None, object]:
    """The key msgspec's `path` (`.a[2].b`, `.paths[...]`) names in `raw`, the type there and the value there.

    msgspec says `[...]` for any key of a table of values; the key is the first whose value does not fit,
    as msgspec checks them in order. The type is None where it cannot be followed.
    """
    shown, at, value = "", into, raw
    for step in _STEP.findall(path):
        if at is None:
            shown += step
            continue
        if step == "[...]":
            table = _member(at, dict)
            kind = get_args(table)[1] if table is not None and len(get_args(table)) == 2 else None
            bad = _first_misfit(value, kind)
            if bad is None:
                return shown.lstrip("."), None, None
            shown, at, value = f"{shown}.{bad[0]}", kind, bad[1]
        elif step.startswith("["):
            items = _member(at, list)
            index = int(step[1:-1])
            at = get_args(items)[0] if items is not None and get_args(items) else None
            shown += step
            value = value[index] if isinstance(value, list) and index < len(value) else None
        else:
            struct = _member(at, msgspec.Struct)
            name = step[1:]
            fields = msgspec.structs.fields(struct) if isinstance(struct, type) else ()
            at = next((f.type for f in fields if f.encode_name == name), None)
            shown += step
            value = value.get(name) if isinstance(value, dict) else None
    return shown.lstrip("."), at, value


def _member(at: object, kind: type) -> object | None:
    """The type of `at` (under `Annotated`, in a union) that is a `kind`: a dict, a list or a Struct."""
    while get_origin(at) is Annotated:
        at = get_args(at)[0]
    if get_origin(at) in (Union, types.UnionType):
        return next((m for m in map(lambda t: _member(t, kind), get_args(at)) if m is not None), None)
    origin = get_origin(at) or at
    return at if isinstance(origin, type) and issubclass(origin, kind) else None


def _first_misfit(table: object, kind: object) -> tuple[str, object] | None:
    """The first key of `table` (and its value) whose value is not a `kind`, or None."""
    if not isinstance(table, dict) or kind is None:
        return None
    for key, item in table.items():
        try:
            msgspec.convert(item, kind, strict=True)
        except msgspec.ValidationError:
            return str(key), item
    return None


def _unwrapped(info: msgspec.inspect.Type | None) -> msgspec.inspect.Type | None:
    if isinstance(info, msgspec.inspect.UnionType):
        kept = [t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)]
        if len(kept) == 1:
            return _unwrapped(kept[0])
    if isinstance(info, msgspec.inspect.Metadata):
        return _unwrapped(info.type)
    return info


def _described(info: msgspec.inspect.Type | None) -> str:
    """The `Meta(description=...)` of a field's type, the words its errors use; "" when it has none."""
    while isinstance(info, msgspec.inspect.UnionType):
        kept = [t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)]
        if len(kept) != 1:
            return ""
        info = kept[0]
    if isinstance(info, msgspec.inspect.Metadata):
        return str((info.extra_json_schema or {}).get("description", "")) or _described(info.type)
    return ""


def _allowed(info: msgspec.inspect.Type | None) -> tuple[object, ...]:
    found = _unwrapped(info)
    return tuple(found.values) if isinstance(found, msgspec.inspect.LiteralType) else ()
