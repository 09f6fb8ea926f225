"""A context engine over a small workspace, for tests (no pydantic imports: crash scripts load it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from lamina.engine import ContextEngine
from lamina.parts import Authority, Part, Stability, Tier
from lamina.placement import AnthropicTarget
from lamina.session import LocalSessionStore
from lamina.turn import ToolSpec

TOOLS = (ToolSpec("Read", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}),)
ANTHROPIC = AnthropicTarget(model="claude-sonnet-5")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 29, 9, 0, tzinfo=UTC).timestamp()

    def __call__(self) -> float:
        return self.now

    def advance(self, minutes: float) -> None:
        self.now += minutes * 60


def workspace_source(root: Path) -> Callable[[], Sequence[Part]]:
    def parts() -> Sequence[Part]:
        agents = (root / "AGENTS.md").read_text()
        return (
            Part(
                "system.base",
                "You are a careful coding agent.",
                "lamina",
                Authority.SYSTEM_RULE,
                Stability.STABLE,
                Tier.RULES,
            ),
            Part("context.agents", agents, "AGENTS.md", Authority.PROJECT_FILE, Stability.STABLE, Tier.RULES),
        )

    return parts


def make_engine(tmp_path: Path, workspace: Path, clock: Clock, session_id: str | None = None) -> ContextEngine:
    store = LocalSessionStore(tmp_path / "store", clock=clock)
    session = store.open(session_id) if session_id else store.create(cwd=str(workspace))
    return ContextEngine(
        session, stable_source=workspace_source(workspace), tools=TOOLS, time_zone="Europe/Paris", clock=clock
    )
