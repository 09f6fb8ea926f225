"""The house's sizes, held: modules of 600 lines at most, objects of 400, functions of radon grade C, short docstrings.

What `STYLE.md` asks of every module of `src/lamina/`; radon's cyclomatic complexity grade C ends at 20. An
object is a class with its in-package bases that have no other subclass: a mixin chain is one object.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from pathlib import Path

import pytest
from radon.complexity import cc_visit

import lamina

_ROOT = Path(lamina.__file__).parent
_SOURCES = sorted(_ROOT.rglob("*.py"))
_MOST_MODULE_LINES = 600
_MOST_CLASS_LINES = 400
_MOST_COMPLEXITY = 20
_MOST_DOCSTRING_LINES = 10


def _name(path: Path) -> str:
    return str(path.relative_to(_ROOT.parent))


def test_the_walk_reads_the_package() -> None:
    assert len(_SOURCES) > 150


@pytest.mark.parametrize("path", _SOURCES, ids=_name)
def test_no_module_is_over_600_lines_or_opens_with_an_essay(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count("\n") <= _MOST_MODULE_LINES, "split the module by concept"
    docstring = ast.get_docstring(ast.parse(text), clean=False) or ""
    assert docstring.count("\n") + 1 <= _MOST_DOCSTRING_LINES, "move the essay to docs/ or to the line it explains"


@pytest.mark.parametrize("path", _SOURCES, ids=_name)
def test_no_class_is_over_400_lines_and_no_function_over_complexity_c(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    classes = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ClassDef)]
    assert [c.name for c in classes if (c.end_lineno or c.lineno) - c.lineno + 1 > _MOST_CLASS_LINES] == []
    blocks = cc_visit(text)
    functions = [f for b in blocks for f in [b, *getattr(b, "methods", []), *getattr(b, "closures", [])]]
    assert [(f.name, f.complexity) for f in functions if f.complexity > _MOST_COMPLEXITY] == []


def test_the_checks_can_fail(tmp_path: Path) -> None:
    branches = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(_MOST_COMPLEXITY + 1))
    assert max(b.complexity for b in cc_visit(f"def f(x):\n{branches}    return -1\n")) > _MOST_COMPLEXITY


def _module_of(path: Path) -> str:
    return ".".join(path.relative_to(_ROOT.parent).with_suffix("").parts).removesuffix(".__init__")


def _class_lines() -> dict[type, int]:
    """Every top-level class of the package, imported, with the lines of its own statement."""
    lines: dict[type, int] = {}
    for path in _SOURCES:
        if path.name == "__main__.py":  # runs the command line when imported
            continue
        module = importlib.import_module(_module_of(path))
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            found = getattr(module, node.name, None) if isinstance(node, ast.ClassDef) else None
            if isinstance(found, type) and found.__module__ == module.__name__:
                lines[found] = (node.end_lineno or node.lineno) - node.lineno + 1
    return lines


def object_lines(cls: type, lines: dict[type, int], inside: Callable[[type], bool]) -> int:
    """The lines of `cls` as an object: its own, and those of each base `inside` the package with no other subclass."""

    def subclasses(base: type) -> list[type]:
        found: list[type] = base.__subclasses__()
        return [sub for sub in found if inside(sub)]

    sole = [b for b in cls.__mro__[1:] if inside(b) and len(subclasses(b)) == 1]
    return lines.get(cls, 0) + sum(lines.get(b, 0) for b in sole)


def test_no_object_is_over_400_lines() -> None:
    lines = _class_lines()
    sizes = {f"{c.__module__}.{c.__qualname__}": object_lines(c, lines, lines.__contains__) for c in lines}
    over = sorted(name for name, size in sizes.items() if size > _MOST_CLASS_LINES)
    assert over == [], "split the object: compose parts, do not inherit them"


def test_an_object_counts_its_mixins() -> None:
    class Mixin:
        pass

    class Shared:
        pass

    class Whole(Mixin, Shared):
        pass

    class Other(Shared):
        pass

    lines: dict[type, int] = {Mixin: 300, Shared: 50, Whole: 200, Other: 10}
    assert object_lines(Whole, lines, lines.__contains__) == 500  # the mixin's lines count, the shared base's do not
    assert object_lines(Other, lines, lines.__contains__) == 10


# tests/ mirrors src/lamina/: a test of one package lives in the folder named after it (a subpackage's in
# its subfolder, a private one's named without the `_`). The top level holds the suite's settings and the
# properties of the library as a whole, each listed with why.
TOP_LEVEL = {
    "__init__.py": "the suite is a package (`tests.`), so its helpers are imported by one name",
    "conftest.py": "suite-wide hypothesis profiles, fixtures and test order",
    "test_changelog.py": "CHANGELOG.md's moved names, over every package",
    "test_atomic_write.py": "the one atomic write every package uses (lamina._atomic), killed and raced",
    "test_core_install.py": "the wheel without extras, installed in a fresh venv",
    "test_docs_examples.py": "every python block of README.md and docs/",
    "test_docs_site.py": "one API page per public module",
    "test_error_tree.py": "every error any package raises is a LaminaError",
    "test_import_graph.py": "no import cycle anywhere in the package",
    "test_layout.py": "these sizes, and this mirror",
    "test_lock.py": "pyproject.toml, uv.lock and the environment agree",
    "test_missing_extras.py": "each feature's missing extra named, across packages",
    "test_names.py": "no two modules of the package share a file name or a class name",
    "test_no_content_breaks.py": "no text breaks a session: defang, engine, placement and store together",
    "test_private_imports.py": "no module imports another package's private module",
    "test_public_api.py": "the public surface of every package, pinned",
    "test_text_codec.py": "text in any encoding (lamina._text_codec), for attachments, Read, Grep and context files",
    "test_typed_toml.py": "settings files read as msgspec Structs (lamina._typed_toml), their errors in words",
    "test_untrusted_slots.py": "untrusted text in every slot through real turns, agent to provider",
}
# Folders named after no package of src/lamina/.
OTHER_FOLDERS = {
    "support": "helpers shared by the folders (engines, recorders, docs examples)",
    "wire": "the local wire server the provider tests talk to, and its own tests",
}


def package_folders(root: Path) -> frozenset[str]:
    """The folder each package under `root` has in tests/: its path, each `_` that starts a part left out."""
    folders = (path.parent.relative_to(root).parts for path in root.rglob("__init__.py") if path.parent != root)
    return frozenset("/".join(part.lstrip("_") for part in parts) for parts in folders)


def mirror_breaks(tests: Path, folders: frozenset[str]) -> list[str]:
    """What in `tests` breaks the mirror of the package `folders`, as paths relative to `tests`."""
    found: set[str] = set()
    for path in tests.rglob("*.py"):
        where = path.parent.relative_to(tests).as_posix()
        if where == ".":
            if path.name not in TOP_LEVEL:
                found.add(path.name)
        elif where not in folders and where not in OTHER_FOLDERS:
            found.add(f"{where}/{path.name}")
        elif not (path.parent / "__init__.py").is_file():
            found.add(f"{where}/__init__.py missing")
    made = {path.name for path in tests.iterdir() if path.is_dir() and any(path.glob("*.py"))}
    found.update(f"{folder}/ missing" for folder in folders if "/" not in folder and folder not in made)
    return sorted(found)


def test_tests_mirror_the_packages_and_the_top_level_holds_only_the_whole_librarys_properties() -> None:
    breaks = mirror_breaks(Path(__file__).parent, package_folders(_ROOT))
    assert breaks == [], "move a test of one package into its folder"


def test_the_mirror_check_can_fail(tmp_path: Path) -> None:
    source = tmp_path / "src"
    for name in ("engine/__init__.py", "agent/__init__.py", "session/__init__.py", "session/_jsonl/__init__.py"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text("")
    assert package_folders(source) == {"engine", "agent", "session", "session/jsonl"}
    tests = tmp_path / "tests"
    for name in (
        "engine/__init__.py",
        "engine/test_a.py",
        "engine/deep/test_b.py",
        "lost/test_c.py",
        "test_d.py",
        "session/__init__.py",
        "session/jsonl/__init__.py",
        "session/jsonl/test_e.py",
        "support/engine.py",
    ):
        (tests / name).parent.mkdir(parents=True, exist_ok=True)
        (tests / name).write_text("")
    assert mirror_breaks(tests, package_folders(source)) == [
        "agent/ missing",
        "engine/deep/test_b.py",
        "lost/test_c.py",
        "support/__init__.py missing",
        "test_d.py",
    ]
