"""Request composition: every request's tokens counted once, per component; a logged session rebuilt the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.compaction import PrunePolicy
from lamina.engine import ContextEngine
from lamina.reports import KINDS, SessionComposition, compose_turn, logged_requests
from lamina.reports._composition import framing_chars
from lamina.session import AssistantMessage, LocalSessionStore, ToolCall, ToolResult
from lamina.tools import default_tool_specs
from lamina.workspace import Preferences, WorkspaceContext
from tests.support.engine import TOOLS, Clock, workspace_source

READ_OUTPUT = "1\tdef check():\n2\t    return True\n[showing lines 1–2 of 90; continue with offset=3]"


def _session(tmp_path: Path) -> tuple[LocalSessionStore, str, SessionComposition, WorkspaceContext]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text("# Rules\n- Run the tests <before> committing.\n")
    clock = Clock()
    store = LocalSessionStore(tmp_path / "store", clock=clock)
    session = store.create(cwd=str(workspace))
    context = WorkspaceContext(workspace, preferences=Preferences(), environ={}, tools=default_tool_specs())
    engine = ContextEngine(session, stable_source=context, tools=context.tools, clock=clock)
    live = SessionComposition()
    for n in range(3):
        if n == 1:
            engine.settings.set_mode("execute")
        if n == 2:
            (workspace / "AGENTS.md").write_text("# Rules\n- Run the tests.\n- Never push.\n")
        turn = engine.prepare_turn(f"fix module_{n}.py")
        live.add(compose_turn(turn, engine.continuation(turn)))
        engine.record(AssistantMessage(text="Reading."))
        engine.record(ToolCall(call_id=f"c{n}", name="Read", input={"path": f"module_{n}.py"}))
        engine.record(ToolResult(call_id=f"c{n}", name="Read", content=READ_OUTPUT))
        engine.commit(turn)
        live.add(compose_turn(turn, engine.continuation(turn)))
        engine.record(AssistantMessage(text="Fixed."))
        clock.advance(2)
    session.close()
    return store, session.id, live, context


def test_components_cover_every_kind_of_a_real_session(tmp_path: Path) -> None:
    _, _, live, _ = _session(tmp_path)
    kinds = live.by_kind()
    assert list(kinds) == list(KINDS)
    for kind in ("system", "tools", "project", "defang", "volatile", "one-shot", "framing", "tool results", "history"):
        assert kinds[kind] > 0, kind
    assert {name for kind, name in live.totals if kind == "tools"} >= {"Read", "Edit", "Bash"}
    assert ("one-shot", "stable_update") in live.totals and ("one-shot", "mode_transition") in live.totals
    assert live.requests == 6 and live.first_request_tokens == sum(live.first.values())
    assert live.top(3)[0].tokens >= live.top(3)[1].tokens >= live.top(3)[2].tokens


def test_a_logged_session_rebuilds_the_requests_as_sent(tmp_path: Path) -> None:
    store, session_id, live, context = _session(tmp_path)
    with store.open(session_id, writable=False) as session:
        requests = logged_requests(session.path(), tools=context.tools, data_dir=str(session.folder / "data"))
    rebuilt = SessionComposition()
    for request in requests:
        rebuilt.add(request.composition)
    assert [r.turn for r in requests] == [1, 1, 2, 2, 3, 3]
    assert rebuilt.totals == live.totals


def test_a_logged_session_with_pruned_output_rebuilds_the_requests_as_sent(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text("Run the tests.\n")
    clock = Clock()
    store = LocalSessionStore(tmp_path / "store", clock=clock)
    session = store.create(cwd=str(workspace))
    policy = PrunePolicy(protect_turns=2, protect_tokens=1_000, minimum_tokens=2_000, smallest_tokens=50)
    engine = ContextEngine(session, stable_source=workspace_source(workspace), tools=TOOLS, clock=clock, prune=policy)
    live = SessionComposition()
    for t in range(6):
        turn = engine.prepare_turn(f"Look at module {t}")
        engine.record(ToolCall(call_id=f"call{t}", name="Read", input={"path": f"m{t}.py"}))
        engine.record(ToolResult(call_id=f"call{t}", name="Read", content="    value = compute(item)\n" * 200))
        live.add(compose_turn(turn, engine.continuation(turn)))
        engine.record(AssistantMessage(text=f"Read m{t}.py."))
        engine.commit(turn)
        engine.end_turn()
    requests = logged_requests(session.path(), tools=TOOLS, data_dir=str(session.data_dir))
    session.close()
    rebuilt = SessionComposition()
    for request in requests:
        rebuilt.add(request.composition)
    assert rebuilt.requests == 6 and rebuilt.totals == live.totals  # the old output counted as its note, as sent


def test_framing_is_line_numbers_and_note_lines_only() -> None:
    assert framing_chars("alpha\nbeta") == 0
    assert framing_chars("1\ta\n22\tb") == len("1\t") + len("22\t")
    note = "\n[showing lines 1–2 of 90; continue with offset=3]"
    assert framing_chars(READ_OUTPUT) == len("1\t") + len("2\t") + len(note)
    assert framing_chars("x = [1, 2]\n[not a note") == 0


@pytest.mark.slow
def test_cli_prints_the_composition_of_a_stored_session(tmp_path: Path) -> None:
    store, session_id, _, _ = _session(tmp_path)
    runner = CliRunner()
    result = runner.invoke(app, ["--store", str(store.root), "context", "--session", session_id, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["requests"] == 6 and len(data["per_request"]) == 6
    assert data["by_kind"]["framing"] > 0 and data["top"][0]["tokens"] > 0
    human = runner.invoke(app, ["--store", str(store.root), "context", "--session", session_id])
    assert human.exit_code == 0, human.output
    assert "tool-result framing" in human.output and "Per request" in human.output
    missing = runner.invoke(app, ["--store", str(store.root), "context", "--session", "nope"])
    assert missing.exit_code != 0 and "nope" in missing.output
