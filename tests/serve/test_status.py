"""A session's status, read from its log and whether a process holds it: each way a turn ends, and the paths shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.testclient import TestClient

from lamina.context import INTERRUPTED_RESULT
from lamina.serve import create_app
from lamina.serve._shown import middle
from lamina.serve._status import Standing, standing_of
from lamina.session import (
    TURN_FAILED,
    AssistantMessage,
    Custom,
    LocalSessionStore,
    LogEntry,
    OutboxRecord,
    PlanState,
    ToolCall,
    ToolResult,
    UserMessage,
)

HOST = "http://127.0.0.1:8765"


def _user() -> UserMessage:
    return UserMessage(text="hello")


def _answer() -> AssistantMessage:
    return AssistantMessage(text="hi", model="claude-sonnet-5")


def _call() -> ToolCall:
    return ToolCall(call_id="c1", name="Bash", input={"command": "sleep 9"})


def _failed(words: str = "provider anthropic answered 401: invalid x-api-key") -> Custom:
    return Custom(name=TURN_FAILED, data={"error": words, "kind": "ProviderError"})


CASES: list[tuple[str, list[LogEntry], bool, Standing]] = [
    ("nothing yet", [], False, Standing("empty")),
    ("a chat opened, nothing typed", [], True, Standing("waiting for the user")),
    ("answered, the chat still open", [_user(), _answer()], True, Standing("waiting for the user")),
    ("answered, no process", [_user(), _answer()], False, Standing("ended")),
    ("the model asked, a process runs", [_user()], True, Standing("running", "waiting for the model")),
    ("a tool runs", [_user(), _answer(), _call()], True, Standing("running", "running a tool")),
    (
        "an error logged",
        [_user(), _failed()],
        False,
        Standing("failed", "provider anthropic answered 401: invalid x-api-key"),
    ),
    (
        "an error logged, the chat still open",
        [_user(), _failed()],
        True,
        Standing("failed", "provider anthropic answered 401: invalid x-api-key"),
    ),
    (
        "interrupted mid-tool",
        [
            _user(),
            _answer(),
            _call(),
            ToolResult(call_id="c1", name="Bash", content=INTERRUPTED_RESULT, is_error=True),
            OutboxRecord(part_id="p1", status="queued", kind="interruption", text="The user interrupted"),
        ],
        True,
        Standing("interrupted", "the user interrupted the turn"),
    ),
    (
        "interrupted before the model answered",
        [_user(), OutboxRecord(part_id="p1", status="queued", kind="interruption", text="The user interrupted")],
        False,
        Standing("interrupted", "the user interrupted the turn"),
    ),
    (
        "the process died mid-turn",
        [_user(), _answer(), _call()],
        False,
        Standing("interrupted", "the turn stopped half way: its process ended without logging an error"),
    ),
    ("a failure, then a new message answered", [_user(), _failed(), _user(), _answer()], False, Standing("ended")),
    (
        "a plan awaiting a decision",
        [_user(), _answer(), PlanState(plan_id="p", state="submitted")],
        False,
        Standing("ended", "a plan awaits a decision"),
    ),
]


@pytest.mark.parametrize(("name", "path", "writing", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_way_a_turn_ends_has_its_status(
    name: str, path: list[LogEntry], writing: bool, expected: Standing
) -> None:
    assert standing_of(path, writing=writing) == expected


def test_a_failure_with_no_words_still_reads_failed() -> None:
    got = standing_of([_user(), Custom(name=TURN_FAILED, data=None)], writing=False)
    assert got.status == "failed" and got.detail


def test_a_failed_or_interrupted_session_never_reads_waiting_for_the_model() -> None:
    for _, path, _, _ in CASES:  # with no process holding the session
        assert standing_of(path, writing=False).detail != "waiting for the model"


@given(st.text(alphabet=st.sampled_from("ab/-_."), max_size=120), st.integers(min_value=8, max_value=80))
def test_a_path_shortened_from_the_middle_fits_and_keeps_its_last_name(path: str, limit: int) -> None:
    shown = middle(path, limit)
    if len(path) <= limit:
        assert shown == path
        return
    assert len(shown) <= limit
    last = path.rsplit("/", 1)[-1]
    assert shown.endswith(last) if len(last) + 2 <= limit else "…" in shown


def test_the_lists_status_follows_the_writer_lock(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path / "store")
    with store.create(cwd=str(tmp_path), title="failed") as session:
        session.append(_user())
        session.append(_failed("provider anthropic answered 401: invalid x-api-key"))
        failed_id = session.id
    open_session = store.create(cwd=str(tmp_path), title="open")
    open_session.append(_user())
    open_session.append(_answer())
    client = TestClient(create_app(store), base_url=HOST)
    rows = {r["id"]: r for r in client.get("/api/sessions").json()["sessions"]}
    assert rows[failed_id]["status"] == "failed"
    assert rows[failed_id]["status_detail"] == "provider anthropic answered 401: invalid x-api-key"
    assert rows[open_session.id]["status"] == "waiting for the user"
    open_session.close()
    rows = {r["id"]: r for r in client.get("/api/sessions").json()["sessions"]}
    assert rows[open_session.id]["status"] == "ended"
    page = client.get("/").text
    assert "invalid x-api-key" in page and "waiting for the model" not in page
