"""How a turn looks in the terminal: streamed text, thinking, tool lines, spinner, retries, compactions, footer (I/O).

Every string from the model, a tool or a file is neutralised (`show_controls`, into a `Text`, or
`safe` into markup). Text goes to stdout, the rest (thinking, tool lines, warnings, the footer) to
stderr, so `lamina chat > answer.txt` keeps only the answers. Lines fit the terminal, broken at
spaces; a long tool result is folded to its first and last rows, and `/output` prints it whole; the
model's thinking is folded to one dim line, and Ctrl-O at the prompt opens it (`open_thinking`).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec
from rich.console import Console, Group
from rich.live import Live
from rich.rule import Rule
from rich.text import Text

from lamina.agent import (
    AgentEvent,
    BackgroundCompaction,
    ModelCallFinished,
    PlanUpdate,
    SkillWarning,
    Thinking,
    ToolFinished,
    ToolProgress,
    ToolStarted,
    TurnOutcome,
)
from lamina.cli._console import err, fit, out
from lamina.defang import show_controls
from lamina.engine import CompactionEvent, Plan
from lamina.providers import ReasoningDelta, RetryNotice, TextDelta
from lamina.session import Usage

if TYPE_CHECKING:  # imported when a turn shows something: rich's Markdown and the prices wait for it
    from lamina.cli._live import Activity, TextStream
    from lamina.cli._type_ahead import TypeAhead

SUMMARY_CHARS = 120
"""Characters of a tool call's input shown on its line."""
FOLD_ROWS: Final = 8
"""A tool result of up to this many rows is shown whole; a longer one, its first and last rows."""
HEAD_ROWS: Final = 4
EXTRA_HEAD_ROWS: Final = 4
"""At most this many more rows are shown before the fold to end a sentence (an offload notice whole)."""
_ENDS: Final = (".", "]", ":", ")", "?", "!")
TAIL_ROWS: Final = 3
KEPT_OUTPUTS: Final = 200
"""How many of the latest tool outputs `/output` can show."""
KEPT_THINKING: Final = 200
"""How many of the latest thinkings Ctrl-O can open."""
KEPT_RUNNING_CHARS: Final = 200_000
"""The most of a running tool call's output kept to show if the user interrupts it (its end)."""
EXPAND_KEY: Final = "ctrl+o"
"""The key that opens the folded thinking, as the folded line names it."""


def call_summary(name: str, args: Any) -> str:
    """One line for a tool call: a Bash command, a file tool's path, a plan's title, else its input as JSON."""
    fields = msgspec.structs.asdict(args) if isinstance(args, msgspec.Struct) else dict(args)
    for key in ("command", "path", "pattern", "url", "query", "title"):
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


@dataclass(frozen=True, slots=True)
class KeptOutput:
    """A tool call's output as the chat showed it, for `/output`."""

    number: int
    name: str
    summary: str
    content: str
    full_output_path: str | None


