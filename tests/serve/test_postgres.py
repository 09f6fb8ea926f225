"""The inspector over the PostgreSQL store: the same pages and API from the store protocol alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from lamina.pricing import cost_of
from lamina.serve import create_app
from lamina.session import SessionStore, UserMessage
from tests.serve.sessions import rich_session
from tests.support.postgres import fresh_schema, schema_url


@pytest.fixture
def pg_store(tmp_path: Path) -> Iterator[SessionStore]:
    from lamina.session.postgres import PostgresSessionStore

    with fresh_schema("serve") as schema:
        store = PostgresSessionStore(schema_url(schema), files_root=tmp_path / "files")
        try:
            yield store
        finally:
            store.close()


@pytest.mark.slow
def test_the_inspector_reads_a_postgresql_store(pg_store: SessionStore, tmp_path: Path) -> None:
    rich = rich_session(pg_store, tmp_path)
    client = TestClient(create_app(pg_store, prices=cost_of), base_url="http://127.0.0.1:8765")
    rows = client.get("/api/sessions").json()["sessions"]
    assert [r["id"] for r in rows] == [rich.id] and rows[0]["requests"] == 6
    detail = client.get(f"/api/sessions/{rich.id}").json()
    assert {b["leaf_id"] for b in detail["branches"]} == {rich.main_leaf, rich.branch_leaf}
    assert len(detail["compactions"]) == 1 and detail["plans"][0]["state"] == "done"
    layers = client.get(f"/api/sessions/{rich.id}/requests/3").json()
    assert layers["stable_recorded"] and any(part["key"] == "recovery" for part in layers["layers"][4]["parts"])
    page = client.get(f"/sessions/{rich.id}").text
    thumbnail = page.split('class="attachment"><img src="', 1)[1].split('"', 1)[0]
    assert client.get(thumbnail).content.startswith(b"\x89PNG")
    # a change is seen through the store's metadata (no log file to stat)
    before = client.get(f"/api/sessions/{rich.id}").json()["session"]["entries"]
    with pg_store.open(rich.id) as session:
        session.append(UserMessage(text="written to the database"))
    after = client.get(f"/api/sessions/{rich.id}").json()["session"]["entries"]
    assert after == before + 1
    assert "written to the database" in client.get(f"/sessions/{rich.id}/live").text
