"""The cost model's decisions in the inspector: the prune, the turn record's TTL and the boundary, in words."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import schemathesis
from starlette.testclient import TestClient

from lamina.pricing import describe_decision
from lamina.serve import create_app
from lamina.session import (
    CostDecision,
    LocalSessionStore,
    LogEntry,
    ToolOutputPruned,
    TurnRecord,
    UserMessage,
)
from tests.serve.sessions import PricedSession, priced_session


@dataclass(frozen=True)
class Priced:
    store: LocalSessionStore
    session: PricedSession
    entries: list[LogEntry]


@pytest.fixture(scope="module")
def priced(tmp_path_factory: pytest.TempPathFactory) -> Priced:
    root = tmp_path_factory.mktemp("priced")
    made = priced_session(root)
    store = LocalSessionStore(root / "priced-store")
    with store.open(made.id, writable=False) as session:
        entries = list(session.entries())
    return Priced(store, made, entries)


@pytest.fixture(scope="module")
def client(priced: Priced) -> TestClient:
    return TestClient(create_app(priced.store), base_url="http://127.0.0.1:8765")


def _decided(entries: list[LogEntry], kind: type[LogEntry]) -> list[LogEntry]:
    return [e for e in entries if isinstance(e, kind) and isinstance(getattr(e, "decision", None), CostDecision)]


def _decision(entry: LogEntry) -> CostDecision:
    decision = getattr(entry, "decision", None)
    assert isinstance(decision, CostDecision)
    return decision


@pytest.mark.parametrize(
    ("action", "words"),
    [
        (
            "prune",
            "prune: expected 12,345 base-price tokens against 20,000 keeping everything, 38 calls ahead, "
            "cache cold, re-read chance 20%",
        ),
        (
            "keep",
            "keep everything: expected 12,345 base-price tokens, no prune expected to cost less, 38 calls ahead, "
            "cache cold, re-read chance 20%",
        ),
        (
            "compact",
            "compact now: expected 12,345 base-price tokens against 20,000 waiting for the threshold, 38 calls ahead, "
            "cache cold",
        ),
        (
            "wait",
            "wait for the threshold: expected 12,345 base-price tokens against 20,000 compacting now, 38 calls ahead, "
            "cache cold",
        ),
        (
            "ttl_5m",
            "5-minute TTL: expected 12,345 base-price tokens against 20,000 with the 1-hour TTL, 38 calls ahead, "
            "cache cold",
        ),
        (
            "ttl_1h",
            "1-hour TTL: expected 12,345 base-price tokens against 20,000 with the 5-minute TTL, 38 calls ahead, "
            "cache cold",
        ),
        (
            "evict",
            "evict: expected 12,345 base-price tokens against 20,000 doing nothing, 38 calls ahead, cache cold",
        ),
    ],
)
def test_a_decision_reads_as_its_action_against_the_alternative_it_was_weighed_against(action: str, words: str) -> None:
    chance = 0.2 if action in ("prune", "keep") else 0.0
    decision = CostDecision(
        action=action, expected=12_345.4, expected_nothing=20_000.0, horizon=38, cache="cold", reread_chance=chance
    )
    assert describe_decision(decision) == words


def test_what_a_decision_did_not_log_is_left_out_of_its_words() -> None:
    one_lifetime = CostDecision(action="ttl_5m", expected=900.0, expected_nothing=900.0)  # OpenAI: nothing to choose
    assert (
        describe_decision(one_lifetime) == "5-minute TTL: expected 900 base-price tokens, the provider has no other TTL"
    )
    near = CostDecision(action="prune", expected=99.6, expected_nothing=1_000.0, horizon=1, cache="partly warm")
    assert describe_decision(near) == (
        "prune: expected 100 base-price tokens against 1,000 keeping everything, 1 call ahead, cache partly warm, "
        "re-read chance 0%"
    )


def test_the_engine_logged_what_the_pages_show(priced: Priced) -> None:
    prunes = _decided(priced.entries, ToolOutputPruned)
    records = _decided(priced.entries, TurnRecord)
    assert prunes and all(_decision(p).action == "prune" for p in prunes)
    ttls = {_decision(r).action for r in records}
    assert ttls == {"ttl_5m", "ttl_1h"}  # the 5-minute TTL after each long gap, the 1-hour one otherwise


def test_the_session_api_carries_every_decision_on_the_path_with_its_figures(
    client: TestClient, priced: Priced
) -> None:
    detail = client.get(f"/api/sessions/{priced.session.id}").json()
    logged = [e for e in priced.entries if isinstance(getattr(e, "decision", None), CostDecision)]
    assert [d["entry_id"] for d in detail["decisions"]] == [e.id for e in logged]
    for out, entry in zip(detail["decisions"], logged, strict=True):
        d = _decision(entry)
        assert out["on"] == (
            "prune"
            if isinstance(entry, ToolOutputPruned)
            else "turn TTL"
            if isinstance(entry, TurnRecord)
            else "compaction"
        )
        assert (out["action"], out["expected"], out["expected_nothing"]) == (d.action, d.expected, d.expected_nothing)
        assert (out["horizon"], out["cache"], out["reread_chance"]) == (d.horizon, d.cache, d.reread_chance)
        assert out["words"] == describe_decision(d) and out["ts"] == entry.ts
    boundary = detail["compactions"][-1]
    assert boundary["id"] == priced.session.boundary
    assert boundary["decision"]["words"] == describe_decision(priced.session.boundary_decision)
    assert boundary["decision"]["on"] == "compaction"


def test_the_entries_api_gives_each_priced_entry_its_decision(client: TestClient, priced: Priced) -> None:
    sid = priced.session.id
    page = client.get(f"/api/sessions/{sid}/entries", params={"limit": 1_000}).json()
    by_id = {item["id"]: item for item in page["entries"]}
    for entry in priced.entries:
        decision = getattr(entry, "decision", None)
        shown = by_id[entry.id]["decision"]
        if isinstance(decision, CostDecision):
            assert shown["words"] == describe_decision(decision)
        else:
            assert shown is None
    prune = _decided(priced.entries, ToolOutputPruned)[0]
    assert isinstance(prune, ToolOutputPruned)
    item = client.get(f"/api/sessions/{sid}/entries/{prune.id}").json()
    assert item["kind"] == "prune"
    assert (
        len(prune.call_ids) > 1
        and item["title"] == f"prune: {len(prune.call_ids)} results, ~{prune.tokens:,} tokens freed"
    )
    assert item["text"] == "\n".join(prune.call_ids)


def test_the_session_page_lists_the_decisions_and_the_timeline_names_them(client: TestClient, priced: Priced) -> None:
    sid = priced.session.id
    page = client.get(f"/sessions/{sid}").text
    assert "Context decisions on this branch" in page
    prunes = _decided(priced.entries, ToolOutputPruned)
    records = _decided(priced.entries, TurnRecord)
    short = [r for r in records if _decision(r).action == "ttl_5m"]
    kept_long = len(records) - len(short)
    listed = len(prunes) + len(short) + 1
    assert f"{listed} decisions priced by their expected bill" in page
    assert f"{kept_long} turns that kept the 1-hour turn breakpoint are not listed" in page
    for entry in (*prunes, *short):
        assert f'<tr class="decision-row" data-entry="{entry.id}"' in page
        assert f'href="/sessions/{sid}/entries/{entry.id}"' in page
        assert describe_decision(_decision(entry)) in page
    for entry in records:
        if _decision(entry).action == "ttl_1h":
            assert f'data-entry="{entry.id}" data-action' not in page
    # the timeline: the prune by what it took, each turn record's TTL, every decision in words on its item
    for prune in prunes:
        assert isinstance(prune, ToolOutputPruned)
        assert f"prune: {len(prune.call_ids)} results, ~{prune.tokens:,} tokens freed" in page
    assert "breakpoint TTL 5m" in page and "breakpoint TTL 1h" in page
    assert page.count('<p class="decision small">') == len(prunes) + len(records) + 2  # the boundary: item, section
    assert "priced: " + describe_decision(priced.session.boundary_decision) in page


def test_the_entry_page_shows_the_decision_its_entry_logged(client: TestClient, priced: Priced) -> None:
    sid = priced.session.id
    for entry in (
        _decided(priced.entries, ToolOutputPruned)[0],
        _decided(priced.entries, TurnRecord)[0],
        next(e for e in priced.entries if e.id == priced.session.boundary),
    ):
        page = client.get(f"/sessions/{sid}/entries/{entry.id}").text
        assert describe_decision(_decision(entry)) in page
    user = next(e for e in priced.entries if isinstance(e, UserMessage))
    assert 'id="entry-decision"' not in client.get(f"/sessions/{sid}/entries/{user.id}").text


def test_a_long_list_of_decisions_shows_the_newest_and_points_to_the_api(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path / "store")
    with store.create(cwd=str(tmp_path)) as session:
        session.append(UserMessage(text="go"))
        for i in range(120):
            decision = CostDecision(action="prune", expected=float(i), expected_nothing=1_000.0 + i, horizon=4)
            session.append(ToolOutputPruned(call_ids=(f"c{i}",), tokens=10, decision=decision))
        sid = session.id
    client = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
    page = client.get(f"/sessions/{sid}").text
    assert "120 decisions priced by their expected bill" in page and "the newest 50 shown" in page
    assert page.count("prune: 1 result, ~10 tokens freed") == 120  # the timeline names each
    assert page.count('<tr class="decision-row"') == 50
    assert (
        "against 1,119 keeping everything" in page
        and "against 1,069 keeping everything" not in page.split('id="decisions"')[1]
    )
    assert len(client.get(f"/api/sessions/{sid}").json()["decisions"]) == 120


def test_the_priced_session_matches_the_api_schema(priced: Priced) -> None:
    app = create_app(priced.store, extra_hosts=("testserver",))
    schema = schemathesis.openapi.from_asgi("/api/openapi.json", app)
    for path in ("/api/sessions/{session_id}", "/api/sessions/{session_id}/entries"):
        response = schema[path]["GET"].Case(path_parameters={"session_id": priced.session.id}).call_and_validate()
        assert response.status_code == 200
