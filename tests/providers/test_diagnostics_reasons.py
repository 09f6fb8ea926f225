"""The providers' cache-miss reasons are read closed: a reason that is not an API word is never kept raw."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lamina.providers._diagnostics import anthropic_cache_miss, openai_cache_miss


@pytest.mark.parametrize("kind", ["\x1b[2Jtools_changed", "[bold]x[/bold]", "tools changed\nrm -rf", "", "A" * 80])
def test_a_reason_that_is_not_an_api_word_becomes_unavailable(kind: str) -> None:
    anthropic = SimpleNamespace(cache_miss_reason=SimpleNamespace(type=kind, cache_missed_input_tokens=-5))
    openai = SimpleNamespace(type="cache_miss", reason=kind, cache_missed_tokens=True)
    for miss in (anthropic_cache_miss(anthropic), openai_cache_miss(openai)):
        assert miss is not None and (miss.reason, miss.missed_tokens) == ("unavailable", 0)


def test_a_new_reason_in_the_apis_words_is_kept() -> None:
    found = anthropic_cache_miss(SimpleNamespace(cache_miss_reason=SimpleNamespace(type="speed_changed")))
    assert found.reason == "speed_changed"
    hit = openai_cache_miss(SimpleNamespace(type="cache_miss", reason="input_changed", cache_missed_tokens=30))
    assert hit is not None and (hit.reason, hit.missed_tokens) == ("messages_changed", 30)
