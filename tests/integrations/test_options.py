"""`ThreadOptions`: one options type for the three integrations, beside the keyword arguments it replaces."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from lamina.context import Part
from lamina.integrations import CompactionPolicy, LaminaThread, ThreadOptions
from lamina.integrations._options import ThreadKeywords, thread_options
from lamina.integrations._thread import RULES
from lamina.integrations.langgraph import LaminaCheckpointSaver
from lamina.integrations.openai_agents import LaminaSession
from lamina.integrations.pydantic_ai import LaminaHistory
from lamina.session import LocalSessionStore

NOON = 1_800_000_000.0  # Friday 2027-01-15 08:00 UTC
POLICY = CompactionPolicy(context_window=9_000, reserve=1_000)


def _options(workspace: Path) -> ThreadOptions:
    return ThreadOptions(workspace=workspace, time_zone="Asia/Tokyo", compaction=POLICY, clock=lambda: NOON)


def _assert_set_up_by(thread: LaminaThread, workspace: Path, zone: str = "Asia/Tokyo") -> None:
    assert thread.session.info.cwd == str(workspace)
    assert thread.compaction is POLICY
    assert f"({zone}," in thread.tail_text(thread.preview())


def test_the_keywords_are_exactly_the_fields() -> None:
    assert set(ThreadKeywords.__annotations__) == {f.name for f in dataclasses.fields(ThreadOptions)}


def test_keywords_override_the_options_and_nothing_else() -> None:
    given = ThreadOptions(time_zone="Europe/Paris", compaction=POLICY)
    assert thread_options() == ThreadOptions()
    assert thread_options(given) is given
    assert thread_options(given, time_zone="UTC") == dataclasses.replace(given, time_zone="UTC")
    with pytest.raises(TypeError):
        thread_options(given, zone="UTC")  # type: ignore[call-arg]


def test_each_integration_takes_the_options(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path / "store")
    options = _options(tmp_path)
    session = LaminaSession.open(store, options=options)
    history = LaminaHistory.open(store, options=options)
    saver = LaminaCheckpointSaver(store, options=options)
    try:
        _assert_set_up_by(session.thread, tmp_path)
        _assert_set_up_by(history.thread, tmp_path)
        assert saver.options is options
        _assert_set_up_by(saver.thread(saver.new_thread()), tmp_path)
    finally:
        session.close()
        history.close()
        saver.close()


def test_the_keyword_arguments_still_work_and_win_over_the_options(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path / "store")
    session = LaminaSession.open(store, workspace=tmp_path, time_zone="Asia/Tokyo", compaction=POLICY)
    history = LaminaHistory.open(store, options=_options(tmp_path), time_zone="Europe/Paris")
    saver = LaminaCheckpointSaver(store, options=_options(tmp_path), time_zone="America/New_York")
    try:
        _assert_set_up_by(session.thread, tmp_path)
        _assert_set_up_by(history.thread, tmp_path, zone="Europe/Paris")
        _assert_set_up_by(saver.thread(saver.new_thread()), tmp_path, zone="America/New_York")
    finally:
        session.close()
        history.close()
        saver.close()


def test_a_resumed_session_keeps_its_id_and_takes_the_new_options(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path / "store")
    first = LaminaSession.open(store, options=_options(tmp_path))
    first.close()
    only_rules = ThreadOptions(stable_source=lambda: (RULES, _extra()))
    again = LaminaSession.open(store, first.session_id, options=only_rules)
    try:
        assert again.session_id == first.session_id
        turn = again.thread.preview()
        assert [p.key for p in turn.stable.parts] == ["lamina.rules", "test.extra"]
        assert "(UTC," in again.thread.tail_text(turn)
    finally:
        again.close()


def _extra() -> Part:
    return dataclasses.replace(RULES, key="test.extra", provenance="test")
