"""`lamina models`, `/context`, the footer and the reserve warning: the window the models endpoint reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from tests.wire.fixtures import API_KEY
from tests.wire.models_api import anthropic_model
from tests.wire.script import Reply
from tests.wire.server import WireServer

runner = CliRunner()
MODEL = "anthropic:claude-opus-4-8"


@pytest.fixture
def ws(tmp_path: Path, wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", wire.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # this test's own cache: nothing remembered
    return workspace


def test_models_shows_the_endpoint_figures_and_keeps_them_in_the_cache(
    tmp_path: Path, ws: Path, wire: WireServer
) -> None:
    wire.models.anthropic["claude-opus-4-8"] = anthropic_model("claude-opus-4-8", max_input_tokens=640_000)
    shown = runner.invoke(app, ["models", MODEL, "--json"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert (data["model"], data["context_window"]) == (MODEL, 640_000)
    assert data["source"].startswith("models endpoint, 20") and data["system_clear_at"] is True
    (kept,) = (tmp_path / "cache").rglob("models.json")
    assert [entry["info"]["max_input_tokens"] for entry in json.loads(kept.read_text())["models"].values()] == [640_000]
    text = runner.invoke(app, ["models", MODEL])  # read once per process
    assert "window    640,000 tokens" in text.stdout and len(wire.models.lookups) == 1
    offline = runner.invoke(app, ["models", MODEL, "--offline"])
    assert "source    shipped table, unverified" in offline.stdout and "window    200,000 tokens" in offline.stdout


def test_models_of_an_unknown_model_says_the_defaults_stand(ws: Path) -> None:
    shown = runner.invoke(app, ["models", "anthropic:claude-next"])
    assert shown.exit_code == 0, shown.output
    assert "source    defaults: claude-next is not in the shipped table" in shown.stdout


def test_a_chat_uses_the_discovered_window_in_context_and_footer(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.models.anthropic["claude-opus-4-8"] = anthropic_model("claude-opus-4-8", max_input_tokens=640_000)
    wire.script(Reply(text="Hello."))
    result = runner.invoke(
        app, ["--store", str(tmp_path / "s"), "chat", "--model", MODEL], input="hi\n/context\n/model\n/quit\n"
    )
    assert result.exit_code == 0, result.output
    err = result.stderr
    assert "% of 640k" in err  # the footer
    assert "compacts  above 623,616 tokens (reserve 16,384)" in err and "window    models endpoint, 20" in err
    assert "window 640,000 (models endpoint, 20" in err  # /model


def test_a_reserve_not_smaller_than_the_window_is_warned_about(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    (ws / ".lamina").mkdir()
    (ws / ".lamina" / "config.toml").write_text("context_window = 20000\ncompaction_reserve = 20000\n")
    wire.script(Reply(text="## Summary\nNothing yet."), Reply(text="Done."))
    result = runner.invoke(app, ["--store", str(tmp_path / "s"), "run", "go", "--model", MODEL, "--trust"])
    assert (
        "the compaction reserve (20,000 tokens) is not smaller than the context window (20,000 tokens" in result.stderr
    )
    assert "window from the settings" in result.stderr
