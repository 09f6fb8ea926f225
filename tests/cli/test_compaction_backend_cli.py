"""`[compaction] backend`: read from the config files, building the CLI's summariser; `sessions budget` shows it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.agent import AgentOptions, open_agent
from lamina.cli import app
from lamina.cli._config import load_settings
from lamina.cli._session import compaction_summariser
from lamina.compaction import DeterministicSummariser, ServerSummariser
from lamina.errors import ConfigError
from lamina.providers import Capabilities
from lamina.session import LocalSessionStore
from lamina.workspace import WorkspaceTrust
from tests.wire.fixtures import anthropic_provider
from tests.wire.script import Reply
from tests.wire.server import WireServer

runner = CliRunner()


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return workspace


def _user_config(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config" / "lamina" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


async def test_the_backend_defaults_to_lamina_and_the_setting_builds_a_server_summariser(
    tmp_path: Path, ws: Path, wire: WireServer
) -> None:
    default = load_settings(ws, trust=WorkspaceTrust.UNTRUSTED)
    assert default.compaction_backend == "lamina" and default.origin("compaction.backend") == "default"
    _user_config(tmp_path, '[compaction]\nbackend = "auto"\n')
    chosen = load_settings(ws, trust=WorkspaceTrust.UNTRUSTED)
    assert chosen.compaction_backend == "auto" and chosen.origin("compaction.backend").endswith("config.toml")
    async with anthropic_provider(wire) as provider:
        assert compaction_summariser(provider, default, "s1") is None  # the agent's own summariser
        made = compaction_summariser(provider, chosen, "s1")
    assert isinstance(made, ServerSummariser) and made.backend == "auto"
    result = runner.invoke(app, ["config", "show", "--json"])
    assert json.loads(result.stdout)["settings"]["compaction.backend"]["value"] == "auto"


def test_an_unknown_backend_is_a_config_error(tmp_path: Path, ws: Path) -> None:
    _user_config(tmp_path, '[compaction]\nbackend = "cloud"\n')
    with pytest.raises(ConfigError, match="backend"):
        load_settings(ws, trust=WorkspaceTrust.UNTRUSTED)


async def test_sessions_budget_shows_which_backend_compacted_and_counts_its_block(
    tmp_path: Path, ws: Path, wire: WireServer
) -> None:
    wire.script(*[Reply(text=f"Answer {n}: " + "detail " * 200) for n in range(3)])
    store = LocalSessionStore(tmp_path / "store")
    capabilities = Capabilities(server_compaction=frozenset({"summarize"}))
    async with anthropic_provider(wire, capabilities=capabilities) as provider:
        summariser = ServerSummariser(provider, backend="server", fallback=DeterministicSummariser())
        options = AgentOptions(keep_tokens=300, summariser=summariser)
        with open_agent(store, provider, workspace=ws, options=options) as agent:
            for n in range(3):
                await agent.run_turn(f"Question {n}: " + "context " * 200)
            await agent.compact()
            session_id = agent.engine.session.id
    shown = runner.invoke(app, ["--store", str(tmp_path / "store"), "sessions", "budget", session_id])
    assert shown.exit_code == 0, shown.output
    assert "compaction backend: compacted by the provider: the compaction backend setting is `server`" in shown.stdout
    assert "compaction block" in shown.stdout
    as_json = runner.invoke(app, ["--store", str(tmp_path / "store"), "sessions", "budget", session_id, "--json"])
    decided = json.loads(as_json.stdout)["decisions"]
    backends = [(d["on"], d["action"]) for d in decided if d["on"].startswith("compaction")]
    assert backends == [("compaction backend", "server_compaction")]


def test_the_context_editing_setting_reaches_every_anthropic_provider_the_cli_makes(
    tmp_path: Path, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lamina.cli._session import make_provider
    from lamina.providers import AnthropicProvider

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    default = load_settings(ws, trust=WorkspaceTrust.UNTRUSTED)
    made = make_provider("anthropic:claude-sonnet-5", default)
    assert isinstance(made, AnthropicProvider) and made.context_editing == "priced"  # the provider's own default
    _user_config(tmp_path, '[compaction]\ncontext_editing = "off"\n')
    chosen = load_settings(ws, trust=WorkspaceTrust.UNTRUSTED)
    assert chosen.origin("compaction.context_editing").endswith("config.toml")
    made = make_provider("anthropic:claude-sonnet-5", chosen)  # as /model makes the next one
    assert isinstance(made, AnthropicProvider) and made.context_editing == "off" and not made.target.context_edits
    result = runner.invoke(app, ["config", "show", "--json"])
    assert json.loads(result.stdout)["settings"]["compaction.context_editing"]["value"] == "off"
    _user_config(tmp_path, '[compaction]\ncontext_editing = "always"\n')
    with pytest.raises(ConfigError, match="context_editing"):
        load_settings(ws, trust=WorkspaceTrust.UNTRUSTED)


def test_the_prewarm_setting_is_read_from_the_config_files_and_shown(tmp_path: Path, ws: Path) -> None:
    assert load_settings(ws, trust=WorkspaceTrust.UNTRUSTED).prewarm == "priced"  # the default
    _user_config(tmp_path, '[compaction]\nprewarm = "always"\n')
    chosen = load_settings(ws, trust=WorkspaceTrust.UNTRUSTED)
    assert chosen.prewarm == "always" and chosen.origin("compaction.prewarm").endswith("config.toml")
    result = runner.invoke(app, ["config", "show", "--json"])
    assert json.loads(result.stdout)["settings"]["compaction.prewarm"]["value"] == "always"
    _user_config(tmp_path, '[compaction]\nprewarm = "sometimes"\n')
    with pytest.raises(ConfigError, match="prewarm"):
        load_settings(ws, trust=WorkspaceTrust.UNTRUSTED)
