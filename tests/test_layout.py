"""The house's sizes, held: modules of 600 lines at most, classes of 400, functions of radon grade C, short docstrings.

What `STYLE.md` asks of every module of `src/lamina/`; radon's cyclomatic complexity grade C ends at 20.
"""

from __future__ import annotations

import ast
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
