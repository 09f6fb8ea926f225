"""The engine, the agent and the CLI depend on the store protocol, never on the JSONL store."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import lamina
from lamina.session import LocalSessionStore, open_store

SRC = Path(lamina.__file__).parent
# the JSONL store's own tools (check and repair read its files) and a throwaway store for `lamina context`
JSONL_PACKAGE = "lamina.session._jsonl"  # the JSONL store and every module in it
JSONL_ONLY = {"cli/_sessions_commands.py": {"LocalSessionStore"}, "cli/_context_report.py": {"LocalSessionStore"}}


def _is_jsonl(module: str | None) -> bool:
    return module is not None and (module == JSONL_PACKAGE or module.startswith(JSONL_PACKAGE + "."))


def _store_imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and _is_jsonl(node.module):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module == "lamina.session":  # its public re-exports
            names.update(a.name for a in node.names if a.name in ("LocalSessionStore", "JsonlSession"))
        elif isinstance(node, ast.Import) and any(_is_jsonl(a.name) for a in node.names):
            names.add("*")
    return names


def _modules_of(*packages: str) -> list[str]:
    return sorted(str(p.relative_to(SRC)) for package in packages for p in (SRC / package).glob("*.py"))


ENGINE_AND_AGENT = _modules_of("engine", "agent")


@pytest.mark.parametrize("rel", [*ENGINE_AND_AGENT, *_modules_of("cli")])
def test_engine_agent_and_cli_depend_only_on_the_protocol(rel: str) -> None:
    assert _store_imports(SRC / rel) <= JSONL_ONLY.get(rel, set())


def test_the_engine_never_reaches_into_a_session_folder() -> None:
    assert len(ENGINE_AND_AGENT) > 10  # the walk found the two packages' modules
    for rel in ENGINE_AND_AGENT:
        assert ".folder" not in (SRC / rel).read_text(), rel


def test_a_path_or_nothing_opens_the_jsonl_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAMINA_STORE", raising=False)
    store = open_store(tmp_path / "a")
    assert isinstance(store, LocalSessionStore) and store.root == tmp_path / "a"
    assert isinstance(open_store(str(tmp_path / "b")), LocalSessionStore)
    monkeypatch.setenv("LAMINA_STORE", str(tmp_path / "c"))
    env_store = open_store()
    assert isinstance(env_store, LocalSessionStore) and env_store.root == tmp_path / "c"


def test_a_session_names_its_folders_of_files(tmp_path: Path) -> None:
    with LocalSessionStore(tmp_path).create(cwd="/w", title="hello") as session:
        assert session.data_dir.is_dir() and session.plans_dir.is_dir() and session.attachments_dir.is_dir()
        assert session.info.cwd == "/w" and session.info.title == "hello" and session.info.id == session.id
