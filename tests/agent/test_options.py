"""`open_agent`'s options: `AgentOptions` sets an agent up; the keyword arguments it replaces still work, deprecated."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path
from typing import Any

import pytest

from lamina import AgentOptions as RootAgentOptions
from lamina.agent import AgentOptions, open_agent
from lamina.compaction import DeterministicSummariser
from lamina.providers import ScriptedProvider, ScriptedResponse
from lamina.session import InMemorySessionStore
from lamina.tools import PermissionMode


@pytest.fixture
def store(tmp_path: Path) -> InMemorySessionStore:
    return InMemorySessionStore(tmp_path / "store")


@pytest.fixture
def workspace(store: InMemorySessionStore, tmp_path: Path) -> Path:
    return tmp_path  # the store's folder inside it does no harm: nothing here reads the workspace


def _provider() -> ScriptedProvider:
    return ScriptedProvider([ScriptedResponse(text="done")])


def test_the_options_set_the_agent_up(store: InMemorySessionStore, workspace: Path) -> None:
    summariser = DeterministicSummariser()
    options = AgentOptions(mode="explore", summariser=summariser, keep_tokens=321, compaction_band=None)
    with open_agent(store, _provider(), workspace=workspace, options=options) as agent:
        assert agent.engine.settings.mode == PermissionMode.EXPLORE.value
        assert (agent.summariser, agent.keep_tokens, agent.compaction_band) == (summariser, 321, None)
        assert agent.run_turn_sync("hello").text == "done"
    assert RootAgentOptions is AgentOptions  # `lamina` exports it beside `open_agent`


def test_the_options_are_frozen_and_a_variant_is_a_replace() -> None:
    options = AgentOptions(mode="plan")
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.mode = "execute"  # type: ignore[misc]
    assert dataclasses.replace(options, keep_tokens=10) == AgentOptions(mode="plan", keep_tokens=10)
    assert {f.name for f in dataclasses.fields(AgentOptions)} == {
        "mode",
        "preset",
        "custom_preset",
        "interactive",
        "ask",
        "on_event",
        "retry",
        "summariser",
        "keep_tokens",
        "user_lane_tokens",
        "prune",
        "compaction_band",
        "cache_diagnostics",
        "cache_prices",
        "context_editing",
        "prewarm",
        "clock",
        "sources",
        "tool_deferral",
        "strict_prerequisites",
        "nearest_context_rule",
        "skills_dir",
        "sandbox",
    }


@pytest.mark.parametrize(
    ("keyword", "value"),
    [("mode", "explore"), ("keep_tokens", 321), ("compaction_band", None), ("interactive", False)],
)
def test_an_old_keyword_argument_warns_naming_the_field_and_still_works(
    store: InMemorySessionStore, workspace: Path, keyword: str, value: Any
) -> None:
    with pytest.warns(DeprecationWarning, match=rf"open_agent\({keyword}=\.\.\.\).*AgentOptions\({keyword}=") as seen:
        agent = open_agent(store, _provider(), workspace=workspace, **{keyword: value})
    with agent:
        assert [w.filename for w in seen] == [__file__]  # the warning points at the caller's line
        chosen = agent.engine.settings.mode if keyword == "mode" else getattr(agent, keyword, value)
        assert chosen == value
        assert agent.run_turn_sync("hello").text == "done"


def test_old_keywords_override_the_options_given_beside_them(store: InMemorySessionStore, workspace: Path) -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        agent = open_agent(
            store, _provider(), workspace=workspace, options=AgentOptions(mode="plan", keep_tokens=5), keep_tokens=7
        )
    with agent:
        assert [str(w.message) for w in seen] == [
            "open_agent(keep_tokens=...) is deprecated: pass options=AgentOptions(keep_tokens=...)"
        ]
        assert (agent.engine.settings.mode, agent.keep_tokens) == ("plan", 7)


def test_provider_as_a_keyword_is_the_model_deprecated(store: InMemorySessionStore, workspace: Path) -> None:
    provider = _provider()
    with pytest.warns(DeprecationWarning, match=r"open_agent\(provider=\.\.\.\) is deprecated: pass it as the model"):
        agent = open_agent(store, workspace=workspace, provider=provider)
    with agent:
        assert agent.provider is provider and not agent.owns_provider


def test_a_missing_model_or_an_unknown_keyword_is_a_type_error(store: InMemorySessionStore, workspace: Path) -> None:
    with pytest.raises(TypeError, match="needs a model"):
        open_agent(store, workspace=workspace)
    with pytest.raises(TypeError, match="both a model and provider"), pytest.warns(DeprecationWarning):
        open_agent(store, _provider(), workspace=workspace, provider=_provider())
    with pytest.raises(TypeError), pytest.warns(DeprecationWarning):
        open_agent(store, _provider(), workspace=workspace, colour="blue")  # type: ignore[call-arg]
    assert store.list() == []  # nothing was created
