"""`lamina sessions budget` says why turns missed the cache: the provider's reason, else the prediction, marked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.cli._turn_view import footer_text
from lamina.cli._turns import turn_miss
from lamina.session import (
    AssistantMessage,
    CacheCheck,
    CacheMiss,
    LocalSessionStore,
    LogEntry,
    Usage,
    UserMessage,
)

runner = CliRunner()


@pytest.fixture
def session_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    told = CacheCheck(
        provider=CacheMiss(reason="tools_changed", missed_tokens=4_210),
        predicted=CacheMiss(reason="tools_changed", missed_tokens=4_000),
    )
    predicted = CacheCheck(predicted=CacheMiss(reason="messages_changed", missed_tokens=900, entry=3))
    hit = CacheCheck(provider=CacheMiss(reason="none"), predicted=CacheMiss(reason="ttl_expired", missed_tokens=50))
    with LocalSessionStore(tmp_path / "store").create(cwd=str(workspace)) as session:
        for n, check in enumerate((None, told, predicted, hit)):
            session.append(UserMessage(text=f"question {n}"))
            session.append(AssistantMessage(text=f"answer {n}", cache_check=check))
        return session.id


def test_sessions_budget_lists_why_each_turn_missed(tmp_path: Path, session_id: str) -> None:
    result = runner.invoke(app, ["--store", str(tmp_path / "store"), "sessions", "budget", session_id, "--json"])
    assert result.exit_code == 0, result.output
    misses = json.loads(result.stdout)["cache_misses"]
    assert [(m["reason"], m["source"], m["agrees"], m["at_entry"]) for m in misses] == [
        ("tools_changed", "provider", True, None),
        ("messages_changed", "predicted", None, 3),
    ]  # the provider's "none" outranks the simulator's guess of an expiry
    assert [m["words"] for m in misses] == [
        "tools changed (4,210 tokens)",
        "prefix rewritten at entry 3 (900 tokens) (predicted)",
    ]
    human = runner.invoke(app, ["--store", str(tmp_path / "store"), "sessions", "budget", session_id])
    assert "Why turns missed the cache" in human.stdout
    assert "prefix rewritten at entry 3 (900 tokens) (predicted)" in human.stdout


def test_the_footer_says_why_the_turn_missed_only_when_it_did() -> None:
    told = CacheCheck(provider=CacheMiss(reason="tools_changed", missed_tokens=4_210))
    guessed = CacheCheck(predicted=CacheMiss(reason="ttl_expired", missed_tokens=900))
    view: list[LogEntry] = [
        AssistantMessage(text="old", turn_id="t1", cache_check=told),
        UserMessage(text="again"),
        AssistantMessage(text="a", turn_id="t2", cache_check=CacheCheck(provider=CacheMiss(reason="none"))),
        AssistantMessage(text="b", turn_id="t2", cache_check=guessed),
    ]
    assert turn_miss(view, "t2") == "TTL expired?"  # the simulator's guess, marked
    assert turn_miss(view[:3], "t2") == ""  # the provider said nothing missed
    assert turn_miss(view[:1], "t1") == "tools changed"
    usage = Usage(input=1_000, output=100)
    assert footer_text("m", usage, 0, 0, missed="tools changed").endswith(" · missed: tools changed")
    assert "missed" not in footer_text("m", usage, 0, 0)
