"""Who uses each public name: another package of src/lamina, a docs page, an example, a benchmark, a signature.

Read from the source with `ast` (tests/test_public_api.py holds the rule). A name of the surface is a
door, `(public module, name)`; what it is is its origin, `(module that defines it, name)`, found by
following the imports (those under TYPE_CHECKING and the PEP 562 `_LAZY` tables included). A door is
used when:
- a module of another package of src/lamina imports it or reaches it as an attribute
  (`lamina.session.LogEntry`); a public module that re-exports it uses it only while its own door is used;
- a Python block of README.md or docs/ (not docs/reference/, which renders whole `__all__`s) does so, or
  the prose names it in a code span (`` `LogEntry` ``, `` `lamina.session.LogEntry` ``) or an autoref
  link (`[...][lamina.session.LogEntry]`); a bare name counts for every door of that name;
- an example, a benchmark or a `[project.scripts]` entry point does so;
- its origin appears in the signature of a used door: a parameter or return annotation, a base class, an
  annotated field or a public method of a class, the annotation of a constant, the value of a type alias.
"""

from __future__ import annotations

import ast
import gc
import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"

Door = tuple[str, str]
"""A public name: (public module, name)."""
Origin = tuple[str, str]
"""Where a name is defined: (module, name); a module itself is (module, "")."""

