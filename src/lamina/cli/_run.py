"""`lamina run "TEXT"`: one turn, non-interactively, for scripts and CI (I/O).

The answer (the model's final text) goes to stdout (neutralised when stdout is a terminal, as
written when it is a pipe); tool lines and warnings to stderr. `--json`
prints one JSON document at the end; `--stream-json` prints one JSON object per line as the turn
runs (`text`, `tool_started`, `tool_finished`, `retry`, `compaction`, `warning`) and a final
`result` line. No one can answer an approval question, so in ask mode calls that need one are
refused (the model is told). Exit code 0 on success, 1 on any failure, 130 when interrupted.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lamina.cli._chat import ContinueOption, CustomPresetOption, ModelOption, ModeOption, PresetOption

if TYPE_CHECKING:
    from lamina.agent import AgentEvent, TurnOutcome
    from lamina.engine import CompactionEvent


def run(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="The message; `-` reads it from stdin.", show_default=False)],
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
) -> None:
    """Run one turn without a prompt and print the answer (or JSON); exit non-zero on failure."""
    import asyncio
    import sys

    from lamina.cli._config import settings_or_abort
    from lamina.cli._console import abort
    from lamina.cli._session import latest_session
    from lamina.cli._store import store_or_abort
    from lamina.errors import LaminaError

    if as_json and stream_json:
        abort("use --json or --stream-json, not both")
    if resume is not None and continue_:
        abort("use --resume ID or --continue, not both")
    if resume == "":
        abort("--resume needs a session id here (see `lamina sessions list`)")
    if text == "-":
        text = sys.stdin.read()
    if not text.strip():
        abort("empty message: give the text as an argument, or `-` and the text on stdin")
    workspace = Path.cwd()
    store = store_or_abort(ctx)
    settings = settings_or_abort(workspace, model=model, mode=mode, preset=preset, custom_preset=custom_preset)
    session_id = resume
    emit = _stream_line if stream_json else None
    try:
        if continue_:
            session_id = latest_session(store, workspace)
        outcome, session = asyncio.run(
            _run(store, settings, workspace, session_id, text.rstrip("\n"), emit, tuple(skill or ()))
        )
    except LaminaError as exc:
        if stream_json:
            _stream_line({"type": "error", "message": str(exc)})
        abort(str(exc))
    except KeyboardInterrupt:
        abort("interrupted", code=130)
    except Exception as exc:  # a bug or an SDK failure not mapped to LaminaError: still one line, non-zero
        abort(f"{type(exc).__name__}: {exc}")
    finally:
        store.close()  # a database store's connections; nothing for a folder
    result = _result(outcome, session, settings.model)
    if stream_json:
        _stream_line({"type": "result", **result})
    elif as_json:
        from lamina.cli._console import print_json

        print_json(result)
    else:
        from lamina.defang import show_controls

        answer = outcome.text.rstrip("\n")
        # a terminal gets no escape sequences from the model; a pipe gets the text as it was written
        sys.stdout.write((show_controls(answer) if sys.stdout.isatty() else answer) + "\n")


async def _run(
    store: Any, settings: Any, workspace: Path, session_id: str | None, text: str, emit: Any, skills: tuple[str, ...]
) -> tuple[TurnOutcome, str]:
    from lamina.cli._session import make_provider, model_name, session_agent
    from lamina.cli._view import TurnView

    provider = make_provider(settings.model, settings)
    view = TurnView(model=model_name(settings.model), spinner=False)

    def on_event(event: AgentEvent) -> None:
        if emit is not None:
            line = _event_json(event)
            if line is not None:
                emit(line)
            return
        from lamina.providers import TextDelta

        if not isinstance(event, TextDelta):  # text mode prints the final answer only
            view(event)

    def on_compaction(event: CompactionEvent) -> None:
        if emit is not None:
            emit({"type": "compaction", "kind": event.kind, "trigger": event.trigger, "message": event.message})
        else:
            view.compaction(event)

    async with session_agent(
        store,
        provider,
        settings,
        workspace=workspace,
        session_id=session_id,
        ask=None,
        interactive=False,
        on_event=on_event,
        on_compaction=on_compaction,
    ) as agent:
        outcome = await agent.run_turn(text, skills=skills)
        return outcome, agent.engine.session.id


def _event_json(event: AgentEvent) -> dict[str, Any] | None:
    from lamina.agent import ModelCallFinished, SkillWarning, ToolFinished, ToolStarted
    from lamina.cli._approval import call_fields
    from lamina.providers import RetryNotice, TextDelta

    match event:
        case TextDelta(text=text):
            return {"type": "text", "text": text}
        case ToolStarted(call_id=call_id, name=name, input=args):
            return {"type": "tool_started", "call_id": call_id, "name": name, "input": call_fields(args)}
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
        case ModelCallFinished(index=index, usage=usage, stop_reason=stop_reason):
            return {"type": "model_call", "index": index, "usage": usage, "stop_reason": stop_reason}
    return None


def _result(outcome: TurnOutcome, session_id: str, spec: str) -> dict[str, Any]:
    from lamina.cli._session import model_name
    from lamina.reports import cost_of

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
