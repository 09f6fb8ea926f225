"""`lamina run` against local servers' recorded shapes: settings that cannot work are said once, before the request."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from lamina.cli import app
from tests.wire.local_servers import play
from tests.wire.script import Reply
from tests.wire.server import WireServer

runner = CliRunner()


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("# demo\n")
    monkeypatch.chdir(workspace)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return workspace


def _run(tmp_path: Path, wire: WireServer) -> Result:
    model = f"openai-compat:{wire.openai_url}#smollm2"
    return runner.invoke(app, ["--store", str(tmp_path / "store"), "run", "hi", "--model", model])


def _warnings(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("warning:")]


@pytest.mark.slow
def test_a_server_too_small_for_the_prefix_is_said_once_before_the_request(
    tmp_path: Path, ws: Path, wire: WireServer
) -> None:
    play(wire, "llama.cpp", n_ctx=1024, meta_n_ctx=False)  # the window from /props
    wire.script(Reply(text="never sent"))
    result = _run(tmp_path, wire)
    assert result.exit_code != 0
    (warning,) = _warnings(result)
    assert "system prompt and tools alone are about" in warning and "1,024 tokens" in warning
    assert "--preset mini" in warning and f"{wire.url}/props" in warning
    assert "nothing to compact" not in result.stderr


@pytest.mark.slow
def test_the_default_reserve_fits_a_small_window_and_a_set_one_over_it_is_said(
    tmp_path: Path, ws: Path, wire: WireServer
) -> None:
    play(wire, "ollama", n_ctx=8192)
    wire.script(Reply(text="Fine."), Reply(text="Still fine."))
    quiet = _run(tmp_path, wire)
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stdout == "Fine.\n" and _warnings(quiet) == []
    (ws / ".lamina").mkdir()
    (ws / ".lamina" / "config.toml").write_text("compaction_reserve = 20000\n")
    said = _run(tmp_path, wire)
    (warning,) = _warnings(said)
    assert "compaction reserve (20,000 tokens)" in warning and "(8,192 tokens" in warning