_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_AUTOREF = re.compile(r"\]\[([A-Za-z_][\w.]*)\]|\[([A-Za-z_][\w.]*)\]\[\]")
_IDENTIFIER = re.compile(r"[A-Za-z_][\w.]*\w|[A-Za-z_]")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*\{?\.?(\w*)")


@dataclass(frozen=True)
class _Binding:
    """What a module-level name is bound to: a definition here, or an import."""

    node: ast.AST | None = None
    source: str | None = None
    name: str | None = None  # None with a source: the module itself


def source_path(module: str) -> Path | None:
    """The file of a `lamina` module, or None."""
    base = SRC.joinpath(*module.split("."))
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _top_level(body: Iterable[ast.stmt]) -> Iterator[ast.stmt]:
    """A module's statements, those under `if` (TYPE_CHECKING) and `try` included."""
    for node in body:
        if isinstance(node, ast.If):
            yield from _top_level([*node.body, *node.orelse])
        elif isinstance(node, ast.Try):
            yield from _top_level([*node.body, *node.orelse, *node.finalbody])
            for handler in node.handlers:
                yield from _top_level(handler.body)
        else:
            yield node


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join([*anchor, *([node.module] if node.module else [])])


def _package_context(module: str) -> str:
    path = source_path(module)
    return module if path is not None and path.name == "__init__.py" else module.rpartition(".")[0]


@cache
def _tree(module: str) -> ast.Module:
    path = source_path(module)
    assert path is not None, module
    return ast.parse(path.read_text(encoding="utf-8"))


@cache
def _bindings(module: str) -> Mapping[str, _Binding]:
    found: dict[str, _Binding] = {}
    lazy: dict[str, str] = {}
    for node in _top_level(_tree(module).body):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            found[node.name] = _Binding(node)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    found[target.id] = _Binding(node)
                    if target.id == "_LAZY" and isinstance(node.value, ast.Dict):
                        lazy = {
                            ast.literal_eval(key): ast.literal_eval(value)
                            for key, value in zip(node.value.keys, node.value.values, strict=True)
                            if key is not None
                        }
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, _package_context(module))
            for alias in node.names:
                found[alias.asname or alias.name] = _Binding(source=base, name=alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                found[bound] = _Binding(source=alias.name if alias.asname else bound)
    for name, source in lazy.items():
        found.setdefault(name, _Binding(source=source, name=name))
    return found


@cache
def origin(module: str, name: str) -> Origin:
    """Where `module.name` is defined, following imports; a module is `(its name, "")`."""
    if module.split(".")[0] != "lamina" or source_path(module) is None:
        return (module, name)
    binding = _bindings(module).get(name)
    if binding is None:
        submodule = f"{module}.{name}"
        return (submodule, "") if source_path(submodule) is not None else (module, name)
    if binding.source is None:
        return (module, name)
    if binding.name is None:
        return (binding.source, "")
    return origin(binding.source, binding.name)


def package_of(module: str) -> str:
    """The package a module belongs to: cut at its first private segment; a loose public module is its own."""
    parts = module.split(".")
    for end, part in enumerate(parts[1:], start=1):
        if part.startswith("_"):
            parts = parts[:end]
            break
    cut = ".".join(parts)
    path = source_path(cut)
    if path is not None and path.name != "__init__.py" and len(parts) > 2:
        return ".".join(parts[:-1])
    return cut


@dataclass
class Uses:
    """What the code and the pages use of the surface."""

    surface: Mapping[str, Iterable[str]]
    direct: dict[Door, set[str]] = field(default_factory=dict)
    """Each door used directly, with where (a path, or `package:` for another package)."""
    reexports: dict[Door, set[Door]] = field(default_factory=dict)
    """A public module's door to the doors it re-exports."""

    def __post_init__(self) -> None:
        self.doors = {(module, name) for module, names in self.surface.items() for name in names}
        self.by_name: dict[str, set[Door]] = {}
        for door in self.doors:
            self.by_name.setdefault(door[1], set()).add(door)

    def door(self, dotted: str) -> Door | None:
        """The door a dotted path reaches (`lamina.session.LogEntry`), or None."""
        parts = dotted.split(".")
        for end in range(len(parts) - 1, 0, -1):
            candidate = (".".join(parts[:end]), parts[end])
            if candidate in self.doors:
                return candidate
        return None

    def add(self, door: Door, where: str) -> None:
        """Record a direct use."""
        self.direct.setdefault(door, set()).add(where)

    def read_python(self, tree: ast.Module, where: str, module: str | None = None) -> set[str]:
        """Record the doors `tree` imports or reaches; returns the bare names it loads (for code spans).

        Args:
            tree: The code.
            where: Its path, for the record.
            module: Its module when it is in src/lamina: a use of its own package does not count, and a
                public module's import of a name it exports is a re-export.

        Returns:
            The names the code loads.
        """
        home = package_of(module) if module is not None else None
        exporting = set(self.surface.get(module, ())) if module is not None else set()
        reexporting = {id(node) for node in _top_level(tree.body)} if exporting else set()
        aliases: dict[str, str] = {}
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _absolute(node, _package_context(module)) if module is not None else (node.module or "")
                for alias in node.names:
                    door = (base, alias.name)
                    bound = alias.asname or alias.name
                    if source_path(f"{base}.{alias.name}") is not None:
                        aliases[bound] = f"{base}.{alias.name}"
                    if door not in self.doors:
                        continue
                    if id(node) in reexporting and bound in exporting:
                        self.reexports.setdefault((module, bound), set()).add(door)  # type: ignore[arg-type]
                    elif home is None or package_of(base) != home:
                        self.add(door, where)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else ""
            elif isinstance(node, ast.Name):
                names.add(node.id)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                dotted = _dotted(node)
                if dotted is None or dotted.split(".")[0] not in aliases:
                    continue
                root, _, rest = dotted.partition(".")
                path = f"{aliases[root] or root}.{rest}"
                reached = self.door(path)
                if reached is not None and (home is None or package_of(reached[0]) != home):
                    self.add(reached, where)
        return names

    def read_markdown(self, path: Path) -> None:
        """Record what a page uses: its python blocks, its code spans and its autoref links."""
        where = path.relative_to(ROOT).as_posix() if ROOT in path.parents else path.name
        prose: list[str] = []
        block: list[str] = []
        fence: str | None = None  # the open fence, None in prose
        python = False
        for line in path.read_text(encoding="utf-8").splitlines():
            if fence is None:
                opening = _FENCE.match(line)
                if opening is None:
                    prose.append(line)
                else:
                    fence, python, block = opening[1], opening[2] in ("python", "py"), []
            elif line.strip().startswith(fence) and set(line.strip()) == {fence[0]}:
                if python:
                    self.read_python(ast.parse(_dedent("\n".join(block))), where)
                else:
                    self._read_text_block("\n".join(block), where)
                fence = None
            else:
                block.append(line)
        text = "\n".join(prose)
        for match in _AUTOREF.finditer(text):
            door = self.door(match[1] or match[2])
            if door is not None:
                self.add(door, where)
        for match in _CODE_SPAN.finditer(text):
            self._read_span(match[2].strip(), where)

    def _read_text_block(self, text: str, where: str) -> None:
        """A block that does not run (a tree, a listing): its identifiers that cannot be English words."""
        for word in _IDENTIFIER.findall(text):
            if word.startswith("lamina."):
                door = self.door(word)
                if door is not None:
                    self.add(door, where)
                continue
            for part in word.split("."):
                if "_" in part or part != part.lower():
                    for door in self.by_name.get(part, ()):
                        self.add(door, where)

    def _read_span(self, span: str, where: str) -> None:
        try:
            tree = ast.parse(span)
        except SyntaxError:
            return
        for name in self.read_python(tree, where):
            for door in self.by_name.get(name, ()):
                self.add(door, where)
        for node in ast.walk(tree):  # a dotted path a page names without importing it
            dotted = _dotted(node) if isinstance(node, ast.Attribute) else None
            named = self.door(dotted) if dotted is not None and dotted.startswith("lamina.") else None
            if named is not None:
                self.add(named, where)


def _dedent(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    cut = min((len(line) - len(line.lstrip(" ")) for line in lines), default=0)
    return "\n".join(line[cut:] for line in text.splitlines())


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


@contextmanager
def _collector_paused() -> Iterator[None]:
    """No garbage collection while the sources are parsed.

    Parsing every module allocates enough to start a collection, and a collection then runs the
    finalizers of what earlier tests left unclosed (event loops) in the middle of the AST's
    construction, which Python 3.11 can report as `SystemError: AST constructor recursion depth
    mismatch` (CPython gh-106905). Nothing parsed here makes reference cycles.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_uses(surface: Mapping[str, Iterable[str]]) -> Uses:
    """Every use of the surface by src/lamina, README.md and docs/ (not docs/reference/), examples/ and benchmarks/.

    Args:
        surface: The public modules and their names.

    Returns:
        The uses.
    """
    uses = Uses(surface)
    with _collector_paused():
        for path in sorted((SRC / "lamina").rglob("*.py")):
            module = _module_of(path)
            uses.read_python(_tree(module), f"{package_of(module)}:", module)
        for folder in ("examples", "benchmarks"):
            for path in sorted((ROOT / folder).rglob("*.py")):
                uses.read_python(ast.parse(path.read_text(encoding="utf-8")), path.relative_to(ROOT).as_posix())
        reference = ROOT / "docs" / "reference"
        for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
            if reference not in path.parents:
                uses.read_markdown(path)
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"].get("scripts", {})
    for target in scripts.values():
        door = uses.door(target.replace(":", "."))
        if door is not None:
            uses.add(door, "pyproject.toml")
    return uses


def _is_public_member(name: str) -> bool:
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def _function_annotations(node: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.expr]:
    arguments = node.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    every += [arg for arg in (arguments.vararg, arguments.kwarg) if arg is not None]
    yield from (arg.annotation for arg in every if arg.annotation is not None)
    if node.returns is not None:
        yield node.returns


def _signature_parts(node: ast.AST) -> Iterator[ast.expr]:
    """The type expressions of a definition's signature."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        yield from _function_annotations(node)
    elif isinstance(node, ast.ClassDef):
        yield from node.bases
        for statement in node.body:
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                if _is_public_member(statement.target.id):
                    yield statement.annotation
            elif isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef) and _is_public_member(statement.name):
                yield from _function_annotations(statement)
    elif isinstance(node, ast.AnnAssign):
        yield node.annotation
        if node.value is not None and "TypeAlias" in ast.unparse(node.annotation):
            yield node.value
    elif isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp | ast.Subscript):
        yield node.value  # a type alias: `Verdict = Allow | Ask | Deny`


