"""The environment a CLI test runs the commands in: the SDKs pointed at the wire server, config and cache in `home`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.wire.fixtures import API_KEY
from tests.wire.server import WireServer


def wire_variables(wire: WireServer, home: Path) -> dict[str, str]:
    """The variables that point the Anthropic and OpenAI SDKs at `wire` (with its key), config and cache into `home`."""
    return {
        "ANTHROPIC_BASE_URL": wire.url,
        "ANTHROPIC_API_KEY": API_KEY,
        "OPENAI_BASE_URL": wire.openai_url,
        "OPENAI_API_KEY": API_KEY,
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_CACHE_HOME": str(home / "cache"),
    }


def use_wire(monkeypatch: pytest.MonkeyPatch, wire: WireServer, home: Path) -> None:
    """Set `wire_variables` in this test's environment."""
    for name, value in wire_variables(wire, home).items():
        monkeypatch.setenv(name, value)
