"""A branch is told only what is true on it: nothing queued only on the abandoned path, everything it has not seen.

What `/rewind` (and Esc twice) in `lamina chat` relies on: the resent turn's request holds the
branch's own history; a one-shot queued on the old path (a mode change's notice) is not carried,
the settings as last set are stated in the tail, and a stable change the branch has not been told
of is delivered on it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lamina.engine import ContextEngine
from lamina.session import AssistantMessage, InMemorySessionStore, UserMessage
from tests.support.engine import ANTHROPIC, TOOLS, workspace_source


def _turn(engine: ContextEngine, text: str) -> dict[str, Any]:
    turn = engine.prepare_turn(text)
    body = engine.request(turn, ANTHROPIC)
    engine.record(AssistantMessage(text=f"answer to {text}"))
    engine.commit(turn)
    engine.end_turn()
    return dict(body)


def test_a_rewound_turn_is_told_only_what_is_true_on_its_branch(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text("Rule: indent with tabs.\n")
    with InMemorySessionStore(tmp_path / "memory") as store:
        session = store.create(cwd=str(workspace))
        with ContextEngine(session, stable_source=workspace_source(workspace), tools=TOOLS, mode="ask") as engine:
            _turn(engine, "first question")
            (workspace / "AGENTS.md").write_text("Rule: indent with spaces.\n")
            _turn(engine, "second question, WRONG")  # delivers the AGENTS.md update on this path
            engine.settings.set_mode("execute")  # queues its notice for the next turn on this path
            assert [o.kind for o in engine.pending_one_shots] == ["mode_transition"]
            wrong = next(e for e in engine.view if isinstance(e, UserMessage) and "WRONG" in e.text)
            created = engine.branch(wrong.id)
            assert created.offered_text == "second question, WRONG"
            # the mode's notice was queued on the abandoned path only; the branch has yet to see the update
            assert [o.kind for o in engine.pending_one_shots] == ["stable_update"]
            resent = json.dumps(_turn(engine, "second question, fixed")["messages"])
            session_id = session.id
        assert "WRONG" not in resent  # neither the message nor its answer
        assert "first question" in resent and "answer to first question" in resent
        assert "permission mode: execute" in resent  # the mode as last set, stated in the tail
        assert "changed from ask to execute" not in resent
        assert "indent with spaces" in resent  # the update the branch had not been told of
        with store.open(session_id, writable=False) as again:
            assert any(isinstance(e, UserMessage) and "WRONG" in e.text for e in again.entries())  # the log keeps it
