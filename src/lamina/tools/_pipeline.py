"""The pre-tool-use pipeline: the one path every tool call takes, from raw input to result (I/O: via tools).

`ToolPipeline.execute(call_id, name, raw_input)` runs lookup, validation, path bounds, the
permission mode, the rules, protected paths and approval, in that order; the first that refuses ends the call with
an error result. Then the tool runs, the rules hear the outcome, images are stored and a long
result is offloaded. See docs/tools.md, "The pipeline".
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, assert_never

import msgspec

from lamina.attachments import AttachmentRef
from lamina.context import ToolSpec
from lamina.errors import UsageError
from lamina.session import ReadStamp
from lamina.tools._base import PermissionMode, Tool, ToolContext, ToolInputError, ToolOutput, within
from lamina.tools._offload import offload_result
from lamina.tools._protected import protected_question, protected_writes
from lamina.tools._rules import Allow, Ask, AskCallback, BoundCall, Deny, PermissionRequest, Rewrite, Rule

_INPUT_IN_QUESTION: Final = 400  # characters of the input quoted in an approval question


@dataclass(frozen=True, slots=True)
class ToolExecution:
    """The outcome of one tool call: what the model receives, and how the pipeline decided."""

    call_id: str
    name: str
    content: str
    """What the model receives: the tool's output, its preview when offloaded, or the refusal."""
    is_error: bool
    decision: Allow | Deny
    """`Allow()` if the tool ran; otherwise the `Deny` with its message and the stage that refused (`by`)."""
    input: Any
    """The final input after rewrites; None when the call never got a valid input."""
    full_output_path: Path | None = None
    """Where the whole result was saved, when it was too large for the context."""
    ends_turn: bool = False
    """The tool asked to end the turn after this batch of calls (`SubmitPlan`)."""
    attachments: tuple[AttachmentRef, ...] = ()
    """The images the tool returned, stored in the session's attachment store (log these, never bytes)."""
    read: ReadStamp | None = None
    """What a Read showed (file, hash, window): log it on the result (`ToolResult.read`)."""


