"""Chat's footer and `--stream-json` say what a background compaction is doing."""

from __future__ import annotations

import io

from rich.console import Console

from lamina.agent import BackgroundCompaction
from lamina.cli._run import _event_json
from lamina.cli._turn_view import TurnView


def test_the_view_keeps_the_background_compaction_state_for_the_footer() -> None:
    console = Console(file=io.StringIO(), width=100, force_terminal=True, color_system=None)
    view = TurnView(model="claude-sonnet-5", spinner=False, console=console)
    assert view.background == ""
    view(BackgroundCompaction("started", "threshold", "compacting in the background"))
    assert view.background == "compacting in the background"
    view(BackgroundCompaction("ready", "threshold", "compaction ready (12,000 → 4,000 tokens)"))
    assert view.background == "compaction ready"
    view(BackgroundCompaction("applied", "threshold", "compacted 12,400 → 4,400 tokens"))
    assert view.background == ""


def test_stream_json_emits_each_background_compaction_event() -> None:
    event = BackgroundCompaction("discarded", "idle", "discarded: what it summarises changed since")
    assert _event_json(event) == {
        "type": "background_compaction",
        "kind": "discarded",
        "trigger": "idle",
        "message": "discarded: what it summarises changed since",
    }
