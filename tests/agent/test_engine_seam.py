"""The agent–engine seam stays narrow: the agent package uses at most a few of the engine's members (#43 item 4).

Counted from the source (AST): every attribute read on an expression that is the engine, `engine.X`
(a name) or `….engine.X` / `…._engine.X` (an attribute). A member reached through one of the
engine's parts (`engine.settings.mode`) counts once, as the part (`settings`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import lamina.agent

_AGENT = Path(lamina.agent.__file__).parent
_MOST_ENGINE_MEMBERS = 20
_ENGINE_NAMES = frozenset({"engine", "_engine"})


def _is_engine(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in _ENGINE_NAMES
    return isinstance(node, ast.Attribute) and node.attr in _ENGINE_NAMES


def engine_members(source: str) -> set[str]:
    """The names of the engine's members `source` uses."""
    return {
        node.attr for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Attribute) and _is_engine(node.value)
    }


def _agent_members() -> dict[str, set[str]]:
    """Each engine member the agent package uses, and the modules that use it."""
    used: dict[str, set[str]] = {}
    for path in sorted(_AGENT.rglob("*.py")):
        for member in engine_members(path.read_text(encoding="utf-8")):
            used.setdefault(member, set()).add(path.name)
    return used


def test_the_agent_uses_at_most_20_engine_members() -> None:
    used = _agent_members()
    listing = "\n".join(f"  {name}: {', '.join(sorted(modules))}" for name, modules in sorted(used.items()))
    assert len(used) <= _MOST_ENGINE_MEMBERS, f"the agent uses {len(used)} engine members:\n{listing}"


def test_the_count_reads_the_package_and_can_fail() -> None:
    used = _agent_members()
    assert {"prepare_turn", "commit", "record"} <= set(used)  # the turn's own write path, from the loop
    assert "_loop.py" in used["commit"]
    source = "def f(self, engine):\n    self.engine.a()\n    engine.b.c\n    self._engine.d = 1\n    other.e\n"
    assert engine_members(source) == {"a", "b", "d"}