class ToolPipeline:
    """Runs tool calls for one session through lookup, validation, bounds, mode, rules and approval."""

    def __init__(
        self,
        tools: Iterable[Tool[Any]],
        context: ToolContext,
        *,
        rules: Iterable[Rule] = (),
        ask: AskCallback | None = None,
    ) -> None:
        """Register `tools` (names must be unique) and `rules` (checked in this order).

        `ask` decides the calls that need the user's approval; without one, such calls are denied.

        Raises:
            UsageError: Two tools have the same name.
        """
        self._tools: dict[str, Tool[Any]] = {}
        for tool in tools:
            name = tool.spec.name
            if name in self._tools:
                raise UsageError(f"two tools are named {name!r}")
            self._tools[name] = tool
        self._rules: list[Rule] = list(rules)
        self.ask = ask
        """The approval callback; approval is the pipeline's last stage, so it lives here."""
        self.context = context
        """The session's context; replace it (e.g. `dataclasses.replace(ctx, mode=...)`) to switch modes.
        A call in flight keeps the context it started with."""

    @property
    def rules(self) -> tuple[Rule, ...]:
        return tuple(self._rules)

    def add_rule(self, rule: Rule) -> None:
        """Append `rule`: it is checked after the rules already there."""
        self._rules.append(rule)

    def specs(self) -> tuple[ToolSpec, ...]:
        """The tools' specs, in registration order, for the provider request."""
        return tuple(tool.spec for tool in self._tools.values())

    def tool(self, name: str) -> Tool[Any] | None:
        return self._tools.get(name)

    def bind(self, call_id: str, name: str, raw_input: Mapping[str, Any]) -> BoundCall | None:
        """The call as rules see it (input validated, paths resolved within the roots), or None.

        None where lookup, validation or the path bounds would refuse it. Runs nothing: for
        replaying logged calls.
        """
        tool = self._tools.get(name)
        if tool is None:
            return None
        try:
            input = tool.validate(raw_input)
        except ToolInputError:
            return None
        call = _bound(call_id, name, tool, input, self.context)
        return None if isinstance(call, Deny) else call

    async def execute(self, call_id: str, name: str, raw_input: Mapping[str, Any]) -> ToolExecution:
        """Run one tool call through every stage and return what the model receives.

        Never raises for anything the model sent (unknown tool, bad input, forbidden path): those
        are error results. Exceptions from rules or the `ask` callback (bugs) do propagate.
        """
        ctx = self.context
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(self._tools) or "none"
            return _refused(call_id, name, None, Deny(f"Unknown tool {name!r}. Available tools: {known}.", by="lookup"))
        try:
            input = tool.validate(raw_input)
        except ToolInputError as exc:
            return _refused(call_id, name, None, Deny(f"Invalid input for {name}: {exc}", by="validation"))
        except Exception as exc:  # a validator's slip over model input is still the model's error result
            said = f"{type(exc).__name__}: {exc}"
            return _refused(call_id, name, None, Deny(f"Invalid input for {name}: {said}", by="validation"))
        call = _bound(call_id, name, tool, input, ctx)
        if isinstance(call, Deny):
            return _refused(call_id, name, input, call)
        questions: list[tuple[str, str]] = []
        mode = self._mode_verdict(call, ctx)
        if isinstance(mode, Deny):
            return _refused(call_id, name, call.input, mode)
        if isinstance(mode, Ask):
            questions.append(("permission_mode", mode.question))
        for rule in self._rules:
            by = f"rule:{rule.name}"
            verdict = await rule.check(call)
            match verdict:
                case Allow():
                    pass
                case Deny(message=message):
                    return _refused(call_id, name, call.input, Deny(message, by=by))
                case Ask(question=question):
                    questions.append((by, question))
                case Rewrite(input=new_input):
                    new_input = _revalidate(tool, new_input, by)
                    rewritten = _bound(call_id, name, tool, new_input, ctx)
                    if isinstance(rewritten, Deny):
                        return _refused(call_id, name, new_input, rewritten)
                    call = rewritten
                case _:
                    assert_never(verdict)
        for asked_by, question, protected in _with_protected(call, questions):
            answer = await _approve(call, question, asked_by, self.ask, protected)
            if isinstance(answer, Deny):
                return _refused(call_id, name, call.input, answer)
        output = await _run(tool, call, _for_call(ctx, call, tuple(self._rules)))
        for rule in self._rules:
            await rule.after(call, output)
        content, images = await asyncio.to_thread(_keep_images, output, ctx)
        offloaded = await asyncio.to_thread(
            offload_result,
            content,
            call_id=call_id,
            data_dir=ctx.data_dir,
            policy=ctx.offload,
            estimator=ctx.estimator,
            files=ctx.files,
        )
        if offloaded is None:
            return _ran(call, output, content, images, None, read=output.read if content == output.content else None)
        return _ran(call, output, offloaded.preview, images, offloaded.path)

    def _mode_verdict(self, call: BoundCall, ctx: ToolContext) -> Allow | Deny | Ask:
        if call.tool.read_only:
            return Allow()
        match ctx.mode:
            case PermissionMode.EXECUTE:
                return Allow()
            case PermissionMode.ASK:
                return Ask(f"Allow {call.name} {_quote(call.input)}?")
            case PermissionMode.PLAN:
                if call.paths:  # path bounds already kept them inside the plans folder
                    return Allow()
                return Deny(
                    f"{call.name} is not available in plan mode, which writes only files in the plans folder. "
                    "Investigate with the read-only tools, write the plan there, then submit it with SubmitPlan.",
                    by="permission_mode",
                )
            case PermissionMode.EXPLORE:
                readers = ", ".join(name for name, tool in self._tools.items() if tool.read_only) or "none"
                return Deny(
                    f"{call.name} is not available in explore mode, which runs only read-only tools ({readers}). "
                    "Describe the change you would make instead, or ask the user to switch to ask or execute mode.",
                    by="permission_mode",
                )
            case _:
                assert_never(ctx.mode)


def _bound(call_id: str, name: str, tool: Tool[Any], input: Any, ctx: ToolContext) -> BoundCall | Deny:
    """The call with its paths resolved, or a Deny if one lies outside the roots the tool may use."""
    roots = ctx.readable_roots if tool.read_only else ctx.writable_roots
    resolved: list[Path] = []
    named: list[Path] = []
    for raw in tool.paths(input):
        given = ctx.path(raw)
        named.append(Path(os.path.normpath(given)))
        try:
            real = given.resolve()
        except (OSError, RuntimeError, ValueError) as exc:  # symlink loop, NUL byte, …
            return Deny(f"Cannot use the path {str(raw)!r}: {exc}", by="path_bounds")
        if not within(real, roots):
            via = "" if os.path.normpath(given) == str(real) else f" (it resolves to {real})"
            action = "read" if tool.read_only else "change"
            return Deny(
                f"{str(raw)!r} is outside the folders this session may {action}{via}. "
                f"Allowed: {', '.join(str(root) for root in roots)}.",
                by="path_bounds",
            )
        resolved.append(real)
    return BoundCall(
        call_id=call_id, name=name, input=input, tool=tool, paths=tuple(resolved), context=ctx, named=tuple(named)
    )


