"""`lamina run "TEXT"`: one turn, non-interactively, for scripts and CI (I/O).

The answer (the model's final text) goes to stdout (neutralised when stdout is a terminal, as
written when it is a pipe); tool lines and warnings to stderr. `--json` prints one JSON document at
the end, `--stream-json` one JSON object per event (docs/cli.md lists them); a failure prints JSON
too, with the exit codes docs/cli.md gives. Nobody can answer an approval question: in ask mode
the config's allow rules answer as in chat, and a call none covers is refused (the model is told);
`--accept-plan`/`--reject-plan` decide a submitted plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, NoReturn

import typer

from lamina.cli._chat import (
    AdoptOption,
    ContinueOption,
    CustomPresetOption,
    EffortOption,
    MaxOutputOption,
    ModelOption,
    ModeOption,
    PresetOption,
    ReasoningSummaryOption,
    ThinkingOption,
    TrustOption,
)
from lamina.errors import LaminaError, UsageError

if TYPE_CHECKING:
    from lamina.agent import Agent, AgentEvent, TurnOutcome
    from lamina.cli._config import Settings
    from lamina.cli._permissions import Permissions
    from lamina.cli._reasoning_settings import ReasoningTable
    from lamina.engine import CompactionEvent
    from lamina.session import SessionStore
    from lamina.tools import Allow, Deny, PermissionRequest


def run(
    ctx: typer.Context,
    text: Annotated[
        str | None,
        typer.Argument(
            help="The message; `-` reads it from stdin (optional with --accept-plan or --reject-plan).",
            show_default=False,
        ),
    ] = None,
    model: ModelOption = None,
    mode: ModeOption = None,
    resume: Annotated[str | None, typer.Option("--resume", help="Continue this session id.")] = None,
    continue_: ContinueOption = False,
    preset: PresetOption = None,
    custom_preset: CustomPresetOption = None,
    skill: Annotated[
        list[str] | None,
        typer.Option(
            "--skill",
            help="A skill the task uses (repeatable): read first, as a [skill:NAME] mention; its allowed_tools apply.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document with the result.")] = False,
    stream_json: Annotated[
        bool, typer.Option("--stream-json", help="Print one JSON object per event, one per line.")
    ] = False,
    accept_plan: Annotated[
        bool,
        typer.Option("--accept-plan", help="Accept the plan the turn (or the resumed session) submitted, and run it."),
    ] = False,
    reject_plan: Annotated[
        str | None,
        typer.Option(
            "--reject-plan",
            help="Reject the submitted plan with this feedback: the model plans again.",
            show_default=False,
        ),
    ] = None,
    trust: TrustOption = False,
    adopt_bundle_settings: AdoptOption = False,
    thinking: ThinkingOption = None,
    effort: EffortOption = None,
    reasoning_summary: ReasoningSummaryOption = None,
    max_output_tokens: MaxOutputOption = None,
) -> None:
    """Run one turn without a prompt and print the answer (or JSON); exit non-zero on failure."""
    import asyncio

    from lamina.cli._console import err, safe
    from lamina.cli._reasoning_settings import flags_table
    from lamina.cli._session import latest_session, settings_for

    known = _Known(as_json=as_json, stream_json=stream_json and not as_json, model=model, mode=mode)
    try:
        _check_usage(known, resume, continue_, stream_json)
        reasoning = flags_table(thinking, effort, reasoning_summary)
        decision = _decision(accept_plan, reject_plan, text, resumed=resume is not None or continue_)
        message = None if text is None else _message(text)
        workspace = Path.cwd()
        store = _open_store(ctx)
        try:
            settings = _settings(
                workspace, known, preset, custom_preset, trust=trust, reasoning=reasoning, output=max_output_tokens
            )
            session_id = latest_session(store, workspace) if continue_ else resume
            if continue_ and session_id is None:
                err.print(f"[dim]--continue: no earlier session in {safe(workspace)}: starting a new one[/dim]")
            # a resumed session's model, mode and preset (an imported one's bundle's only when adopted)
            settings = settings_for(store, session_id, settings, adopt_bundle=adopt_bundle_settings)
            known.model, known.mode = settings.model, settings.mode
            turn = _Turn(message, tuple(skill or ()), decision)
            outcome = asyncio.run(_run(store, settings, workspace, session_id, turn, known))
        finally:
            store.close()  # a database store's connections; nothing for a folder
    except LaminaError as exc:
        _fail(known, _kind(exc), str(exc), None)
    except KeyboardInterrupt:
        _fail(known, "interrupted", "interrupted", 130)
    except typer.Exit:  # a helper that already printed its one error line
        raise
    except Exception as exc:  # a bug or an SDK failure not mapped to LaminaError: still one line, non-zero
        _fail(known, "internal", f"{type(exc).__name__}: {exc}", 1)
    _print_result(known, outcome)


class _Unattended:
    """The `ask` callback of a run: the config's allow rules answer (as in chat); any other call is refused."""

    def __init__(self, permissions: Permissions, known: _Known) -> None:
        self._permissions = permissions
        self._known = known

    async def __call__(self, request: PermissionRequest) -> Allow | Deny:
        from lamina.cli._approval import allowed_by, print_allowed
        from lamina.tools import Allow, Deny

        call = request.call
        rules = () if request.protected else allowed_by(self._permissions, call)  # no rule answers for those
        if not rules:
            return Deny(
                f"{call.name} needs the user's approval ({request.question}), "
                "and no one can approve calls in this session."
            )
        named = [{"rule": rule.text, "origin": rule.origin} for rule in rules]
        record = {"call_id": call.call_id, "name": call.name, "rules": named}
        self._known.allowed.append(record)
        self._known.emit({"type": "tool_allowed", **record})
        if not (self._known.as_json or self._known.stream_json):
            print_allowed(call.name, rules)
        return Allow()


