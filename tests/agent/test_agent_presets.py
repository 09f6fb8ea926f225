"""`open_agent` with a custom preset file, and the platform section it picks (interactive or headless)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lamina.agent import AgentOptions, open_agent
from lamina.prompt import PresetFileError
from lamina.session import LocalSessionStore
from tests.wire.fixtures import anthropic_provider
from tests.wire.script import Reply
from tests.wire.server import WireServer

HEADLESS = "Headless: no one can answer questions"
INTERACTIVE = "A person reads your replies"


def _system(wire: WireServer) -> str:
    system = wire.requests[-1].body["system"]
    return system if isinstance(system, str) else "".join(block["text"] for block in system)


@pytest.mark.parametrize(("interactive", "expected"), [(True, INTERACTIVE), (False, HEADLESS), (None, HEADLESS)])
async def test_custom_preset_file_and_platform_section(
    tmp_path: Path, wire: WireServer, interactive: bool | None, expected: str
) -> None:
    preset = tmp_path / "preset.toml"
    preset.write_text('tools = ["Read", "Glob"]\n[text]\nhouse_rules = "Answer in British English."\n')
    store = LocalSessionStore(tmp_path / "store")
    wire.script(Reply(text="Done."))
    async with anthropic_provider(wire) as provider:
        agent = open_agent(
            store,
            provider,
            workspace=tmp_path,
            # interactive None: decided by the terminal, and pytest's stdin is not one
            options=AgentOptions(preset="custom", custom_preset=preset, interactive=interactive),
        )
        try:
            await agent.run_turn("hi")
        finally:
            agent.engine.session.close()
    system = _system(wire)
    assert "Answer in British English." in system and expected in system
    assert [t["name"] for t in wire.requests[-1].body["tools"]] == ["Read", "Glob"]


async def test_a_bad_custom_preset_fails_before_a_session_is_created(tmp_path: Path, wire: WireServer) -> None:
    preset = tmp_path / "preset.toml"
    preset.write_text("memory = 3\n")
    store = LocalSessionStore(tmp_path / "store")
    async with anthropic_provider(wire) as provider:
        with pytest.raises(PresetFileError, match="memory"):
            open_agent(store, provider, workspace=tmp_path, options=AgentOptions(preset="custom", custom_preset=preset))
    assert store.list() == []