def _with_protected(call: BoundCall, questions: list[tuple[str, str]]) -> list[tuple[str, str, tuple[Path, ...]]]:
    """The questions to put, the first naming the protected paths the call writes (in every mode).

    That question stands for ask mode's own: the user approves the call once, knowing what it writes.
    """
    protected = protected_writes(call)
    if not protected:
        return [(asked_by, question, ()) for asked_by, question in questions]
    others = [(asked_by, question, ()) for asked_by, question in questions if asked_by != "permission_mode"]
    return [("protected_path", protected_question(call, protected), protected), *others]


def _revalidate(tool: Tool[Any], new_input: object, by: str) -> Any:
    if not isinstance(new_input, Mapping):
        return new_input  # already typed by the rule
    try:
        return tool.validate(new_input)
    except ToolInputError as exc:
        raise UsageError(f"{by} rewrote the input of {tool.spec.name} to an invalid one: {exc}") from None


async def _approve(
    call: BoundCall, question: str, asked_by: str, ask: AskCallback | None, protected: tuple[Path, ...]
) -> Allow | Deny:
    if ask is None:
        return Deny(
            f"{call.name} needs the user's approval ({question}), and no one can approve calls in this session.",
            by="user",
        )
    answer = await ask(PermissionRequest(call=call, question=question, asked_by=asked_by, protected=protected))
    if isinstance(answer, Deny):
        return Deny(answer.message or f"The user declined this {call.name} call.", by="user")
    return Allow()


def _keep_images(output: ToolOutput, ctx: ToolContext) -> tuple[str, tuple[AttachmentRef, ...]]:
    """The result's text and the references of its images once stored.

    Each image refused (not an image, corrupt, a bomb, or no store to keep it in) is a note at the
    end of the text instead.
    """
    if not output.images:
        return output.content, ()
    if ctx.attachments is None:
        refs: tuple[AttachmentRef, ...] = ()
        refused = [f"attachment {i.name!r}: no attachment store here to keep it in" for i in output.images]
    else:
        refs, errors = ctx.attachments.add_images(output.images)
        refused = [str(e) for e in errors]
    notes = [f"[image not shown: {reason}]" for reason in refused]
    return "\n".join([output.content, *notes]) if notes else output.content, refs


def _for_call(ctx: ToolContext, call: BoundCall, rules: tuple[Rule, ...]) -> ToolContext:
    """The context a call runs in: the paths checked (refused if they now lead elsewhere), and what rules hide."""

    def hidden(path: Path) -> bool:
        return any(rule.hides(call, path) for rule in rules)

    return dataclasses.replace(ctx, checked_paths=call.paths, hidden=hidden if rules else None)


async def _run(tool: Tool[Any], call: BoundCall, ctx: ToolContext) -> ToolOutput:
    if ctx.progress is not None:
        ctx.progress("")  # it runs now, any approval behind it: a front end starts its timer
    try:
        return await tool.run(call.input, ctx)
    except Exception as exc:  # a tool's bug must still leave a result for the call
        return ToolOutput(f"{call.name} failed: {type(exc).__name__}: {exc}", is_error=True)


def _ran(
    call: BoundCall,
    output: ToolOutput,
    content: str,
    images: tuple[AttachmentRef, ...],
    full_output_path: Path | None,
    *,
    read: ReadStamp | None = None,
) -> ToolExecution:
    """The execution of a call that ran: `content` is what the model receives (`read` only when it is the output)."""
    return ToolExecution(
        call_id=call.call_id,
        name=call.name,
        content=content,
        is_error=output.is_error,
        decision=Allow(),
        input=call.input,
        full_output_path=full_output_path,
        ends_turn=output.ends_turn and not output.is_error,
        attachments=images,
        read=read,
    )


def _refused(call_id: str, name: str, input: Any, deny: Deny) -> ToolExecution:
    return ToolExecution(call_id=call_id, name=name, content=deny.message, is_error=True, decision=deny, input=input)


def _quote(input: Any) -> str:
    try:
        text = msgspec.json.encode(input).decode()
    except (TypeError, msgspec.EncodeError):
        text = repr(input)
    return text if len(text) <= _INPUT_IN_QUESTION else text[:_INPUT_IN_QUESTION] + "…"
