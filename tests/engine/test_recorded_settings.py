"""A session's settings (model, mode, preset) recorded through the store protocol, and a forced compaction.

Every test runs on the JSONL, the PostgreSQL and the in-memory store: a resumed session knows its
settings on each, also when it reads only from its latest compaction boundary on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

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
    UserMessage,
)
from tests.support.engine import TOOLS, workspace_source
from tests.support.postgres import fresh_schema, schema_url


@pytest.fixture(params=["jsonl", "postgres", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    if request.param == "jsonl":
        yield LocalSessionStore(tmp_path / "store")
        return
    if request.param == "memory":
        with InMemorySessionStore(tmp_path / "memory") as memory:
            yield memory
        return
    from lamina.session.postgres import PostgresSessionStore

    with fresh_schema("settings") as schema:
        pg = PostgresSessionStore(schema_url(schema), files_root=tmp_path / "files")
        try:
            yield pg
        finally:
            pg.close()


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


def test_a_reopened_session_knows_the_settings_it_recorded_last(store: SessionStore, workspace: Path) -> None:
    with _engine(store, workspace) as engine:
        assert engine.settings.recorded == RecordedSettings(mode="ask")  # a new session: only its mode so far
        engine.settings.set_model("scripted:first.json")
        engine.settings.set_preset("custom", "/presets/mine.toml")
        _turn(engine, "hello")
        engine.settings.set_model("openai-compat:http://127.0.0.1:1/v1#local")
        engine.settings.set_model("openai-compat:http://127.0.0.1:1/v1#local")  # the same again: nothing recorded
        engine.settings.set_mode("plan")
        session_id = engine.session.id
    local = "openai-compat:http://127.0.0.1:1/v1#local"
    expected = RecordedSettings(model=local, mode="plan", preset="custom", preset_file="/presets/mine.toml")
    with store.open(session_id, writable=False) as session:
        assert recorded_settings(session.entries_loaded()) == expected
        models = [e.value for e in session.entries() if isinstance(e, StateChange) and e.key == "model"]
    assert models == ["scripted:first.json", "openai-compat:http://127.0.0.1:1/v1#local"]
    with _engine(store, workspace, session_id) as again:
        assert again.settings.recorded == expected


def test_the_settings_survive_a_compaction_for_a_resume_that_reads_only_from_its_boundary(
    store: SessionStore, workspace: Path
) -> None:
    with _engine(store, workspace) as engine:
        engine.settings.set_model("scripted:s.json")
        engine.settings.set_preset("mini")
        for n in range(3):
            _turn(engine, f"request {n}")
        outcome = asyncio.run(engine.compactor.compact(DeterministicSummariser(), trigger="manual", force=True))
        assert outcome.status == "compacted"
        session_id = engine.session.id
    with store.open(session_id, writable=False) as session:
        loaded = session.entries_loaded()
        assert any(isinstance(e, CompactionBoundary) for e in loaded)
        if isinstance(store, LocalSessionStore):  # the JSONL store reads from the boundary on: the changes are before
            assert not any(isinstance(e, StateChange) and e.key == "model" for e in loaded)
        assert recorded_settings(loaded) == RecordedSettings(model="scripted:s.json", mode="ask", preset="mini")


def test_force_compacts_a_conversation_that_fits_the_kept_budget(store: SessionStore, workspace: Path) -> None:
    with _engine(store, workspace) as engine:
        summariser = DeterministicSummariser()
        assert asyncio.run(engine.compactor.compact(summariser, trigger="manual")).status == "nothing_to_compact"
        _turn(engine, "remember the number 42")
        refused = asyncio.run(engine.compactor.compact(summariser, trigger="manual"))
        assert refused.status == "nothing_to_compact"  # one short turn fits the kept budget
        forced = asyncio.run(engine.compactor.compact(summariser, trigger="manual", force=True))
        assert forced.status == "compacted" and forced.boundary is not None
        assert forced.boundary.first_kept_id is None  # all of it summarised
        assert [m.text for m in forced.boundary.lane.messages] == ["remember the number 42"]  # the words verbatim
        assert not any(isinstance(e, UserMessage) for e in engine.view)
        again = asyncio.run(engine.compactor.compact(summariser, trigger="manual", force=True))
        assert again.status == "already_compacted"  # nothing new since: still nothing to summarise
        session_id = engine.session.id
    with store.open(session_id, writable=False) as session:
        assert any(isinstance(e, UserMessage) for e in session.entries())  # the log keeps everything
