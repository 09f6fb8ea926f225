"""Plan decisions in `lamina chat`: the question after a submitted plan, `/plan`, and a plan resumed (I/O)."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from lamina.agent import Agent, TurnOutcome
    from lamina.cli._turn_view import TurnView
    from lamina.cli._turns import ChatState
    from lamina.cli._user_input import LineReader

# -- plans ---------------------------------------------------------------------------------------------

PLAN_QUESTION: Final = "plan: [a]ccept · accept & [c]ompact · [r]eject · Enter: decide later (/plan) › "
"""Asked from a pipe after a turn that submitted a plan; text after the letter is kept as your draft."""
PLAN_KEYS_QUESTION: Final = "Plan? a accept · c accept & compact · r reject · l later (/plan decides) "
"""Asked in a terminal: one key, as approvals are answered."""
_DECISIONS: Final = {"a": "accept", "c": "compact", "r": "reject"}
RUN_QUESTION: Final = "run it: [a]sk before each change · [e]xecute without asking › "
"""Asked when a plan is accepted: the mode it runs in (then the session goes back to the mode before it)."""
_RUN_MODES: Final = {"a": "ask", "e": "execute"}


async def resume_plan(agent: Agent, reader: LineReader, view: TurnView, state: ChatState) -> None:
    """On opening a session: an accepted plan goes on where it stopped; an open one is announced."""
    from lamina.cli._console import err, safe
    from lamina.cli._turn_view import plan_line
    from lamina.cli._turns import drive
    from lamina.engine import OPEN_STATES, next_step

    plan = agent.plan
    if plan is None:
        return
    if next_step(plan) is not None:
        err.print(f"[magenta]◆ plan[/magenta] {safe(repr(plan.title))} was accepted: carrying on where it stopped")
        state.draft = plan.draft_input or ""
        outcome = await drive(agent, view, agent.resume_plan())
        await decide_plans(agent, reader, view, state, outcome)
    elif plan.state in OPEN_STATES:
        err.print(f"[magenta]◆ plan[/magenta] {safe(plan_line(plan))}")
    elif plan.state == "dispatched":  # the process stopped while it ran: back to the mode before it
        await agent.resume_plan()


async def decide_plans(
    agent: Agent, reader: LineReader, view: TurnView, state: ChatState, outcome: TurnOutcome | None
) -> None:
    """After a turn that submitted a plan: show it and ask for the decision (again after a rejection)."""
    from lamina.cli._user_input import TerminalReader

    while outcome is not None and outcome.stop_reason == "plan_submitted":
        print_plan(agent, headline=False)  # the turn's own line said it was submitted
        try:
            if isinstance(reader, TerminalReader):
                choice, rest = await reader.key(PLAN_KEYS_QUESTION, "lacr"), ""
            else:
                choice, _, rest = (await reader.answer(PLAN_QUESTION)).strip().partition(" ")
        except (EOFError, KeyboardInterrupt):
            return
        decision = _DECISIONS.get(choice.lower(), choice.lower())
        if decision not in ("accept", "compact", "reject"):
            return  # later: /plan decides
        outcome = await plan_decision(agent, reader, view, state, decision, rest.strip())


async def plan_decision(
    agent: Agent, reader: LineReader, view: TurnView, state: ChatState, decision: str, arg: str
) -> TurnOutcome | None:
    """Carry out one decision on the plan; the outcome of the turn it ran, if any."""
    from lamina.cli._console import err, safe
    from lamina.cli._turns import drive
    from lamina.errors import LaminaError

    work: Coroutine[Any, Any, TurnOutcome | None]
    try:
        match decision:
            case "accept" | "compact":
                mode = await _run_mode(reader)
                if mode is None:
                    err.print("[dim]not accepted (/plan accept when you are ready)[/dim]")
                    return None
                work = agent.accept_plan(compact=decision == "compact", draft=arg or None, mode=mode)
            case "reject":
                feedback = arg or (await reader.answer("what should change? ")).strip()
                if not feedback:
                    err.print("[dim]not rejected: give the feedback the plan should follow[/dim]")
                    return None
                work = agent.reject_plan(feedback)
            case "cancel":
                agent.cancel_plan("cancelled by the user")
                return None
            case _:
                err.print(f"unknown plan decision {safe(repr(decision))}; use accept, compact, reject or cancel")
                return None
    except (LaminaError, EOFError, KeyboardInterrupt) as exc:
        err.print(f"[red]error:[/red] {safe(exc)}" if isinstance(exc, LaminaError) else "")
        return None
    outcome = await drive(agent, view, work)
    plan = agent.plan
    if plan is not None and plan.run_mode is not None and plan.dispatched and decision != "reject":
        err.print(f"[dim]the plan ran in {plan.run_mode} mode; mode {agent.engine.settings.mode} again[/dim]")
    if decision != "reject" and arg:
        state.draft = arg  # back in the input once the plan ran
    return outcome


async def _run_mode(reader: LineReader) -> str | None:
    """The mode the user chooses for carrying out the plan; None when they leave the question (Ctrl-C, Ctrl-D)."""
    from lamina.cli._console import err

    while True:
        try:
            key = await reader.key(RUN_QUESTION, "".join(_RUN_MODES))
        except (EOFError, KeyboardInterrupt):
            return None
        if key in _RUN_MODES:
            return _RUN_MODES[key]
        err.print("answer a (ask before each change) or e (execute without asking)")


def print_plan(agent: Agent, *, headline: bool = True) -> None:
    """`/plan`: the latest plan, its state (unless not `headline`), its file and its text (Markdown in a terminal)."""
    from lamina.cli._console import err, out, safe
    from lamina.cli._turn_view import plan_line

    plan = agent.plan
    if plan is None:
        err.print("[dim]no plan in this session yet (plan mode: /mode plan, then ask for one)[/dim]")
        return
    if headline:
        err.print(f"[magenta]◆ plan[/magenta] {safe(plan_line(plan))}")
    if plan.plan_path:
        err.print(f"[dim]{safe(plan.plan_path)}[/dim]")
    if out.is_terminal:
        from lamina.cli._live import SafeMarkdown

        out.print(SafeMarkdown(plan.text.rstrip()))
    else:
        out.print(safe(plan.text.rstrip()))
    if plan.draft_input:
        err.print(f"[dim]your draft kept with it: {safe(plan.draft_input)}[/dim]")
