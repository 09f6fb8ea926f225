"""A context engine over a small workspace, for tests (no pydantic imports: crash scripts load it).

The engine's session lives in an in-memory store by default (`memory_store`: one per test folder,
so a reopen finds it); a test that reads the log on disk, or runs the engine in another process,
asks for the JSONL store with `on_disk=True`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from lamina.attachments import MediaSupport
from lamina.context import Authority, Part, Stability, Tier, ToolSpec
from lamina.engine import ContextEngine
from lamina.placement import AnthropicTarget
from lamina.session import InMemorySessionStore, LocalSessionStore, SessionStore

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


_MEMORY_STORES: dict[Path, tuple[InMemorySessionStore, Callable[[], float]]] = {}


def memory_store(tmp_path: Path, clock: Callable[[], float]) -> InMemorySessionStore:
    """The in-memory store of this test folder (its files under `tmp_path / "store"`, as on disk)."""
    if tmp_path not in _MEMORY_STORES:
        _MEMORY_STORES[tmp_path] = (InMemorySessionStore(tmp_path / "store", clock=clock), clock)
    store, made_with = _MEMORY_STORES[tmp_path]
    assert made_with is clock, "reopen with the clock the store was made with"
    return store


def forget_memory_stores() -> None:
    """Drop every test folder's in-memory store (run after each test)."""
    for store, _ in _MEMORY_STORES.values():
        store.close()
    _MEMORY_STORES.clear()


def make_engine(
    tmp_path: Path,
    workspace: Path,
    clock: Clock,
    session_id: str | None = None,
    *,
    on_disk: bool = False,
    media: Callable[[], MediaSupport] | None = None,
) -> ContextEngine:
    if on_disk:
        store: SessionStore = LocalSessionStore(tmp_path / "store", clock=clock)
    else:
        store = memory_store(tmp_path, clock)
    session = store.open(session_id) if session_id else store.create(cwd=str(workspace))
    return ContextEngine(
        session,
        stable_source=workspace_source(workspace),
        tools=TOOLS,
        time_zone="Europe/Paris",
        clock=clock,
        media=media,
    )
