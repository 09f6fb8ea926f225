"""The inspector shows compactions made in the background: prepared, applied and discarded, with their prices."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from lamina.pricing import describe_decision
from lamina.serve import create_app
from lamina.session import (
    AssistantMessage,
    CompactionBoundary,
    CompactionDiscarded,
    CostDecision,
    LocalSessionStore,
    PreparedCompaction,
    UserMessage,
)

PRICE = CostDecision(action="compact", expected=9_000.0, expected_nothing=14_000.0, horizon=6, cache="cold")


def _prepared(summary: str, first_kept_id: str) -> PreparedCompaction:
    boundary = CompactionBoundary(
        id="prepared",
        summary=summary,
        first_kept_id=first_kept_id,
        tokens_before=12_000,
        tokens_after=4_000,
        trigger="threshold",
        decision=PRICE,
    )
    return PreparedCompaction(boundary=boundary, trigger="idle", covers="c")


def test_prepared_applied_and_discarded_compactions_are_shown_with_their_prices(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path / "store")
    with store.create(cwd=str(tmp_path)) as session:
        session.append(UserMessage(text="first"))
        kept = session.append(AssistantMessage(text="answer"))
        discarded = session.append(_prepared("## Goal\nthe discarded one", kept.id))
        session.append(CompactionDiscarded(prepared_id=discarded.id, reason="what it summarises changed since"))
        applied = session.append(_prepared("## Goal\nthe applied one", kept.id))
        boundary = session.append(
            CompactionBoundary(
                summary="## Goal\nthe applied one",
                first_kept_id=kept.id,
                tokens_before=12_500,
                tokens_after=4_500,
                trigger="threshold",
                decision=PRICE,
                prepared_id=applied.id,
            )
        )
        session.append(UserMessage(text="second"))
        waiting = session.append(_prepared("## Goal\nthe waiting one", kept.id))
        sid = session.id
    client = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
    shown = {c["id"]: c for c in client.get(f"/api/sessions/{sid}").json()["compactions"]}
    assert applied.id not in shown  # an applied one is its boundary's row
    assert shown[boundary.id]["background"] == "applied"
    assert shown[discarded.id]["background"] == "discarded"
    assert shown[discarded.id]["discarded_because"] == "what it summarises changed since"
    assert shown[waiting.id]["background"] == "prepared"
    for row in shown.values():
        assert row["decision"]["words"] == describe_decision(PRICE)
    page = client.get(f"/sessions/{sid}").text
    assert "prepared in the background" in page and "discarded in the background" in page
    assert "applied in the background" in page and "discarded: what it summarises changed since" in page
