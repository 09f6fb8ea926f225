"""Every error Lamina raises is a `LaminaError`, and `docs/errors.md` draws the tree as it is."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import lamina
from lamina import errors
from lamina.errors import LaminaError

_NAME = re.compile(r"[A-Za-z_]\w*")
_PAGE = Path(__file__).resolve().parents[1] / "docs" / "errors.md"


def _modules() -> list[str]:
    names = [lamina.__name__]
    for info in pkgutil.walk_packages(lamina.__path__, prefix="lamina."):
        if info.name.rsplit(".", 1)[-1] == "__main__":  # running it is its only purpose
            continue
        names.append(info.name)
    return names


def _public_exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in _modules():
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == name
                and not attr.startswith("_")
            ):
                found[f"{name}.{attr}"] = value
    return found


def _drawn_tree() -> dict[str, str | None]:
    """`{class name: parent name}` as drawn in the fenced block of `docs/errors.md`."""
    block = _PAGE.read_text(encoding="utf-8").split("```")[1]
    parents: dict[str, str | None] = {}
    stack: list[str] = []
    for line in block.splitlines():
        match = _NAME.search(line)
        if match is None:
            continue
        depth = match.start() // 4
        del stack[depth:]
        parents[match.group()] = stack[-1] if stack else None
        stack.append(match.group())
    return parents


@pytest.mark.slow
def test_every_public_exception_class_is_a_lamina_error() -> None:
    classes = _public_exception_classes()
    assert len(classes) >= 20  # the walk found the package, not an empty list
    outside = sorted(path for path, cls in classes.items() if not issubclass(cls, LaminaError))
    assert outside == []


def test_the_drawn_tree_is_the_class_tree() -> None:
    drawn = _drawn_tree()
    assert drawn["LaminaError"] is None
    for path, cls in _public_exception_classes().items():
        assert cls.__name__ in drawn, f"{path} is not drawn in docs/errors.md"
        parent = next(base for base in cls.__mro__[1:] if issubclass(base, LaminaError) or base is Exception)
        expected = None if cls is LaminaError else parent.__name__
        assert drawn[cls.__name__] == expected, f"{path}: drawn under {drawn[cls.__name__]}, derives from {expected}"
    for name in drawn:  # nothing drawn that does not exist
        assert isinstance(getattr(errors, name, None), type) or any(
            cls.__name__ == name for cls in _public_exception_classes().values()
        ), name
