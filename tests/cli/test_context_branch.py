"""`lamina context --session` says which branch it counts: the current one, out of the log's requests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.engine import ContextEngine
from lamina.session import AssistantMessage, LocalSessionStore
from tests.support.engine import TOOLS, Clock, workspace_source


def _turns(engine: ContextEngine, *texts: str) -> list[str]:
    answers = []
    for text in texts:
        turn = engine.prepare_turn(text)
        answers.append(engine.record(AssistantMessage(text=f"done: {text}")).id)
        engine.commit(turn)
    return answers


def _branched(tmp_path: Path) -> tuple[LocalSessionStore, str, str]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text("# Rules\n- Run the tests.\n")
    clock = Clock()
    store = LocalSessionStore(tmp_path / "store", clock=clock)
    with store.create(cwd=str(workspace)) as session:
        engine = ContextEngine(session, stable_source=workspace_source(workspace), tools=TOOLS, clock=clock)
        first, *_ = _turns(engine, "one", "two", "three")
        session_id = session.id
    with store.open(session_id) as session:
        session.branch(first)  # a rewind to turn 1's answer, then one more turn on the new branch
        engine = ContextEngine(session, stable_source=workspace_source(workspace), tools=TOOLS, clock=clock)
        _turns(engine, "four")
        leaf = session.leaf_id
    assert leaf is not None
    return store, session_id, leaf


@pytest.mark.slow
def test_context_session_names_the_branch_it_counts(tmp_path: Path) -> None:
    store, session_id, leaf = _branched(tmp_path)
    runner = CliRunner()
    as_json = runner.invoke(app, ["--store", str(store.root), "context", "--session", session_id, "--json"])
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.stdout)
    assert data["branch"] == {"leaf_id": leaf, "branches": 2, "requests": 2, "log_requests": 4}
    assert data["requests"] == 2
    human = runner.invoke(app, ["--store", str(store.root), "context", "--session", session_id])
    assert human.exit_code == 0, human.output
    said = " ".join(human.output.split())
    counted = f"Counted: the current branch (leaf {leaf}), 2 of the log's 4 requests; the other branch is not counted."
    assert counted in said
