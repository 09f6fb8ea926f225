"""One name, one thing: no two modules of `src/lamina/` share a file name, and no two define a class of one name.

A file name or a class name then finds its one room with a search, in a traceback or an editor's
file list. `__init__.py` and `__main__.py` are every package's doors, so they do not count.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import lamina

_ROOT = Path(lamina.__file__).parent
_DOORS = frozenset({"__init__.py", "__main__.py"})

# What still breaks the rule while another step of #43 lands; each entry holds exactly the duplicates
# it names (the test fails for a new one and for a listed one that is gone): the lead removes them on merge.
_SHARED_FILE_NAMES: dict[str, frozenset[str]] = {}
_SHARED_CLASS_NAMES: dict[str, frozenset[str]] = {}


def _modules(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if p.name not in _DOORS)


def _shared(found: dict[str, set[str]]) -> dict[str, frozenset[str]]:
    return {name: frozenset(where) for name, where in sorted(found.items()) if len(where) > 1}


def file_names_shared(root: Path) -> dict[str, frozenset[str]]:
    """Each file name more than one module under `root` has, with those modules (relative to `root`)."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in _modules(root):
        found[path.name].add(path.relative_to(root).as_posix())
    return _shared(found)


def class_names_shared(root: Path) -> dict[str, frozenset[str]]:
    """Each class name more than one module under `root` defines (at any depth, private ones too), and where."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in _modules(root):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                found[node.name].add(path.relative_to(root).as_posix())
    return _shared(found)


def test_the_walk_reads_the_package() -> None:
    assert len(_modules(_ROOT)) > 150


def test_no_two_modules_share_a_file_name() -> None:
    assert file_names_shared(_ROOT) == _SHARED_FILE_NAMES, "name the module for what it holds"


def test_no_two_modules_define_a_class_of_one_name() -> None:
    assert class_names_shared(_ROOT) == _SHARED_CLASS_NAMES, "name the class for what it is"


def test_the_checks_can_fail(tmp_path: Path) -> None:
    for package in ("a", "b"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("class Part: ...\n")
        (tmp_path / package / "_parts.py").write_text("class Part:\n    class Meta: ...\n")
    (tmp_path / "a" / "_other.py").write_text("def f() -> None:\n    class Meta: ...\n")
    assert file_names_shared(tmp_path) == {"_parts.py": frozenset({"a/_parts.py", "b/_parts.py"})}
    assert class_names_shared(tmp_path) == {  # a nested class counts; a door's does not
        "Meta": frozenset({"a/_other.py", "a/_parts.py", "b/_parts.py"}),
        "Part": frozenset({"a/_parts.py", "b/_parts.py"}),
    }