def _type_names(expression: ast.expr) -> Iterator[str]:
    """The dotted names a type expression names (string forward references parsed, `Literal` values skipped)."""
    if isinstance(expression, ast.Constant) and isinstance(expression.value, str):
        try:
            yield from _type_names(ast.parse(expression.value, mode="eval").body)
        except SyntaxError:
            return
    elif isinstance(expression, ast.Name | ast.Attribute):
        dotted = _dotted(expression)
        if dotted is not None:
            yield dotted
    elif isinstance(expression, ast.Subscript):
        yield from _type_names(expression.value)
        if not (_dotted(expression.value) or "").endswith("Literal"):
            yield from _type_names(expression.slice)
    else:
        for child in ast.iter_child_nodes(expression):
            if isinstance(child, ast.expr):
                yield from _type_names(child)


@cache
def signature_refs(found: Origin) -> frozenset[Origin]:
    """The origins a definition's signature names (none for a module or a name outside src/lamina)."""
    module, name = found
    if not name or source_path(module) is None:
        return frozenset()
    binding = _bindings(module).get(name)
    if binding is None or binding.node is None:
        return frozenset()
    refs: set[Origin] = set()
    for part in _signature_parts(binding.node):
        for dotted in _type_names(part):
            head, *rest = dotted.split(".")
            target = origin(module, head)
            for attribute in rest:
                if target[1]:
                    break
                target = origin(target[0], attribute)
            refs.add(target)
    return frozenset(refs)


def unjustified(uses: Uses, roots: Iterable[Door] = ()) -> set[Door]:
    """The doors neither used nor named by a used door's signature, nor re-exported by a used door.

    Args:
        uses: What uses the surface.
        roots: Doors to count as used besides (an allowlist).

    Returns:
        The doors nothing justifies.
    """
    kept = set(uses.direct) | set(roots)
    by_origin: dict[Origin, set[Door]] = {}
    for door in uses.doors:
        by_origin.setdefault(origin(*door), set()).add(door)
    frontier = set(kept)
    while frontier:
        found: set[Door] = set()
        for door in frontier:
            found |= uses.reexports.get(door, set())
            for ref in signature_refs(origin(*door)):
                found |= by_origin.get(ref, set())
        frontier = found - kept
        kept |= frontier
    return uses.doors - kept
