"""A stored session at rest: `lamina sessions budget`, `Agent.budget()`, `sessions compact`'s figures and what
a resume after it records, and `sessions list`'s counts after a chat."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from lamina.agent import AgentOptions, open_agent
from lamina.cli import app
from lamina.context import Tier
from lamina.reports import TIER_LABELS, BudgetReport
from lamina.session import LocalSessionStore, StateChange
from tests.wire.fixtures import API_KEY, anthropic_provider
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

runner = CliRunner()
MODEL = "anthropic:claude-sonnet-5"


@pytest.fixture
def ws(tmp_path: Path, wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text("Run the tests before you finish.\n")
    (workspace / "big.txt").write_text("".join(f"line {n}: some text of the file\n" for n in range(400)))
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", wire.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return workspace


def _cli(tmp_path: Path, *args: str, stdin: str | None = None) -> Result:
    result = runner.invoke(app, ["--store", str(tmp_path / "store"), *args], input=stdin)
    return result


def _session_with_turns(tmp_path: Path, wire: WireServer, turns: int = 4) -> str:
    """A stored session of `turns` turns, each reading the big file (so a compaction frees tokens).

    The file changes before every pass: an unchanged one would be read as a pointer to the first read.
    """
    session_id = None
    for n in range(turns):
        (Path.cwd() / "big.txt").write_text(
            "".join(f"line {i} of pass {n}: some text of the file\n" for i in range(400))
        )
        wire.script(Reply(text="Reading.", tool_calls=[ToolUse("Read", {"path": "big.txt"})]), Reply(text=f"Done {n}."))
        resume: list[str] = ["--resume", session_id] if session_id else []
        result = _cli(tmp_path, "run", f"read big.txt, pass {n}", "--model", MODEL, "--json", *resume)
        assert result.exit_code == 0, result.output
        session_id = str(json.loads(result.stdout)["session_id"])
    assert session_id is not None
    return session_id


def _tiers(document: dict[str, Any]) -> dict[str, int]:
    return {t["name"]: t["tokens"] for t in document["tiers"]}


@pytest.mark.slow
def test_sessions_budget_prints_what_agent_budget_returns(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    session_id = _session_with_turns(tmp_path, wire, turns=2)
    result = _cli(tmp_path, "sessions", "budget", session_id, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    tiers = _tiers(document)
    assert document["session"] == session_id and list(tiers) == [TIER_LABELS[t] for t in Tier]
    assert tiers["rules"] > 0 and tiers["catalogue"] > 0  # the stable parts and tool definitions
    assert tiers["tool results"] > 2 * 400  # both reads of big.txt are still in view
    assert document["total_tokens"] == sum(tiers.values())
    classes = {c["class"]: c for c in document["stability_classes"]}
    assert list(classes) == ["stable", "volatile", "on_demand", "one_shot", "compactable"]
    assert classes["stable"]["parts"] > 6  # the tool definitions are parts too
    assert classes["compactable"]["tokens"] > 2 * 400  # history and both reads of big.txt
    ttls = [d for d in document["decisions"] if d["on"] == "turn TTL"]  # each turn's breakpoint TTL, priced
    assert len(ttls) == 2 and all(d["action"] in ("ttl_1h", "ttl_5m") for d in ttls)
    assert all(d["words"].startswith(("1-hour TTL: expected", "5-minute TTL: expected")) for d in ttls)
    human = _cli(tmp_path, "sessions", "budget", session_id)
    assert "Context decisions" in human.stdout
    assert "Budget by tier" in human.stdout and f"{document['total_tokens']:,}" in human.stdout

    store = LocalSessionStore(tmp_path / "store")

    async def agent_budget() -> BudgetReport:
        async with anthropic_provider(wire) as provider:
            agent = open_agent(
                store, provider, workspace=ws, session_id=session_id, options=AgentOptions(interactive=True)
            )
            try:
                return agent.budget()
            finally:
                agent.engine.session.close()

    budget = asyncio.run(agent_budget())
    assert {TIER_LABELS[t.tier]: t.tokens for t in budget.tiers} == tiers
    before = store.open(session_id, writable=False)
    assert before.meta.entry_count == len(before.entries())  # neither wrote anything
    before.close()


def test_sessions_budget_of_a_missing_session_or_folder_is_a_clear_error(
    tmp_path: Path, ws: Path, wire: WireServer
) -> None:
    missing = _cli(tmp_path, "sessions", "budget", "20260101-000000-abcdef")
    assert missing.exit_code == 3 and "no session" in missing.stderr
    store = LocalSessionStore(tmp_path / "store")
    with store.create(cwd=str(tmp_path / "gone")) as session:
        pass
    gone = _cli(tmp_path, "sessions", "budget", session.id)
    assert gone.exit_code == 2
    assert f"its working directory {tmp_path / 'gone'} is gone" in gone.stderr

    # a session made before 0.3.0 recorded the workspace as the relative path it was given
    meta_file = tmp_path / "store" / session.id / "meta.json"
    meta = json.loads(meta_file.read_text())
    meta_file.write_text(json.dumps({**meta, "cwd": "shop"}))
    relative = _cli(tmp_path, "sessions", "budget", session.id)
    assert relative.exit_code == 2
    assert "recorded its workspace as the relative path 'shop'" in relative.stderr
    assert "run the command from the folder the session was created in" in relative.stderr


@pytest.mark.slow
def test_sessions_compact_counts_the_stable_parts_and_a_resume_records_no_stable_change(
    tmp_path: Path, ws: Path, wire: WireServer
) -> None:
    session_id = _session_with_turns(tmp_path, wire)
    budget = json.loads(_cli(tmp_path, "sessions", "budget", session_id, "--json").stdout)
    fixed = _tiers(budget)["rules"] + _tiers(budget)["catalogue"]
    result = _cli(tmp_path, "sessions", "compact", session_id, "--keep-tokens", "200", "--json")
    assert result.exit_code == 0, result.output
    outcome = json.loads(result.stdout)
    assert outcome["status"] == "compacted"
    # the whole next request (the budget also counts a placeholder message and the tail), not the history only
    assert abs(outcome["tokens_before"] - budget["total_tokens"]) < budget["total_tokens"] * 0.02
    assert fixed < outcome["tokens_after"] < outcome["tokens_before"]  # the stable parts and tools stay

    store = LocalSessionStore(tmp_path / "store")

    def stable_changes() -> list[StateChange]:
        with store.open(session_id, writable=False) as session:
            return [e for e in session.entries() if isinstance(e, StateChange) and e.key == "stable"]

    recorded = stable_changes()
    wire.script(Reply(text="Still here."))
    resumed = _cli(tmp_path, "run", "and now?", "--model", MODEL, "--resume", session_id)
    assert resumed.exit_code == 0, resumed.output
    assert stable_changes() == recorded  # the workspace did not change: nothing to record
    assert "stable_update" not in json.dumps(wire.requests[-1].body["messages"])


@pytest.mark.slow
def test_sessions_list_counts_are_current_after_chat_closes(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(Reply(text="Reading.", tool_calls=[ToolUse("Glob", {"pattern": "*.md"})]), Reply(text="One."))
    wire.script(Reply(text="Two."))
    chat = _cli(tmp_path, "chat", "--model", MODEL, "--mode", "explore", stdin="first\nsecond\n/quit\n")
    assert chat.exit_code == 0, chat.output
    listed = json.loads(_cli(tmp_path, "sessions", "list", "--json").stdout)["sessions"]
    assert len(listed) == 1
    store = LocalSessionStore(tmp_path / "store")
    with store.open(listed[0]["id"], writable=False) as session:
        entries = session.entries()
    assert listed[0]["entry_count"] == len(entries) and listed[0]["title"] == "first"
    assert listed[0]["updated_at"] >= max(e.ts for e in entries)
