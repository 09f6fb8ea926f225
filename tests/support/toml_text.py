"""Arbitrary TOML documents for the property tests of settings files: values written as TOML text."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

Toml = str | int | float | bool | list["Toml"] | dict[str, "Toml"]


def toml_string(text: str) -> str:
    """A TOML basic string: every control character escaped (TOML refuses them raw, DEL included)."""
    escaped = "".join(
        "\\" + c if c in '"\\' else f"\\u{ord(c):04x}" if ord(c) < 32 or ord(c) == 127 else c for c in text
    )
    return f'"{escaped}"'


def toml_value(value: Toml) -> str:
    """`value` as TOML text: lists as arrays, tables inline."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(map(toml_value, value)) + "]"
    return "{" + ", ".join(f"{toml_string(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


def toml_document(document: dict[str, Toml]) -> str:
    """A document of `key = value` lines."""
    return "".join(f"{toml_string(key)} = {toml_value(value)}\n" for key, value in document.items())


def toml_documents(keys: Sequence[str], words: Sequence[str] = ()) -> st.SearchStrategy[dict[str, Toml]]:
    """Documents whose keys are mostly `keys` and whose values, nested, are often `words` or `keys`."""
    names = st.sampled_from(keys) | st.text(max_size=10)
    scalars = (
        st.sampled_from([*keys, *words, ""])
        | st.text(max_size=20)
        | st.integers()
        | st.booleans()
        | st.floats(allow_nan=False, allow_infinity=False)
    )
    values = st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(names, inner, max_size=4),
        max_leaves=12,
    )
    return st.dictionaries(names, values, max_size=6)
