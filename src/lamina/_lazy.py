"""Public names that load on first use (PEP 562), so `import lamina` stays cheap."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any


def load_lazily(namespace: dict[str, Any], package: str, table: Mapping[str, str], name: str) -> object:
    """`name` imported from the module `table` names for it and kept in `namespace` for next time.

    Args:
        namespace: The package's globals.
        package: The package's name, for the error.
        table: Each lazy name's module.
        name: The name asked for.

    Returns:
        Its value.

    Raises:
        AttributeError: `table` has no such name.
    """
    module = table.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    namespace[name] = value
    return value