class TurnView:
    """Prints a session's events; one per session, reused across turns.

    Live (`spinner`: an interactive terminal), it shows a spinner and a timer while the model
    works, a running tool's name, input, timer and last output lines, and the model's text drawn
    as Markdown as it streams; otherwise it prints the same lines as they happen.

    Args:
        model: The model's name (for the footer's cost).
        spinner: Live output (an interactive terminal).
        console: Where every line goes (the demo's one stream); default: text to stdout, the rest to stderr.
        indent: Spaces before every tool line.
        relative_to: Paths under this folder are shown relative to it.
        output_hint: Whether a folded result names `/output` (default: when live, the chat's terminal).
    """

    def __init__(
        self,
        *,
        model: str,
        spinner: bool,
        console: Console | None = None,
        indent: int = 0,
        relative_to: Path | None = None,
        output_hint: bool | None = None,
    ) -> None:
        self.model = model
        self._spinner = spinner
        self._text_console = console or out
        self._lines = console or err
        self._indent = indent
        self._relative_to = relative_to
        self._output_hint = spinner if output_hint is None else output_hint
        self._status: Live | None = None
        self._activity: tuple[str, Activity] | None = None
        """What the live lines show, and for which tool call ("" for the model)."""
        self._stream: TextStream | None = None
        self._summaries: dict[str, str] = {}
        self._outputs: dict[int, KeptOutput] = {}
        self._count = 0
        self._reasoning: list[str] = []
        """The readable reasoning streamed since the last folded line."""
        self._folded = False
        self.background = ""
        """A background compaction's state for the footer: "compacting in the background", "compaction ready" or ""."""
        """Whether this model call's thinking was folded already (from its streamed pieces)."""
        self._thinkings: list[str] = []
        """The latest thinkings, oldest first, for Ctrl-O."""
        self._opened: int | None = None
        """Which of them Ctrl-O opened last (None: none since the latest was kept)."""
        self._below: TypeAhead | None = None
        self._running: dict[str, tuple[str, str]] = {}
        """Each running tool call's name and what it printed so far (live only), shown if the user interrupts it."""

    def show_type_ahead(self, ahead: TypeAhead) -> None:
        """Draw the messages typed ahead under the spinner and the streamed text, redrawn as keys come."""
        self._below = ahead
        ahead.on_change = self._redraw

    def _redraw(self) -> None:
        if self._status is not None:
            self._status.refresh()
        elif self._stream is not None:
            self._stream.refresh()

    def waiting(self, label: str = "thinking…") -> None:
        """Show the spinner and a timer (live only) until the next output."""
        self._end_text()
        if self._spinner:
            from lamina.cli._live import Activity

            self._show("", Activity(Text(show_controls(label), style="dim")))

    def idle(self) -> None:
        """Stop the spinner (or a running tool's live lines)."""
        if self._status is not None:
            self._status.stop()
            self._status = None
        self._activity = None

    def finish(self) -> None:
        """End the turn's output (stop the spinner, end the streamed text)."""
        self.idle()
        self._end_text()

    def _show(self, call_id: str, activity: Activity) -> None:
        self.idle()
        self._activity = (call_id, activity)
        self._status = Live(
            activity if self._below is None else Group(activity, self._below),
            console=self._lines,
            refresh_per_second=8,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._status.start()

    def _end_text(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def _rows(self, text: Text, *, indent: int = 0) -> list[Text]:
        """`text` broken at spaces to the console's width (whole lines when the console soft-wraps: a pipe)."""
        console = self._lines
        return fit(text, None if console.soft_wrap else console.width, indent=indent, fold=console.is_terminal)

    def _print(self, text: Text, *, indent: int = 0) -> None:
        for row in self._rows(text, indent=indent):
            self._lines.print(row, soft_wrap=True)

    def __call__(self, event: AgentEvent) -> None:
        if isinstance(event, ReasoningDelta):
            self._think(event.text)
            return
        self._fold()
        match event:
            case Thinking():
                self._thought(event)
            case TextDelta(text=text):
                self.idle()
                if self._stream is None:
                    from lamina.cli._live import TextStream

                    self._stream = TextStream(self._text_console, live=self._spinner)
                    self._stream.below = self._below
                self._stream.add(text)
            case ToolStarted(call_id=call_id, name=name, input=args):
                self.finish()
                summary = self._summaries[call_id] = call_summary(name, args)
                self._print(
                    Text.assemble((f"→ {show_controls(name)}", "cyan"), " ", show_controls(summary)),
                    indent=self._indent,
                )
            case ToolProgress(call_id=call_id, name=name, output=output):
                self._progress(call_id, name, output)
            case ToolFinished():
                self.finish()
                self._finished(event)
                self.waiting()
            case SkillWarning(message=message):
                self.finish()
                self._print(Text.assemble(("warning:", "yellow"), " ", show_controls(message)))
            case RetryNotice(attempt=attempt, delay=delay, error=error):
                self.finish()
                retry = f" in {delay:.1f} s (attempt {attempt + 1}): "
                self._print(Text.assemble(("↻ retrying", "yellow"), retry, _first_line(error)))
                self.waiting(f"waiting {delay:.0f} s before retrying…")
            case ModelCallFinished():
                self._folded = False
            case PlanUpdate(plan=plan):
                self.finish()
                line = Text.assemble(("◆ plan", "magenta"), " ", show_controls(plan_line(plan)))
                self._print(line, indent=self._indent)
            case BackgroundCompaction(kind=kind):  # shown in the footer (applying it prints its own line)
                self.background = {"started": "compacting in the background", "ready": "compaction ready"}.get(kind, "")

    def _think(self, piece: str) -> None:
        """A piece of readable reasoning: kept for the folded line; live, the spinner says the model is thinking."""
        if not self._reasoning and self._stream is not None:  # thinking after text: the text ends here
            self.finish()
        if self._spinner and self._status is None:
            self.waiting()
        self._reasoning.append(piece)

    def _fold(self) -> None:
        """The reasoning streamed so far, folded into one dim line (the text kept for Ctrl-O)."""
        text = "".join(self._reasoning).strip()
        self._reasoning.clear()
        if not text:
            return
        self._folded = True
        self._keep(text)

    def _thought(self, event: Thinking) -> None:
        """A model call's reasoning whole: folded here when nothing of it streamed (or it has nothing to read)."""
        folded, self._folded = self._folded, False
        if folded:
            return
        if event.text:
            self._keep(event.text)
        elif event.blocks:
            redacted = any(b.kind == "redacted_thinking" for b in event.blocks)
            self.finish()
            self._print(Text(f"∴ Thinking ({'redacted' if redacted else 'not shown'} by the provider)", style="dim"))

    def _keep(self, text: str) -> None:
        self._thinkings.append(text)
        del self._thinkings[:-KEPT_THINKING]
        self._opened = None
        hint = f" ({EXPAND_KEY} to expand)" if self._output_hint else ""
        self.finish()
        words = len(text.split())
        line = f"∴ Thinking · {words:,} word{'' if words == 1 else 's'}{hint}"
        self._print(Text(line, style="dim italic"), indent=self._indent)

    def open_thinking(self) -> bool:
        """Print a folded thinking whole: the latest, then (pressed again) each one before it, round again.

        Returns:
            False when there is no thinking to open (a dim line says so).
        """
        if not self._thinkings:
            self._lines.print(Text("no thinking to open yet", style="dim"))
            return False
        count = len(self._thinkings)
        self._opened = count - 1 if not self._opened else self._opened - 1
        self.finish()
        title = Text(
            f"∴ thinking {self._opened + 1} of {count}"
            + (f" · {EXPAND_KEY} again: the one before" if count > 1 else "")
        )
        self._lines.print(Rule(title, align="left", style="dim"))
        self._lines.print(Text(show_controls(self._thinkings[self._opened]), style="italic"))
        self._lines.print(Rule(style="dim"))
        return True

    def _progress(self, call_id: str, name: str, output: str) -> None:
        """A running call's report: live, its name, input and timer, and its last output lines."""
        if not self._spinner:
            return
        if self._activity is None or self._activity[0] != call_id:
            self._end_text()
            summary = show_controls(self._summaries.get(call_id, ""))
            from lamina.cli._live import Activity

            self._show(call_id, Activity(Text.assemble((name, "cyan"), " ", summary)))
        if output and self._activity is not None:
            self._activity[1].feed(output)
        seen = self._running.get(call_id, (name, ""))[1]
        self._running[call_id] = (name, (seen + output)[-KEPT_RUNNING_CHARS:])

    def interrupted(self) -> None:
        """The turn was cancelled: a running tool call's output so far stays on screen, marked interrupted."""
        call_id = self._activity[0] if self._activity is not None else ""
        name, output = self._running.pop(call_id, ("", ""))
        self.finish()
        if name:
            self._finished(ToolFinished(call_id, name, True, output or "(no output yet)", None), interrupted=True)

    def _finished(self, event: ToolFinished, *, interrupted: bool = False) -> None:
        """The result's lines: its text broken at spaces, folded to its first and last rows when long."""
        self._running.pop(event.call_id, None)
        self._count += 1
        summary = self._summaries.pop(event.call_id, "")
        kept = KeptOutput(self._count, event.name, summary, event.content, event.full_output_path)
        self._outputs[kept.number] = kept
        self._outputs.pop(kept.number - KEPT_OUTPUTS, None)
        mark = ("⏹", "yellow") if interrupted else ("✗", "red") if event.is_error else ("✓", "green")
        content = show_controls(self._shorten(event.content.strip("\n")))
        name = show_controls(event.name)  # the model names the tool: an unknown one may hold escape codes
        label = f" {name} (interrupted): " if interrupted else f" {name}: "
        rows = self._rows(Text.assemble(mark, label, content), indent=self._indent)
        if len(rows) > FOLD_ROWS:
            head = _sentence_end(rows)
            hint = f" · /output {kept.number} shows it whole" if self._output_hint else ""
            notice = f"… +{len(rows) - head - TAIL_ROWS} lines{hint}"
            rows = [*rows[:head], Text(" " * (self._indent + 2) + notice, style="dim"), *rows[-TAIL_ROWS:]]
        for row in rows:
            self._lines.print(row, soft_wrap=True)
        if event.full_output_path:
            where = f"(full output: {show_controls(self._shorten(event.full_output_path))})"
            self._print(Text(where, style="dim"), indent=self._indent + 2)

    def _shorten(self, text: str) -> str:
        """`text` with the paths under `relative_to` made relative to it."""
        return text if self._relative_to is None else text.replace(f"{self._relative_to}{os.sep}", "")

    def show_output(self, number: int | None = None) -> bool:
        """Print a tool call's output whole (its saved file when it was offloaded): the latest, or the `number`th.

        Args:
            number: The output's number, as a folded result names it; None: the latest.

        Returns:
            False when there is no such output (nothing is printed).
        """
        kept = self._outputs.get(self._count if number is None else number)
        if kept is None:
            return False
        text = kept.content
        if kept.full_output_path:
            with contextlib.suppress(OSError):  # gone: the preview the model saw is all there is
                text = Path(kept.full_output_path).read_text(encoding="utf-8", errors="replace")
        self.finish()
        title = Text(f"output {kept.number}: {show_controls(kept.name)} {show_controls(kept.summary)}")
        self._lines.print(Rule(title, align="left", style="dim"))
        self._lines.print(Text(show_controls(text.rstrip("\n"))))
        self._lines.print(Rule(style="dim"))
        return True

    def compaction(self, event: CompactionEvent) -> None:
        """A compaction's progress (an engine listener): a spinner while it runs, a line for automatic ones."""
        if event.kind == "started":
            self.finish()
            self.waiting("compacting…")
            return
        if event.trigger == "manual":  # `/compact` prints its own outcome
            return
        self.finish()
        if event.kind == "completed":
            line = Text.assemble((f"⊘ automatic compaction ({event.trigger})", "magenta"), ": ")
        else:
            line = Text.assemble((f"automatic compaction ({event.trigger}) failed:", "yellow"), " ")
        self._print(line + show_controls(event.message))
        self.waiting()

    def footer(self, outcome: TurnOutcome, *, context_tokens: int, context_window: int, missed: str = "") -> None:
        """One dim line: tokens in/out, cache read/write, estimated cost, context use, and why the cache missed."""
        text = footer_text(self.model, outcome.usage, context_tokens, context_window, missed=missed)
        text += f" · {self.background}" if self.background else ""
        self._print(Text(text, style="dim"))


def footer_text(model: str, usage: Usage, context_tokens: int, context_window: int, *, missed: str = "") -> str:
    """`in 1,204 · out 87 · cache read 9,310 · write 0 · $0.0043 · context 6% of 200k`.

    A model that reasoned shows how much of its output was thinking: `out 87 (thinking 40)`; a turn
    that missed the cache ends with why, as short as `lamina.reports.CacheMissReport.short`:
    `missed: tools changed` (`TTL expired?`: the simulator's guess, the provider said nothing).
    """
    thinking = f" (thinking {usage.reasoning:,})" if usage.reasoning else ""
    parts = [
        f"in {usage.input:,}",
        f"out {usage.output:,}{thinking}",
        f"cache read {usage.cache_read:,}",
        f"write {usage.cache_write:,}",
    ]
    from lamina.pricing import cost_of

    cost = cost_of(model, usage)
    if cost is not None:
        parts.append(f"${cost:.4f}")
    if context_window > 0:
        share = 100 * context_tokens / context_window
        parts.append(f"context {share:.0f}% of {context_window // 1000:,}k")
    if missed:
        parts.append(f"missed: {missed}")
    return " · ".join(parts)


def _sentence_end(rows: list[Text]) -> int:
    """How many rows a folded result shows first: `HEAD_ROWS`, or a few more to end the sentence they cut."""
    last = len(rows) - TAIL_ROWS - 1  # at least one row folded
    head = HEAD_ROWS
    while head < min(last, HEAD_ROWS + EXTRA_HEAD_ROWS) and not rows[head - 1].plain.rstrip().endswith(_ENDS):
        head += 1
    return head if rows[head - 1].plain.rstrip().endswith(_ENDS) else HEAD_ROWS


def _first_line(error: BaseException) -> str:
    text = show_controls(str(error).strip())
    return text.splitlines()[0] if text else type(error).__name__