@dataclass
class _Known:
    """What the run knows so far, for the JSON a failure prints: filled in as it gets there."""

    as_json: bool
    stream_json: bool
    model: str | None = None
    mode: str | None = None
    session_id: str | None = None
    allowed: list[dict[str, Any]] = field(default_factory=list)
    """The calls allow rules answered for, as `--json` lists them (`_Unattended`)."""
    trust: dict[str, object] = field(default_factory=lambda: {"trusted": False, "not_applied": []})
    """The workspace's trust, as `--json` gives it: whether trusted, and what an untrusted one did not configure."""

    def emit(self, data: dict[str, Any]) -> None:
        """Print one `--stream-json` event (nothing otherwise)."""
        if self.stream_json:
            _stream_line(data)


_MODES: Final = ("explore", "plan", "ask", "execute")  # PermissionMode's values (a test holds them equal)


@dataclass(frozen=True)
class _PlanDecision:
    """`--accept-plan` (feedback None) or `--reject-plan TEXT`."""

    feedback: str | None = None


@dataclass(frozen=True)
class _Turn:
    """What the run sends: the message (None: only decide the waiting plan), skills, the plan decision."""

    message: str | None
    skills: tuple[str, ...]
    decision: _PlanDecision | None


def _decision(accept: bool, reject: str | None, text: str | None, *, resumed: bool) -> _PlanDecision | None:
    """The plan decision the options give.

    Raises:
        UsageError: Both given, empty feedback, or neither a message nor a decision of a resumed session's plan.
    """
    if accept and reject is not None:
        raise UsageError("use --accept-plan or --reject-plan, not both")
    if reject is not None and not reject.strip():
        raise UsageError("--reject-plan needs the feedback the model plans again with")
    decision = _PlanDecision(reject) if reject is not None else _PlanDecision() if accept else None
    if text is None and decision is None:
        raise UsageError("missing message: give the text as an argument, or `-` and the text on stdin")
    if text is None and not resumed:
        raise UsageError(
            "without a message, --accept-plan and --reject-plan decide a resumed session's plan:"
            " add --resume ID or --continue"
        )
    return decision


def _check_usage(known: _Known, resume: str | None, continue_: bool, stream_json: bool) -> None:
    """Raise `UsageError` for options that cannot go together or a mode that is none.

    Raises:
        UsageError: `--json` with `--stream-json`, `--resume` with `--continue`, an empty `--resume`, a bad `--mode`.
    """
    if known.as_json and stream_json:
        raise UsageError("use --json or --stream-json, not both")
    if resume is not None and continue_:
        raise UsageError("use --resume ID or --continue, not both")
    if resume == "":
        raise UsageError("--resume needs a session id here (see `lamina sessions list`)")
    if known.mode is not None and known.mode not in _MODES:
        raise UsageError(f"--mode {known.mode}: not a mode; use one of {', '.join(_MODES)}")


def _message(text: str) -> str:
    """The message: the argument, or stdin for `-`, without its trailing newlines.

    Raises:
        UsageError: The message is empty or only whitespace.
    """
    import sys

    if text == "-":
        text = sys.stdin.read()
    if not text.strip():
        raise UsageError("empty message: give the text as an argument, or `-` and the text on stdin")
    return text.rstrip("\n")


