"""Private stays private: no module imports another package's private module or private name.

The rule, read from the source with `ast` as `test_import_graph.py` does (so imports inside
functions and under TYPE_CHECKING count): in an imported dotted name, the first segment after
`lamina` that starts with `_` marks what is private (`lamina.session._entries`,
`lamina.engine._prefix_context`, `lamina.session.postgres._pg_store`), and it may be imported only
from inside its parent (`lamina.session`, `lamina.engine`, `lamina.session.postgres`): the
parent itself and the modules below it. Everyone else, a parent package of that parent included,
uses the public names (`from lamina.session import LogEntry`). Top-level private modules
(`lamina._lazy`) are the whole package's.

`ALLOWED` lists the imports that still break the rule. It can only shrink: the test fails for an
import that breaks the rule and is not listed, and for a listed import that no longer exists.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import lamina

_ROOT = Path(lamina.__file__).parent

# (importing module, private name it imports): each is a debt, to pay by using or making a public name.
ALLOWED: set[tuple[str, str]] = set()


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in _ROOT.rglob("*.py"):
        parts = list(path.relative_to(_ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def private_owner(target: str) -> str | None:
    """The dotted name inside which `target` may be imported, or None when `target` is public."""
    pieces = target.split(".")
    for end, piece in enumerate(pieces[1:], start=1):
        if piece.startswith("_"):
            return ".".join(pieces[:end])
    return None


def may_import(importer: str, target: str) -> bool:
    """Whether the module `importer` may import the dotted name `target` under the rule above."""
    owner = private_owner(target)
    return owner is None or importer == owner or importer.startswith(owner + ".")


def _imported_names(name: str, path: Path) -> set[str]:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            targets.update(f"{base}.{alias.name}" for alias in node.names)
    return {target for target in targets if target.split(".")[0] == "lamina"}


def _violations() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for name, path in _modules().items():
        for target in _imported_names(name, path):
            if not may_import(name, target):
                owner = private_owner(target)
                assert owner is not None
                private = ".".join(target.split(".")[: owner.count(".") + 2])
                found.add((name, private))
    return found


def test_the_rule_tells_private_from_public() -> None:
    assert may_import("lamina.engine", "lamina.session.LogEntry")
    assert may_import("lamina.session._jsonl._jsonl_store", "lamina.session._entries.LogEntry")
    assert may_import("lamina.session.postgres._pg_store", "lamina.session._entries.LogEntry")
    assert may_import("lamina.session._bundle._bundle_transfer", "lamina.session._jsonl._jsonl_store.LocalSessionStore")
    assert may_import("lamina.defang", "lamina.defang")
    assert not may_import("lamina.engine", "lamina.session._entries.LogEntry")
    assert not may_import("lamina.cli._sessions", "lamina.session._jsonl.LocalSessionStore")
    assert not may_import("lamina.session._location", "lamina.session.postgres._connection.split_url")
    assert not may_import("lamina.serve._requests", "lamina.engine._prefix_context")
    assert not may_import("lamina.sessions", "lamina.session._entries")


def test_the_walk_reads_relative_and_function_level_imports(tmp_path: Path) -> None:
    path = tmp_path / "_cut.py"
    path.write_text(
        "from ..session._entries import LogEntry\n"
        "def f() -> None:\n"
        "    from lamina.tools import _rules\n"
        "    import lamina.workspace._ignore\n",
        encoding="utf-8",
    )
    assert _imported_names("lamina.compaction._cut", path) == {
        "lamina.session._entries.LogEntry",
        "lamina.tools._rules",
        "lamina.workspace._ignore",
    }


@pytest.mark.slow
def test_no_module_imports_another_packages_private_names_beyond_the_allowlist() -> None:
    new = sorted(_violations() - ALLOWED)
    assert new == [], "import these through the package's public names (or make them public, pinned)"


@pytest.mark.slow
def test_the_allowlist_only_lists_imports_that_still_exist() -> None:
    gone = sorted(ALLOWED - _violations())
    assert gone == [], "these imports are gone: take them off ALLOWED"


def _test_violations(tests: Path) -> list[tuple[str, str]]:
    """Imports in `tests` of a private module outside the test's own package folder (`tests/<package>/`)."""
    found: list[tuple[str, str]] = []
    for path in sorted(tests.rglob("*.py")):
        parts = path.relative_to(tests).parts
        home = f"lamina.{parts[0]}" if len(parts) > 1 else "lamina"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            for target in targets:
                owner = private_owner(target) if target.startswith("lamina.") else None
                inside = owner == home or (home != "lamina" and owner is not None and owner.startswith(home + "."))
                if owner is not None and not inside:
                    found.append((str(path.relative_to(tests)), target))
    return found


@pytest.mark.slow
def test_tests_import_private_modules_only_of_their_own_package() -> None:
    assert _test_violations(Path(__file__).parent) == []


def test_the_test_rule_sees_a_private_import_from_another_package(tmp_path: Path) -> None:
    (tmp_path / "session").mkdir()
    (tmp_path / "session" / "test_own.py").write_text("from lamina.session._entries import PartRecord\n")
    (tmp_path / "session" / "test_other.py").write_text("import lamina.engine._state\n")
    (tmp_path / "test_top.py").write_text("from lamina.session import LogEntry\nfrom lamina.cli._chat import chat\n")
    assert sorted(_test_violations(tmp_path)) == [
        ("session/test_other.py", "lamina.engine._state"),
        ("test_top.py", "lamina.cli._chat"),
    ]
