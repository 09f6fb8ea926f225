"""Hidden one-shot bridges: delivered to the model once like any one-shot, left out of the user's transcript."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.compaction import DeterministicSummariser
from lamina.placement import render
from lamina.session import AssistantMessage, LocalSessionStore, OutboxRecord, TurnRecord, UserMessage
from lamina.session._bridges import recent_conversation
from lamina.session._entries import BRIDGE_KINDS, is_hidden
from tests.support.engine import ANTHROPIC, Clock, make_engine

runner = CliRunner()


def _workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("Run the tests with `make test`.\n")
    return root


def test_a_hidden_bridge_is_marked_in_every_record_and_reaches_the_model_once(tmp_path: Path) -> None:
    workspace, clock = _workspace(tmp_path), Clock()
    engine = make_engine(tmp_path, workspace, clock)
    assert {"recovery", "branch_seed", "transfer_summary"} == BRIDGE_KINDS
    engine.queue_one_shot("branch_seed", "Before the branch: the user asked for a parser.", hidden=True)
    engine.queue_one_shot("mode_transition", "The permission mode changed.")
    session_id = engine.session.id
    engine.session.close()

    engine = make_engine(tmp_path, workspace, clock, session_id)  # the mark survives a reopen
    assert [(o.kind, o.hidden) for o in engine.pending_one_shots] == [
        ("branch_seed", True),
        ("mode_transition", False),
    ]
    turn = engine.prepare_turn("Go on.")
    body = json.dumps(render(turn, ANTHROPIC))
    assert body.count("the user asked for a parser") == 1
    engine.commit(turn)
    engine.record(AssistantMessage(text="Done."))
    second = engine.prepare_turn("Next.")
    assert "the user asked for a parser" in json.dumps(engine.request(second, ANTHROPIC))  # in history, once
    assert json.dumps(engine.request(second, ANTHROPIC)).count("the user asked for a parser") == 1
    entries = engine.session.entries()
    outbox = [e for e in entries if isinstance(e, OutboxRecord)]
    assert [(e.kind, e.status, e.hidden, is_hidden(e)) for e in outbox] == [
        ("branch_seed", "queued", True, True),
        ("mode_transition", "queued", False, False),
        ("branch_seed", "delivered", True, True),
        ("mode_transition", "delivered", False, False),
    ]
    record = next(e for e in entries if isinstance(e, TurnRecord))
    assert [(p.key, p.hidden) for p in record.one_shots] == [("branch_seed", True), ("mode_transition", False)]


async def test_a_pending_bridge_keeps_its_mark_across_a_compaction(tmp_path: Path) -> None:
    workspace, clock = _workspace(tmp_path), Clock()
    engine = make_engine(tmp_path, workspace, clock)
    for n in range(6):
        turn = engine.prepare_turn(f"Step {n}: " + "details " * 200)
        engine.commit(turn)
        engine.record(AssistantMessage(text="ok " * 200))
    engine.queue_one_shot("transfer_summary", "Recent turns first: step 5.", hidden=True)
    outcome = await engine.compactor.compact(DeterministicSummariser(), trigger="manual", keep_tokens=100)
    assert outcome.status == "compacted" and outcome.boundary is not None
    assert [(p.key, p.hidden) for p in outcome.boundary.state.pending_one_shots] == [("transfer_summary", True)]
    session_id = engine.session.id
    engine.session.close()
    # a resume reads from the boundary only: the mark comes from its snapshot
    engine = make_engine(tmp_path, workspace, clock, session_id)
    assert [(o.kind, o.hidden) for o in engine.pending_one_shots] == [("transfer_summary", True)]


@pytest.mark.slow
def test_sessions_show_leaves_bridges_out_unless_all(tmp_path: Path) -> None:
    workspace, clock = _workspace(tmp_path), Clock()
    engine = make_engine(tmp_path, workspace, clock, on_disk=True)  # the CLI reads it from disk
    engine.queue_one_shot("recovery", "RECOVERED-TEXT", hidden=True)
    engine.queue_one_shot("interruption", "INTERRUPTED-TEXT")
    session_id = engine.session.id
    engine.session.close()
    store = ["--store", str(LocalSessionStore(tmp_path / "store").root)]
    plain = runner.invoke(app, [*store, "sessions", "show", session_id])
    assert plain.exit_code == 0, plain.output
    assert "RECOVERED-TEXT" not in plain.stdout and "INTERRUPTED-TEXT" in plain.stdout
    everything = runner.invoke(app, [*store, "sessions", "show", session_id, "--all"])
    assert "RECOVERED-TEXT" in everything.stdout and "hidden bridge" in everything.stdout
    as_json = json.loads(runner.invoke(app, [*store, "sessions", "show", session_id, "--json"]).stdout)
    assert [e.get("kind") for e in as_json["entries"] if e["type"] == "outbox"] == ["interruption"]
    as_json = json.loads(runner.invoke(app, [*store, "sessions", "show", session_id, "--json", "--all"]).stdout)
    assert [e.get("kind") for e in as_json["entries"] if e["type"] == "outbox"] == ["recovery", "interruption"]


def test_a_bridge_does_not_call_a_message_lamina_wrote_the_user_s() -> None:
    approved = UserMessage(text="I approved the plan. Carry it out now.", user_words="")
    entries = [UserMessage(text="Plan the fix."), approved]
    text = recent_conversation(entries, heading="The conversation so far:")
    assert "turn 1, the user wrote: Plan the fix." in text
    assert "turn 2, Lamina wrote for the user: I approved the plan." in text