def _open_store(ctx: typer.Context) -> SessionStore:
    from lamina.cli._store_commands import open_named_store

    return open_named_store((ctx.find_root().obj or {}).get("store"))


def _settings(
    workspace: Path,
    known: _Known,
    preset: str | None,
    custom_preset: Path | None,
    *,
    trust: bool,
    reasoning: ReasoningTable | None,
    output: int | None = None,
) -> Settings:
    """The effective settings (`trust`: `--trust`, else the recorded trust; `reasoning`, `output`: the flags').

    `known` learns the model, the mode and the trust.

    An untrusted workspace that would configure something gets one line on stderr saying what
    was not applied (and `known.trust` lists it for the JSON).

    Raises:
        UsageError: A config file or the trust file cannot be used, or the mode it gives is none.
    """
    from lamina.cli._config import load_settings
    from lamina.cli._console import err, safe
    from lamina.cli._trust_commands import untrusted_config
    from lamina.workspace import WorkspaceTrust, workspace_trust

    if custom_preset is not None and preset is None:
        preset = "custom"
    settings = load_settings(
        workspace,
        trust=WorkspaceTrust.TRUSTED if trust else workspace_trust(workspace),
        reasoning=reasoning,
        model=known.model,
        mode=known.mode,
        preset=preset,
        preset_file=custom_preset,
        max_output_tokens=output,
    )
    known.model, known.mode = settings.model, settings.mode
    known.trust = {"trusted": settings.trust.trusted, "not_applied": []}
    untrusted = untrusted_config(workspace, settings)
    if untrusted is not None:
        known.trust = untrusted.json()
        err.print(f"[yellow]{safe(untrusted.notice())}[/yellow]")
    if settings.mode not in _MODES:
        raise UsageError(f"mode {settings.mode} (from the config): not a mode; use one of {', '.join(_MODES)}")
    return settings


def _kind(error: LaminaError) -> str:
    """The `kind` of an error in the JSON: usage, session, provider or error (as the exit codes group them)."""
    from lamina.errors import ProviderError, SessionError

    if isinstance(error, UsageError):
        return "usage"
    if isinstance(error, SessionError):
        return "session"
    if isinstance(error, ProviderError):
        return "provider"
    return "error"


def _fail(known: _Known, kind: str, message: str, code: int | None) -> NoReturn:
    """End the run: the JSON error (for `--json` or `--stream-json`), then one `error:` line and the exit code."""
    from lamina.cli._console import abort, print_json

    error = {"error": {"kind": kind, "message": message}, "session_id": known.session_id, "model": known.model}
    if known.as_json:
        print_json({**error, "mode": known.mode, "trust": known.trust})
    known.emit({"type": "error", "kind": kind, "message": message, "session_id": known.session_id})
    abort(message, code=code)


def _print_result(known: _Known, outcome: TurnOutcome) -> None:
    import sys

    result = {
        **_result(outcome, known.session_id or "", known.model or ""),
        "allowed": known.allowed,
        "trust": known.trust,
    }
    if known.stream_json:
        _stream_line({"type": "result", **result})
    elif known.as_json:
        from lamina.cli._console import print_json

        print_json(result)
    else:
        from lamina.defang import show_controls

        answer = outcome.text.rstrip("\n")
        # a terminal gets no escape sequences from the model; a pipe gets the text as it was written
        sys.stdout.write((show_controls(answer) if sys.stdout.isatty() else answer) + "\n")


async def _run(
    store: SessionStore,
    settings: Settings,
    workspace: Path,
    session_id: str | None,
    turn: _Turn,
    known: _Known,
) -> TurnOutcome:
    from lamina.cli._session import discover_window, make_provider, model_name, session_agent
    from lamina.cli._turn_view import TurnView

    provider = make_provider(settings.model, settings)
    view = TurnView(model=model_name(settings.model), spinner=False)

    def on_event(event: AgentEvent) -> None:
        if known.stream_json:
            line = _event_json(event)
            if line is not None:
                _stream_line(line)
            return
        from lamina.providers import TextDelta

        if not isinstance(event, TextDelta):  # text mode prints the final answer only
            view(event)

    def on_compaction(event: CompactionEvent) -> None:
        if known.stream_json:
            _stream_line({"type": "compaction", "kind": event.kind, "trigger": event.trigger, "message": event.message})
        else:
            view.compaction(event)

    async with session_agent(
        store,
        provider,
        settings,
        workspace=workspace,
        session_id=session_id,
        ask=_Unattended(settings.permissions, known),
        interactive=False,
        on_event=on_event,
        on_compaction=on_compaction,
    ) as agent:
        known.session_id, known.mode = agent.engine.session.id, agent.engine.settings.mode
        known.emit(
            {
                "type": "session",
                "session_id": known.session_id,
                "model": settings.model,
                "mode": known.mode,
                "trust": known.trust,
            }
        )
        await discover_window(agent)
        if turn.message is not None:
            outcome = await agent.run_turn(turn.message, skills=turn.skills)
            if turn.decision is None or outcome.stop_reason != "plan_submitted":
                return outcome
        assert turn.decision is not None  # `_decision` holds: no message, a decision
        return await _decide(agent, turn.decision)


