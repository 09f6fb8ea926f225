"""Reasoning settings as a state change: recorded, known on reopening, restated by a compaction; the switch note."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from lamina.compaction import DeterministicSummariser
from lamina.engine import ContextEngine, RecordedSettings, recorded_settings
from lamina.session import (
    AssistantMessage,
    CompactionBoundary,
    InMemorySessionStore,
    LocalSessionStore,
    SessionStore,
    StateChange,
    StateSnapshot,
    describe_entry,
)
from tests.support.engine import TOOLS, workspace_source


@pytest.fixture(params=["jsonl", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    if request.param == "jsonl":
        yield LocalSessionStore(tmp_path / "store")
        return
    with InMemorySessionStore(tmp_path / "memory") as memory:
        yield memory


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("Project rule: keep it short.\n")
    return root


def _engine(store: SessionStore, workspace: Path, session_id: str | None = None) -> ContextEngine:
    session = store.open(session_id) if session_id else store.create(cwd=str(workspace))
    return ContextEngine(session, stable_source=workspace_source(workspace), tools=TOOLS, mode="ask", owns_session=True)


def _turn(engine: ContextEngine, text: str) -> None:
    turn = engine.prepare_turn(text)
    engine.record(AssistantMessage(text=f"answer to {text}"))
    engine.commit(turn)
    engine.end_turn()


def test_reasoning_settings_are_recorded_once_per_change_and_known_on_reopening(
    store: SessionStore, workspace: Path
) -> None:
    with _engine(store, workspace) as engine:
        assert engine.settings.recorded.reasoning is None  # nothing recorded yet
        engine.settings.set_reasoning("thinking=adaptive effort=high")
        engine.settings.set_reasoning("thinking=adaptive effort=high")  # the same: nothing recorded
        _turn(engine, "hello")
        engine.settings.set_reasoning("thinking=adaptive effort=low")
        session_id = engine.session.id
    with store.open(session_id, writable=False) as session:
        changes = [
            (e.value, e.previous) for e in session.entries() if isinstance(e, StateChange) and e.key == "reasoning"
        ]
        assert changes == [
            ("thinking=adaptive effort=high", None),
            ("thinking=adaptive effort=low", "thinking=adaptive effort=high"),
        ]
        assert recorded_settings(session.entries_loaded()).reasoning == "thinking=adaptive effort=low"
    with _engine(store, workspace, session_id) as again:
        assert again.settings.recorded.reasoning == "thinking=adaptive effort=low"


def test_a_compaction_restates_the_reasoning_settings_for_a_resume_from_its_boundary(
    store: SessionStore, workspace: Path
) -> None:
    with _engine(store, workspace) as engine:
        engine.settings.set_model("anthropic:claude-sonnet-5")
        engine.settings.set_reasoning("thinking=enabled budget_tokens=2048")
        for n in range(3):
            _turn(engine, f"request {n}")
        outcome = asyncio.run(engine.compactor.compact(DeterministicSummariser(), trigger="manual", force=True))
        assert outcome.status == "compacted" and outcome.boundary is not None
        assert outcome.boundary.state.reasoning == "thinking=enabled budget_tokens=2048"
        session_id = engine.session.id
    with store.open(session_id, writable=False) as session:
        loaded = session.entries_loaded()
        if isinstance(store, LocalSessionStore):  # reads from the boundary on: the change itself is before it
            assert not any(isinstance(e, StateChange) and e.key == "reasoning" for e in loaded)
        assert recorded_settings(loaded).reasoning == "thinking=enabled budget_tokens=2048"


def test_an_older_boundary_without_reasoning_reads_as_before() -> None:
    old = b'{"mode":"plan","sources":[],"model":"scripted:s.json"}'
    snapshot = msgspec.json.decode(old, type=StateSnapshot)
    assert snapshot.reasoning is None
    boundary = CompactionBoundary(
        summary="s", first_kept_id=None, tokens_before=10, tokens_after=1, trigger="manual", state=snapshot
    )
    earlier = StateChange(key="reasoning", value="effort=high")
    assert recorded_settings([earlier, boundary]).reasoning == "effort=high"  # an older snapshot keeps what was known


def test_an_imported_bundles_reasoning_is_not_the_sessions_own() -> None:
    entries = [
        StateChange(key="reasoning", value="thinking=adaptive"),
        StateChange(key="reasoning", value="", detail="imported: the bundle's setting is not adopted"),
    ]
    recorded = recorded_settings(entries)
    assert recorded.reasoning is None
    assert recorded.imported == RecordedSettings(reasoning="thinking=adaptive")


def test_the_switch_note_records_each_other_providers_blocks(store: SessionStore, workspace: Path) -> None:
    with _engine(store, workspace) as engine:
        notes = engine.settings.note_foreign_reasoning(
            {"anthropic": 3, "openai": 0, "openai-compat": 1}, provider="openai"
        )
        assert notes == [
            "3 reasoning blocks of anthropic left out of the requests to openai from here on"
            " (reasoning goes only to the provider that made it; the log keeps them)",
            "1 reasoning block of openai-compat left out of the requests to openai from here on"
            " (reasoning goes only to the provider that made it; the log keeps them)",
        ]
        assert engine.settings.note_foreign_reasoning({"openai": 2}, provider="openai") == []  # its own: nothing
        recorded = [e for e in engine.session.entries() if isinstance(e, StateChange) and e.key == "foreign_reasoning"]
    assert [e.value for e in recorded] == ["anthropic", "openai-compat"]
    assert describe_entry(recorded[0]).title == "state foreign_reasoning = anthropic"
    assert describe_entry(recorded[0]).detail == notes[0]
