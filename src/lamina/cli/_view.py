"""How a turn looks in the terminal: streamed text, tool lines, spinner, retries, compactions, footer (I/O).

Every string from the model, a tool or a file goes through `safe`. Text goes to stdout, the rest
(tool lines, warnings, the footer) to stderr, so `lamina chat > answer.txt` keeps only the answers.
"""

from __future__ import annotations

from typing import Any

import msgspec
from rich.status import Status

from lamina.agent import AgentEvent, ModelCallFinished, PlanUpdate, SkillWarning, ToolFinished, ToolStarted, TurnOutcome
from lamina.cli._console import err, out, safe
from lamina.engine import CompactionEvent, Plan
from lamina.providers import RetryNotice, TextDelta
from lamina.reports import cost_of
from lamina.session import Usage

SUMMARY_CHARS = 120
"""Characters of a tool call's input shown on its line."""


def call_summary(name: str, args: Any) -> str:
    """One line for a tool call: the command of a Bash call, the path of a file tool, else its input as JSON."""
    fields = msgspec.structs.asdict(args) if isinstance(args, msgspec.Struct) else dict(args)
    for key in ("command", "path", "pattern", "url", "query"):
        if isinstance(fields.get(key), str):
            text = str(fields[key])
            break
    else:
        text = msgspec.json.encode(fields).decode()
    text = " ".join(text.split())
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


_PLAN_STATES = {
    "submitted": "submitted for your decision: /plan shows it; accept, accept & compact, or reject",
    "accepted": "accepted",
    "awaiting_compaction": "compacting the conversation before the plan runs…",
    "compacted": "compaction complete: the plan runs in the fresh context",
    "dispatched": "dispatched: carrying it out in execute mode",
    "done": "done",
    "failed": "failed",
    "rejected": "rejected: back to planning with your feedback",
    "cancelled": "cancelled",
}


def plan_line(plan: Plan) -> str:
    """One line for a plan's state (a string to escape with `safe`)."""
    line = f"{plan.title!r} {_PLAN_STATES[plan.state]}"
    if plan.state == "accepted" and plan.compact:
        line += " (Accept & Compact)"
    if plan.state == "failed":
        line += f": {plan.detail}" + ("" if plan.dispatched else " (/plan accept or /plan compact to try again)")
    return line


class TurnView:
    """Prints a session's events; one per session, reused across turns."""

    def __init__(self, *, model: str, spinner: bool) -> None:
        self.model = model
        self._spinner = spinner
        self._status: Status | None = None
        self._open_line = False
        """Streamed text was printed without its final newline."""

    def waiting(self, label: str = "thinking…") -> None:
        """Show the spinner (interactive only) until the next output."""
        if not self._spinner:
            return
        if self._status is None:
            self._status = err.status(f"[dim]{safe(label)}[/dim]", spinner="dots")
            self._status.start()
        else:
            self._status.update(f"[dim]{safe(label)}[/dim]")

    def idle(self) -> None:
        """Stop the spinner."""
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _end_line(self) -> None:
        if self._open_line:
            out.print()
            self._open_line = False

    def __call__(self, event: AgentEvent) -> None:
        match event:
            case TextDelta(text=text):
                self.idle()
                out.print(safe(text), end="")
                self._open_line = not text.endswith("\n")
            case ToolStarted(name=name, input=args):
                self.idle()
                self._end_line()
                err.print(f"[cyan]→ {safe(name)}[/cyan] {safe(call_summary(name, args))}")
            case ToolFinished(name=name, is_error=is_error, content=content, full_output_path=path):
                first = content.strip().splitlines()[0][:100] if content.strip() else ""
                mark = "[red]✗[/red]" if is_error else "[green]✓[/green]"
                where = f" [dim](full output: {safe(path)})[/dim]" if path else ""
                err.print(f"{mark} {safe(name)}: {safe(first)}{where}")
                self.waiting()
            case SkillWarning(message=message):
                self.idle()
                self._end_line()
                err.print(f"[yellow]warning:[/yellow] {safe(message)}")
            case RetryNotice(attempt=attempt, delay=delay, error=error):
                self._end_line()
                err.print(
                    f"[yellow]↻ retrying[/yellow] in {delay:.1f} s (attempt {attempt + 1}): {safe(_first_line(error))}"
                )
                self.waiting(f"waiting {delay:.0f} s before retrying…")
            case ModelCallFinished():
                pass
            case PlanUpdate(plan=plan):
                self.idle()
                self._end_line()
                err.print(f"[magenta]◆ plan[/magenta] {safe(plan_line(plan))}")

    def compaction(self, event: CompactionEvent) -> None:
        """A compaction's progress (an engine listener): a spinner while it runs, a line for automatic ones."""
        if event.kind == "started":
            self.idle()
            self._end_line()
            self.waiting("compacting…")
            return
        if event.trigger == "manual":  # `/compact` prints its own outcome
            return
        self.idle()
        if event.kind == "completed":
            err.print(f"[magenta]⊘ automatic compaction ({safe(event.trigger)})[/magenta]: {safe(event.message)}")
        else:
            err.print(f"[yellow]automatic compaction ({safe(event.trigger)}) failed:[/yellow] {safe(event.message)}")
        self.waiting()

    def finish(self) -> None:
        """End the turn's output (stop the spinner, close the streamed line)."""
        self.idle()
        self._end_line()

    def footer(self, outcome: TurnOutcome, *, context_tokens: int, context_window: int) -> None:
        """One dim line: tokens in/out, cache read/write, estimated cost, context use."""
        err.print(f"[dim]{safe(footer_text(self.model, outcome.usage, context_tokens, context_window))}[/dim]")


def footer_text(model: str, usage: Usage, context_tokens: int, context_window: int) -> str:
    """`in 1,204 · out 87 · cache read 9,310 · write 0 · $0.0043 · context 6% of 200k`."""
    parts = [
        f"in {usage.input:,}",
        f"out {usage.output:,}",
        f"cache read {usage.cache_read:,}",
        f"write {usage.cache_write:,}",
    ]
    cost = cost_of(model, usage)
    if cost is not None:
        parts.append(f"${cost:.4f}")
    if context_window > 0:
        share = 100 * context_tokens / context_window
        parts.append(f"context {share:.0f}% of {context_window // 1000:,}k")
    return " · ".join(parts)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else type(error).__name__
