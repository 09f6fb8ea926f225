"""One turn of `lamina chat`: the chat's state, and a turn that Ctrl-C cancels, its errors printed (I/O)."""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from lamina.agent import Agent, TurnOutcome
    from lamina.cli._config import Settings
    from lamina.cli._turn_view import TurnView
    from lamina.session import LogEntry

_T = TypeVar("_T")


class ChatState:
    """What slash commands change during a chat."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.spec = settings.model
        self.session_id = ""
        self.attachments: list[Path] = []
        """Files `/attach` queued for the next message."""
        self.draft = ""
        """Text to put back in the input at the next prompt (the unsent draft kept with an accepted plan)."""
        self.verbose = False
        """`--verbose`: internals too (a rewind's entry ids and what the model is sent)."""


async def cancellable(work: Coroutine[Any, Any, _T], view: TurnView) -> _T | None:
    """Run a coroutine as a task that Ctrl-C (SIGINT) cancels; None when it was cancelled."""
    import asyncio
    import signal

    from lamina.cli._console import err

    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    loop.add_signal_handler(signal.SIGINT, task.cancel)
    try:
        return await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # we are being cancelled ourselves, not just the turn
        view.interrupted()  # a running tool's output so far stays on screen
        err.print("[yellow]⏹ interrupted[/yellow] [dim](the turn was cancelled; the session is intact)[/dim]")
        return None
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        view.finish()


async def turn(agent: Agent, view: TurnView, text: str, attachments: Sequence[Path] = ()) -> TurnOutcome | None:
    return await drive(agent, view, agent.run_turn(text, attachments))


async def drive(agent: Agent, view: TurnView, work: Coroutine[Any, Any, TurnOutcome | None]) -> TurnOutcome | None:
    """Run a turn (or a plan's execution) that Ctrl-C can cancel; errors are printed, the footer follows."""
    from lamina.cli._console import err, safe
    from lamina.cli._session import discover_window
    from lamina.errors import LaminaError

    view.waiting()
    await discover_window(agent)  # `work` has not started: the turn sees the model's real window
    try:
        outcome = await cancellable(work, view)
    except LaminaError as exc:
        view.finish()
        err.print(f"[red]error:[/red] {safe(exc)}")
        return None
    if outcome is not None:
        view.footer(
            outcome,
            context_tokens=agent.engine.compactor.calibrated_context_tokens(),
            context_window=agent.provider.capabilities.context_window,
            missed=turn_miss(agent.engine.view, outcome.turn.id),
        )
    return outcome


def turn_miss(view: Sequence[LogEntry], turn_id: str) -> str:
    """Why the turn's first model call that missed the cache missed, short ("" when none did)."""
    from lamina.reports import session_misses
    from lamina.session import AssistantMessage

    calls: list[AssistantMessage] = []
    for entry in reversed(view):  # the turn's calls are the newest entries
        if isinstance(entry, AssistantMessage):
            if entry.turn_id != turn_id:
                break
            calls.append(entry)
    found = session_misses(reversed(calls))
    return found[0][1].short if found else ""
