"""`lamina.agent` as a package: `open_agent` reads a model spec as the CLI does, `open_engine` and the old names."""

from __future__ import annotations

import asyncio
import json
import typing
from pathlib import Path

import pytest

from lamina.agent import AgentEvent, AgentOptions, SkillWarning, open_agent, open_engine
from lamina.errors import UsageError
from lamina.providers import AnthropicProvider, ScriptedProvider, provider_from_spec
from lamina.session import InMemorySessionStore


@pytest.fixture
def store(tmp_path: Path) -> InMemorySessionStore:
    return InMemorySessionStore(tmp_path / "files")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def test_a_scripted_spec_runs_the_turns_its_file_holds(
    store: InMemorySessionStore, workspace: Path, tmp_path: Path
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": [{"text": "from a spec"}]}))
    with open_agent(store, f"scripted:{script}", workspace=workspace, options=AgentOptions(interactive=False)) as agent:
        assert isinstance(agent.provider, ScriptedProvider)
        assert agent.run_turn_sync("hello").text == "from a spec"


def test_a_model_spec_builds_the_provider_the_cli_builds(
    store: InMemorySessionStore, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    spec = "anthropic:claude-sonnet-5"
    cli_built = provider_from_spec(spec)  # what `lamina chat --model` builds (cli._session.make_provider)
    with open_agent(store, spec, workspace=workspace, options=AgentOptions(interactive=False)) as agent:
        built = agent.provider
        assert isinstance(built, AnthropicProvider)
        assert (built.name, built.target, built.capabilities) == (
            cli_built.name,
            cli_built.target,
            cli_built.capabilities,
        )
    for provider in (built, cli_built):
        assert isinstance(provider, AnthropicProvider)
        asyncio.run(provider.aclose())


@pytest.mark.parametrize("spec", ["mystery:model", "anthropic:", "claude"])
def test_a_bad_spec_is_a_usage_error_naming_it_and_opens_no_session(
    store: InMemorySessionStore, workspace: Path, spec: str
) -> None:
    with pytest.raises(UsageError, match=f"provider spec {spec!r}"):
        open_agent(store, spec, workspace=workspace, options=AgentOptions(interactive=False))
    assert list(store.list()) == []


def test_open_engine_is_the_engine_for_reports(store: InMemorySessionStore, workspace: Path) -> None:
    with store.create(cwd=str(workspace)) as session:
        engine = open_engine(session, workspace=workspace)
        assert engine.session is session and engine.tools


def test_the_moved_modules_still_export_the_agents_names() -> None:
    assert SkillWarning in typing.get_args(AgentEvent)


@pytest.mark.slow
def test_an_agent_closes_the_provider_it_built_and_runs_sync_turns_on_one_loop(
    store: InMemorySessionStore, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.wire.script import Reply
    from tests.wire.server import WireServer

    with WireServer() as wire:
        wire.script(Reply(text="First."), Reply(text="Second."), Reply(text="Third."))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "wire-test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", wire.url)
        with open_agent(
            store, "anthropic:claude-sonnet-5", workspace=workspace, options=AgentOptions(interactive=False)
        ) as agent:
            # two turns through one SDK client: its kept-alive connection needs the loop it was made on
            assert agent.run_turn_sync("One?").text == "First."
            assert agent.run_turn_sync("Two?").text == "Second."
            built = agent.provider
        assert isinstance(built, AnthropicProvider) and built._client is None  # closed with the agent

        async def given_provider() -> None:
            built = provider_from_spec("anthropic:claude-sonnet-5")
            assert isinstance(built, AnthropicProvider)
            async with built as given:
                async with open_agent(
                    store, given, workspace=workspace, options=AgentOptions(interactive=False)
                ) as agent:
                    assert (await agent.run_turn("Three?")).text == "Third."
                assert given._client is not None  # a given one stays open

        asyncio.run(given_provider())
