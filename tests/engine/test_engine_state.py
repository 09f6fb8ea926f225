"""The engine's session-state fold is pure: a state and one entry give the next state, nothing else changes."""

from __future__ import annotations

from lamina.engine import RecordedSettings
from lamina.engine._state import PathState, SessionState, fold, fold_path
from lamina.session import CompactionBoundary, StateChange, StateSnapshot, UserMessage


def _boundary(state: StateSnapshot) -> CompactionBoundary:
    return CompactionBoundary(
        summary="s", first_kept_id=None, tokens_before=10, tokens_after=5, trigger="manual", state=state
    )


def test_fold_returns_a_new_state_and_leaves_the_old_one_as_it_was() -> None:
    start = SessionState()
    after = fold(start, StateChange(key="mode", value="plan"))
    assert after == SessionState(mode="plan", mode_recorded=True)
    assert start == SessionState()
    assert fold(after, StateChange(key="sources", value="github,,jira")).sources == ("github", "jira")
    assert fold(after, UserMessage(text="hello")) is after


def test_a_boundary_restates_the_settings_and_keeps_the_mode_when_its_snapshot_has_none() -> None:
    state = SessionState(mode="edit", mode_recorded=True, sources=("old",))
    boundary = _boundary(StateSnapshot(sources=("new",)))
    assert fold(state, boundary) == SessionState(mode="edit", mode_recorded=True, sources=("new",))
    moded = _boundary(StateSnapshot(mode="plan"))
    assert fold(SessionState(), moded) == SessionState(mode="plan", mode_recorded=True, sources=())


def test_the_path_fold_takes_the_skills_from_changes_and_from_a_boundary() -> None:
    state = fold_path(PathState(), StateChange(key="skills", value="pdf,review"))
    assert state.skills == ("pdf", "review")
    boundary = _boundary(StateSnapshot(skills=("pdf",)))
    assert fold_path(state, boundary).skills == ("pdf",)
    assert state.skills == ("pdf", "review")


def test_an_imports_cleared_settings_move_to_imported_and_leave_no_mode_to_go_back_to() -> None:
    state = SessionState()
    for entry in (
        StateChange(key="mode", value="execute"),
        StateChange(key="mode", value="plan"),
        StateChange(key="model", value="openai-compat:https://theirs.example/v1#m"),
    ):
        state = fold(state, entry)
    assert state.previous_mode == "execute"  # what a plan accepted now would go back to
    for key in ("mode", "model", "preset"):
        state = fold(state, StateChange(key=key, value=""))
    assert (state.mode, state.mode_recorded, state.previous_mode, state.model) == ("ask", False, None, None)
    assert state.imported == RecordedSettings(model="openai-compat:https://theirs.example/v1#m", mode="plan")
    resumed = fold(state, StateChange(key="mode", value="plan"))  # the importing user's first mode
    assert resumed.previous_mode is None  # never the bundle's execute