async def _decide(agent: Agent, decision: _PlanDecision) -> TurnOutcome:
    """Accept (and run) or reject the plan that waits for a decision.

    Raises:
        PlanTransitionError: No plan waits for one.
        LaminaRuntimeError: The accepted plan was not carried out.
    """
    from lamina.errors import LaminaRuntimeError

    if decision.feedback is not None:
        return await agent.reject_plan(decision.feedback)
    outcome = await agent.accept_plan()
    if outcome is None:
        plan = agent.plan
        raise LaminaRuntimeError(f"the plan was accepted but not carried out ({plan.state if plan else 'no plan'})")
    return outcome


def _event_json(event: AgentEvent) -> dict[str, Any] | None:
    from lamina.agent import (
        BackgroundCompaction,
        ModelCallFinished,
        PlanUpdate,
        SkillWarning,
        Thinking,
        ToolFinished,
        ToolProgress,
        ToolStarted,
    )
    from lamina.cli._approval import call_fields
    from lamina.providers import ReasoningDelta, RetryNotice, TextDelta

    match event:
        case TextDelta(text=text):
            return {"type": "text", "text": text}
        case ReasoningDelta(text=text):
            return {"type": "thinking_delta", "text": text}
        case Thinking(index=index, blocks=blocks, tokens=tokens):
            shown = [{"provider": b.provider, "kind": b.kind, "text": b.text or "\n\n".join(b.summary)} for b in blocks]
            return {"type": "thinking", "index": index, "text": event.text, "blocks": shown, "tokens": tokens}
        case ToolStarted(call_id=call_id, name=name, input=args):
            return {"type": "tool_started", "call_id": call_id, "name": name, "input": call_fields(args)}
        case ToolProgress(call_id=call_id, name=name, output=output) if output:  # "" (it started) is not sent
            return {"type": "tool_progress", "call_id": call_id, "name": name, "output": output}
        case ToolFinished(call_id=call_id, name=name, is_error=is_error, content=content, full_output_path=path):
            return {
                "type": "tool_finished",
                "call_id": call_id,
                "name": name,
                "is_error": is_error,
                "content": content,
                "full_output_path": path,
            }
        case RetryNotice(attempt=attempt, delay=delay, error=error):
            return {"type": "retry", "attempt": attempt, "delay": delay, "error": str(error)}
        case SkillWarning(message=message):
            return {"type": "warning", "message": message}
        case BackgroundCompaction(kind=kind, trigger=trigger, message=message):
            return {"type": "background_compaction", "kind": kind, "trigger": trigger, "message": message}
        case PlanUpdate(plan=plan):
            return {
                "type": "plan",
                "plan_id": plan.plan_id,
                "state": plan.state,
                "title": plan.title,
                "text": plan.text,
            }
        case ModelCallFinished(index=index, usage=usage, stop_reason=stop_reason):
            return {"type": "model_call", "index": index, "usage": usage, "stop_reason": stop_reason}
    return None


def _result(outcome: TurnOutcome, session_id: str, spec: str) -> dict[str, Any]:
    from lamina.cli._session import model_name
    from lamina.pricing import cost_of

    return {
        "session_id": session_id,
        "model": spec,
        "text": outcome.text,
        "stop_reason": outcome.stop_reason,
        "usage": outcome.usage,
        "model_calls": len(outcome.usages),
        "tools_run": list(outcome.tools_run),
        "cost_usd": cost_of(model_name(spec), outcome.usage),
    }


def _stream_line(data: dict[str, Any]) -> None:
    import sys

    import msgspec

    sys.stdout.write(msgspec.json.encode(data).decode() + "\n")
    sys.stdout.flush()
