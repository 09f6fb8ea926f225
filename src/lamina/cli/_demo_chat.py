"""`lamina chat --model demo`: the chat without an API key, a shipped script playing the model (I/O).

The script (`demo_chat.json`, beside this module) fixes a bug in a small sample workspace kept in
the user's state folder; a new demo session writes the sample files afresh, a resumed one finds
them as it left them. Every scripted session, the demo's included, continues its script where it
stopped when resumed in a new process: the steps used are the model calls its log recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import platformdirs

from lamina.providers import Provider, ScriptedProvider
from lamina.session import AssistantMessage, LogEntry

DEMO_MODEL: Final = "demo"
"""The model spec of the offline demo (`lamina chat --model demo`)."""
DEMO_SCRIPT: Final = Path(__file__).with_name("demo_chat.json")
SAMPLE_FILES: Final = {
    "AGENTS.md": "# Rules\n- Run `python3 test_app.py` after every change.\n"
    "- Never edit the tests to make them pass.\n",
    "app.py": "def total(xs):\n    return sum(xs) + 1\n",
    "test_app.py": "from app import total\n\nassert total([1, 2, 3]) == 6, total([1, 2, 3])\nprint('ok')\n",
}


def demo_workspace(*, fresh: bool) -> Path:
    """The demo's sample workspace (in the user's state folder); `fresh`: its files written anew."""
    workspace = platformdirs.user_state_path("lamina") / "demo-workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    for name, text in SAMPLE_FILES.items():
        path = workspace / name
        if fresh or not path.exists():
            path.write_text(text, encoding="utf-8")
    return workspace


def demo_provider() -> Provider:
    """The scripted model of the demo, its usage billed by the Anthropic cache simulator."""
    from lamina.cachesim import AnthropicCacheSimulator

    return ScriptedProvider.from_file(DEMO_SCRIPT, simulator=AnthropicCacheSimulator())


def steps_used(entries: list[LogEntry]) -> int:
    """How far a scripted session got: one step per model answer its log recorded (every branch counted)."""
    return sum(isinstance(entry, AssistantMessage) for entry in entries)
