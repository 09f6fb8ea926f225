"""The deferral policy: which tool definitions a turn sends, and the catalogue that stands in for tool search."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.agent._tool_catalogue import DeferredTools
from lamina.agent._tool_sets import CATALOGUE_TOOL, ToolDeferral, choose_tool_set, definition_tokens
from lamina.context import ToolSpec
from lamina.defang import trusted
from lamina.errors import UsageError
from lamina.pricing import CachePrices, CacheState, Outlook, SessionPace
from lamina.providers import Capabilities
from tests.conftest import examples

BUILTIN = (ToolSpec("Read", trusted("Read a file."), {"type": "object"}),)


def _source(count: int, width: int) -> tuple[ToolSpec, ...]:
    """`count` MCP-like tools, each with `width` documented properties."""
    props = {
        f"field_{i}": {"type": "string", "description": f"The value of field {i} for the call."} for i in range(width)
    }
    schema = {"type": "object", "properties": props}
    return tuple(ToolSpec(f"srv__tool_{n}", trusted(f"Do thing {n}."), schema) for n in range(count))


def _outlook(history: int = 0, turns: int = 0, prices: CachePrices | None = None) -> Outlook:
    return Outlook(prices or CachePrices.anthropic(), SessionPace(turns=turns), CacheState(None, history, 0, 0))


@settings(max_examples=examples(150), deadline=None)
@given(
    count=st.integers(0, 40),
    width=st.integers(0, 30),
    window=st.sampled_from([8_000, 32_000, 200_000, 1_000_000]),
    share=st.floats(0.0, 1.0),
    tool_search=st.booleans(),
    history=st.integers(0, 300_000),
    turns=st.integers(0, 60),
    openai=st.booleans(),
    loaded=st.lists(st.integers(0, 40), max_size=5),
)
def test_the_choice_is_never_worse_than_sending_every_schema_on_its_own_estimate(
    count: int,
    width: int,
    window: int,
    share: float,
    tool_search: bool,
    history: int,
    turns: int,
    openai: bool,
    loaded: list[int],
) -> None:
    source = _source(count, width)
    outlook = _outlook(history, turns, CachePrices.openai() if openai else None)
    chosen = choose_tool_set(
        BUILTIN,
        source,
        deferral=ToolDeferral(share=share),
        context_window=window,
        tool_search=tool_search,
        outlook=outlook,
        loaded=[f"srv__tool_{n}" for n in loaded],
    )
    assert chosen.tools[: len(BUILTIN)] == BUILTIN  # built-ins first, never deferred
    if definition_tokens(source) <= share * window:
        assert chosen.mode == "all" and chosen.price is None  # within the share: nothing deferred
    if chosen.mode != "all":
        assert chosen.price is not None and chosen.price.deferred < chosen.price.send_all
    elif chosen.price is not None:
        assert chosen.price.send_all <= chosen.price.deferred
    match chosen.mode:
        case "all":
            assert chosen.tools == (*BUILTIN, *source)
        case "search":
            assert chosen.tools == (*BUILTIN, *(dataclasses.replace(t, deferred=True) for t in source))
        case "catalogue":
            names = [t.name for t in chosen.tools]
            assert names[1] == CATALOGUE_TOOL and not any(t.deferred for t in chosen.tools)
            assert names[2:] == list(dict.fromkeys(n for n in (f"srv__tool_{i}" for i in loaded) if n in names[2:]))


def test_seven_servers_of_schemas_are_deferred_on_a_200k_window_and_a_small_source_is_not() -> None:
    big, small = _source(70, 22), _source(3, 2)
    assert definition_tokens(big) > 20_000
    for tool_search, mode in ((True, "search"), (False, "catalogue")):
        chosen = choose_tool_set(
            BUILTIN, big, deferral=ToolDeferral(), context_window=200_000, tool_search=tool_search, outlook=_outlook()
        )
        assert chosen.mode == mode
    kept = choose_tool_set(
        BUILTIN, small, deferral=ToolDeferral(), context_window=200_000, tool_search=True, outlook=_outlook()
    )
    assert kept.mode == "all"


def test_a_share_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(UsageError, match="share"):
        ToolDeferral(share=1.5)


async def test_the_catalogue_lists_loads_and_the_first_use_is_loaded_by_the_pipeline_rule() -> None:
    source = _source(70, 22)
    deferred = DeferredTools(BUILTIN, source, ToolDeferral())
    chosen = deferred.choose(Capabilities(), _outlook())
    assert chosen.mode == "catalogue" and deferred.deferred("srv__tool_3")
    tool = deferred.tool()
    listed = await tool.run(tool.validate({"query": "thing 4"}), None)  # type: ignore[arg-type]
    assert "srv__tool_4:" in listed.content and "srv__tool_3:" not in listed.content
    loaded = await tool.run(tool.validate({"load": ["srv__tool_3", "nope"]}), None)  # type: ignore[arg-type]
    assert '"name": "srv__tool_3"' in loaded.content and "Unknown tools: nope" in loaded.content
    assert not deferred.deferred("srv__tool_3")
    again = deferred.choose(Capabilities(), _outlook())
    assert [t.name for t in again.tools] == ["Read", CATALOGUE_TOOL, "srv__tool_3"]  # appended in the tail
