"""The inspector says why a request missed the cache: the provider's reason, else the simulator's, marked."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from lamina.serve import create_app
from lamina.session import AssistantMessage, CacheCheck, CacheMiss, LocalSessionStore, UserMessage


def test_the_request_page_and_the_api_say_why_it_missed(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path / "store")
    checks = (
        None,
        CacheCheck(provider=CacheMiss(reason="none"), predicted=CacheMiss(reason="none")),
        CacheCheck(predicted=CacheMiss(reason="ttl_expired", missed_tokens=3_000)),
        CacheCheck(provider=CacheMiss(reason="system_changed", missed_tokens=1_200)),
    )
    with store.create(cwd=str(tmp_path)) as session:
        for n, check in enumerate(checks):
            session.append(UserMessage(text=f"question {n}"))
            session.append(AssistantMessage(text=f"answer {n}", model="claude-sonnet-5", cache_check=check))
        sid = session.id
    client = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
    series = client.get(f"/api/sessions/{sid}/requests").json()["requests"]
    assert [r["cache_miss"] for r in series] == [
        None,
        None,
        "TTL expired (3,000 tokens) (predicted)",
        "system prompt changed (1,200 tokens)",
    ]
    assert client.get(f"/api/sessions/{sid}/requests/3").json()["cache_miss"] == "system prompt changed (1,200 tokens)"
    page = client.get(f"/sessions/{sid}/requests/2").text
    assert 'id="cache-miss"' in page and "TTL expired (3,000 tokens) (predicted)" in page
    assert 'id="cache-miss"' not in client.get(f"/sessions/{sid}/requests/1").text
