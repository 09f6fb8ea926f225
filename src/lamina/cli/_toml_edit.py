"""Edits to a TOML settings file that keep what the user wrote: comments, order, dotted keys, inline tables (pure).

Through tomlkit, which parses a file into a document that prints back byte for byte; only the
value changed is new. See docs/configuration.md ("Saved rules").
"""

from __future__ import annotations

from collections.abc import Sequence

import tomlkit
import tomlkit.container
import tomlkit.exceptions
import tomlkit.items

from lamina.errors import ConfigError

_TABLES = (tomlkit.items.Table, tomlkit.items.InlineTable, tomlkit.container.OutOfOrderTableProxy)
"""What a table is in a tomlkit document: `[t]`, `t = {...}`, or a table split by other tables or dotted keys."""


def with_appended(text: str, table: str, key: str, values: Sequence[str], *, file: str) -> str:
    """`text` with `values` added to the end of the array `table.key` (the table and the array made if missing).

    Whether `table` is a `[table]`, dotted keys (`table.key = [...]`) or an inline table
    (`table = { key = [...] }`), it stays what it was; every comment and blank line stays where it is.

    Raises:
        ConfigError: `text` is not TOML, or `table` or `table.key` is there but is not a table or
            an array; the message names `file` and the key.
    """
    try:
        document = tomlkit.parse(text)
    except tomlkit.exceptions.ParseError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    if table not in document:
        document[table] = tomlkit.table()
    container = document[table]
    if not isinstance(
        container, tomlkit.items.Table | tomlkit.items.InlineTable | tomlkit.container.OutOfOrderTableProxy
    ):
        raise ConfigError(f"{file}: {table} must be a table, got {type(container.unwrap()).__name__}")
    if key not in container:
        container[key] = tomlkit.array()
    array = container[key]
    if not isinstance(array, tomlkit.items.Array):
        raise ConfigError(f"{file}: {table}.{key} must be an array, got {type(array.unwrap()).__name__}")
    for value in values:
        array.append(value)
    return tomlkit.dumps(document)
