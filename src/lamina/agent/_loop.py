"""The agent loop: prepare a turn, render, send, stream, run tools, commit.

The loop knows nothing of JSONL or of any provider's wire format: it talks to a
`ContextEngine` (turn context, log, outbox), a `Provider` (rendered request in, events out) and a
`ToolExecutor` (the pre-tool-use pipeline). Async first; `run_turn_sync` wraps it for scripts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self, TypeAlias

from lamina.agent._activation import Activation, SkillCatalogue, SkillWarning, nearest_context_paths
from lamina.agent._recovery import DEFAULT_RECOVERY_TOKENS, RECOVERY_KIND, recovery_text
from lamina.attachments import AttachmentInput, MediaSupport
from lamina.compaction import (
    DEFAULT_KEEP_TOKENS,
    DEFAULT_PRUNE,
    DEFAULT_RESERVE,
    DEFAULT_USER_LANE_TOKENS,
    ProviderSummariser,
    PrunePolicy,
    Summariser,
    should_compact,
)
from lamina.engine import CompactionOutcome, ContextEngine, provider_session_in_view
from lamina.errors import ContextOverflowError, ProviderSessionLostError, TooManyModelCallsError, UsageError
from lamina.messages import INTERRUPTED_RESULT
from lamina.parts import Part
from lamina.placement import SdkManagedPrompt, SdkManagedTarget
from lamina.plan import Plan, continuation_message, execution_message, next_step, rejection_message
from lamina.prompt import Preset
from lamina.providers import (
    Completed,
    Provider,
    ProviderCompacted,
    ProviderSessionChanged,
    RetryNotice,
    RetryPolicy,
    TextDelta,
    ToolCallRequest,
    stream_with_retry,
)
from lamina.session import AssistantMessage, Branch, LogEntry, SessionLog, SessionStore, ToolCall, ToolResult, Usage
from lamina.session._entries import BRIDGE_KINDS, ProviderSession
from lamina.sources import SourceConnections, guide_path
from lamina.tools import (
    AskCallback,
    NearestContextFileRule,
    OffloadPolicy,
    PermissionMode,
    PrerequisiteManager,
    Requirement,
    Rule,
    Tool,
    ToolContext,
    ToolOutput,
    ToolPipeline,
    default_tools,
    mini_tools,
)
from lamina.tools import ToolCall as RuleCall
from lamina.turn import TurnContext
from lamina.workspace import PROJECT_FILE, ContextFileFinder, WorkspaceContext, detect_platform, load_preset

if TYPE_CHECKING:
    from lamina.budget import BudgetReport

__all__ = [
    "DEFAULT_PLAN_COMPACTION_TIMEOUT",
    "Agent",
    "AgentEvent",
    "ModelCallFinished",
    "PlanUpdate",
    "ToolFinished",
    "ToolStarted",
    "TurnOutcome",
    "open_agent",
    "session_engine",
]

_LANE_SHARE = 4
"""The user's words lane takes at most 1/4 of the context window, whatever its configured budget."""
DEFAULT_PLAN_COMPACTION_TIMEOUT = 300.0
"""Seconds an "Accept & Compact" compaction may take before the plan is marked failed (the summary
request has its own, shorter timeout and falls back to the deterministic summary)."""


@dataclass(frozen=True, slots=True)
class ToolStarted:
    call_id: str
    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolFinished:
    call_id: str
    name: str
    is_error: bool
    content: str
    full_output_path: str | None


@dataclass(frozen=True, slots=True)
class ModelCallFinished:
    """One model request of the turn completed."""

    index: int
    usage: Usage
    stop_reason: str


@dataclass(frozen=True, slots=True)
class PlanUpdate:
    """The session's plan moved to another state (submitted, accepted, compacted, dispatched, done, ...)."""

    plan: Plan


AgentEvent: TypeAlias = (
    TextDelta | ToolStarted | ToolFinished | ModelCallFinished | SkillWarning | RetryNotice | PlanUpdate
)
"""What the loop reports while a turn runs (`RetryNotice`: a failed request is sent again after a wait)."""


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """What a turn did: its final text, every model call's usage, the tools it ran."""

    turn: TurnContext
    text: str
    usages: tuple[Usage, ...]
    tools_run: tuple[str, ...]
    stop_reason: str

    @property
    def usage(self) -> Usage:
        return Usage(
            input=sum(u.input for u in self.usages),
            output=sum(u.output for u in self.usages),
            cache_read=sum(u.cache_read for u in self.usages),
            cache_write=sum(u.cache_write for u in self.usages),
        )


@dataclass
class Agent:
    """Drives turns of one session through a provider and a tool pipeline.

    A context manager, also `async with`: `with open_agent(...) as agent:` closes it on the way out
    (`close`). The agent closes its engine only when it owns it (`owns_engine=True`: `open_agent`'s
    agent owns the engine and the session it opened); an engine the caller passed in, and the
    store, the provider and the sources, stay the caller's to close.
    """

    engine: ContextEngine
    provider: Provider
    tools: ToolPipeline
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_model_calls: int = 50
    summariser: Summariser | None = None
    """Writes compaction summaries; default: the session's own provider, deterministic on failure."""
    compaction_reserve: int = DEFAULT_RESERVE
    """Compact when the context estimate is above the context window minus this many tokens."""
    keep_tokens: int = DEFAULT_KEEP_TOKENS
    """Tokens of recent history a compaction keeps verbatim."""
    user_lane_tokens: int = DEFAULT_USER_LANE_TOKENS
    """Tokens of the user's own earlier messages shown verbatim after a compaction summary (newest first);
    at most a quarter of the model's context window."""
    activation: Activation | None = None
    """Skills and sources: mentions in the user's text become required reads."""
    on_event: Callable[[AgentEvent], None] | None = None
    plan_compaction_timeout: float = DEFAULT_PLAN_COMPACTION_TIMEOUT
    """Seconds an "Accept & Compact" compaction may take; beyond, the plan fails and can be accepted again."""
    recovery_tokens: int = DEFAULT_RECOVERY_TOKENS
    """Budget of the recovery block a fresh provider session gets when the old one cannot be resumed."""
    owns_engine: bool = False
    """Whether `close` closes `engine` too (True for the agent `open_agent` returns)."""
    _session_update: ProviderSession | None = field(default=None, init=False, repr=False)
    _closed: bool = field(default=False, init=False, repr=False)

    @property
    def session(self) -> SessionLog:
        """The session log the agent's turns are recorded in (the engine's)."""
        return self.engine.session

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._closed

    def close(self) -> None:
        """Let go of the agent; using it afterwards raises `UsageError`. Safe to call twice.

        Closes the engine (and, through it, the session it owns) when the agent owns it
        (`owns_engine`); otherwise the engine stays open for its owner.
        """
        if self._closed:
            return
        self._closed = True
        if self.owns_engine:
            self.engine.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError(f"the agent of session {self.engine.session.id} is closed; open the session again")

    def _emit(self, event: AgentEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)

    async def run_turn(
        self, user_text: str, attachments: Sequence[AttachmentInput] = (), *, skills: Sequence[str] = ()
    ) -> TurnOutcome:
        """Run one user turn to the end: model calls and tool calls until the model stops.

        `skills` names skills the turn's task uses (a task or sub-agent spec): each becomes a
        required read, exactly as a `[skill:name]` mention in `user_text` does, and the turn's
        active task, whose `allowed_tools` the pipeline enforces (see `lamina.activation`).

        `attachments` are files (paths relative to the workspace, or bytes) sent with the message:
        checked, converted and stored first, shown as the provider's model can take them.
        Cancelling the task leaves a well-formed log: every tool call gets a result (a synthetic
        "interrupted" one if needed) and the next turn carries a one-shot interruption reminder.

        A plan accepted but not yet dispatched (its process stopped) is carried out first: it was
        approved before this message was written (see `resume_plan`).

        Raises:
            AttachmentError: an attached file cannot be used; nothing was sent or logged.
        """
        self._check_open()
        if next_step(self.engine.plan) is not None:
            await self.resume_plan()
        outcome = await self._run_turn(user_text, attachments, skills=skills)
        plan = self.engine.plan
        if plan is not None and plan.state == "dispatched" and plan.answered:  # its turn died; the session went on
            self._finish_plan(plan.plan_id, "done", "the session went on after its execution was interrupted")
        return outcome

    async def _run_turn(
        self,
        user_text: str,
        attachments: Sequence[AttachmentInput] = (),
        *,
        skills: Sequence[str] = (),
        durable_message: bool = False,
        user_words: str | None = None,
    ) -> TurnOutcome:
        capabilities = self.provider.capabilities
        self.engine.media = MediaSupport(vision=capabilities.vision, pdf=capabilities.pdf_input)
        refs = (
            await asyncio.to_thread(self.engine.attach, attachments, base=self.tools.context.cwd) if attachments else ()
        )
        if self.activation is not None:  # mentions are parsed once, from the new text only
            for warning in self.activation.before_turn(user_text, skills):
                self._emit(warning)
        if self._over_threshold():
            await self.compact(trigger="threshold")
        self._check_provider_sessions()
        turn = self.engine.prepare_turn(user_text, refs, user_words=user_words)
        if durable_message:  # a plan's execution message is on disk before any request carries it
            self.engine.end_turn()
        usages: list[Usage] = []
        tools_run: list[str] = []
        open_calls: list[ToolCallRequest] = []
        try:
            for index in range(self.max_model_calls):
                # a long tool loop: compact between model calls
                compacted = index and self._over_threshold() and await self._compacted("threshold")
                if compacted:
                    turn = self.engine.reprepare(turn)
                turn, completed = await self._model_call_compacting(turn, index)
                usages.append(completed.usage)
                # the provider accepted a request carrying the turn's one-shots (a turn prepared again
                # after a compaction may carry new ones; committing delivered ones again is a no-op)
                self.engine.commit(turn)
                # then where its session resumes: a crash between the two costs a fresh session its own
                # recovery block, never a second copy of one in the same provider session
                self._settle_provider_session()
                self.engine.record(
                    AssistantMessage(
                        text=completed.text,
                        model=completed.model,
                        usage=completed.usage,
                        stop_reason=completed.stop_reason,
                        turn_id=turn.id,
                    )
                )
                if not completed.tool_calls:
                    return TurnOutcome(turn, completed.text, tuple(usages), tuple(tools_run), completed.stop_reason)
                open_calls = list(completed.tool_calls)
                for call in completed.tool_calls:
                    self.engine.record(ToolCall(call_id=call.call_id, name=call.name, input=dict(call.input)))
                ends_turn = False
                while open_calls:
                    call = open_calls[0]
                    self._emit(ToolStarted(call.call_id, call.name, call.input))
                    result = await self.tools.execute(call.call_id, call.name, call.input)
                    full_output = str(result.full_output_path) if result.full_output_path else None
                    self.engine.record(
                        ToolResult(
                            call_id=call.call_id,
                            name=call.name,
                            content=result.content,
                            is_error=result.is_error,
                            full_output_path=full_output,
                            attachments=result.attachments,
                        )
                    )
                    open_calls.pop(0)
                    tools_run.append(call.name)
                    ends_turn = ends_turn or result.ends_turn
                    self._emit(ToolFinished(call.call_id, call.name, result.is_error, result.content, full_output))
                if ends_turn:  # a plan was submitted: the user decides before the model goes on
                    if self.engine.plan is not None:
                        self._emit(PlanUpdate(self.engine.plan))
                    return TurnOutcome(turn, completed.text, tuple(usages), tuple(tools_run), "plan_submitted")
            raise TooManyModelCallsError(f"turn {turn.id} made {self.max_model_calls} model calls without stopping")
        except asyncio.CancelledError:
            self._interrupt(turn, open_calls)
            raise
        finally:
            self.engine.end_turn()

    def _over_threshold(self) -> bool:
        window = self.provider.capabilities.context_window
        tokens = self.engine.calibrated_context_tokens()
        return should_compact(tokens, context_window=window, reserve=self.compaction_reserve)

    async def compact(
        self,
        focus: str | None = None,
        *,
        trigger: Literal["manual", "threshold", "overflow"] = "manual",
        plan_id: str | None = None,
    ) -> CompactionOutcome:
        """Compact the session now (`/compact [focus]`), or as a trigger asks (or for a plan: see `accept_plan`).

        On an SDK-managed backend (the Claude Agent SDK) a manual compaction is the backend's own:
        `/compact` goes to its session, and its boundary is recorded as Lamina records the ones it
        makes by itself. Otherwise, and always for a plan's compaction, Lamina compacts its provider view.
        """
        self._check_open()
        if trigger == "manual" and plan_id is None and isinstance(self.provider.target, SdkManagedTarget):
            return await self._compact_provider_session(focus)
        summariser = self.summariser or ProviderSummariser(self.provider, session_id=self.engine.session.id)
        # a small model's window cannot hold 20,000 tokens of earlier messages beside the kept ones
        lane_tokens = min(self.user_lane_tokens, self.provider.capabilities.context_window // _LANE_SHARE)
        return await self.engine.compact(
            summariser,
            trigger=trigger,
            focus=focus,
            keep_tokens=self.keep_tokens,
            user_lane_tokens=lane_tokens,
            plan_id=plan_id,
        )

    def budget(self, user_text: str | None = None) -> BudgetReport:
        """Tokens per tier (SPEC F17) of the next request, `user_text` standing for the user's message.

        What `lamina context` prints for a new session, for this one: built from a preview of the
        next turn (the cached prefix, history, pending one-shots), so nothing is written to the log.
        Without `user_text`, `lamina.budget.NEXT_MESSAGE` stands for it.
        """
        self._check_open()
        from lamina.budget import NEXT_MESSAGE, budget_of_turn  # the budget module loads the cache simulator

        text = NEXT_MESSAGE if user_text is None else user_text
        attachments = self.engine.attachment_blocks(self.provider.target)  # attached files as this model is sent them
        return budget_of_turn(self.engine.preview_turn(text), attachments=attachments)

    # -- plans (SPEC F16: the state machine is `lamina.plan`, persisted by the engine) ----------------

    @property
    def plan(self) -> Plan | None:
        """The session's latest plan and where its approval stands."""
        return self.engine.plan

    async def accept_plan(self, *, compact: bool = False, draft: str | None = None) -> TurnOutcome | None:
        """Accept the submitted plan and carry it out: the execution turn's outcome.

        With `compact` ("Accept & Compact") the whole conversation is compacted first, with the
        plan as the focus, and the plan runs in that fresh context. `draft` is the user's unsent
        input, kept with the plan (restored on reload). The mode switches to execute. Returns None
        when the compaction failed or timed out: the plan is then `failed`, with the reason, and
        can be accepted again.

        Raises:
            PlanTransitionError: No plan waits for a decision (none submitted, or it already ran).
        """
        self._check_open()
        self.engine.record_plan("accepted", compact=compact, draft_input=draft)
        self._plan_moved()
        return await self.resume_plan()

    async def reject_plan(self, feedback: str) -> TurnOutcome:
        """Reject the submitted plan: back to planning, with `feedback` as the user's message.

        Raises:
            PlanTransitionError: No plan waits for a decision.
        """
        self._check_open()
        plan = self.engine.record_plan("rejected", detail=feedback)
        self._plan_moved()
        # Lamina's message around the user's feedback: only the feedback is the user's words
        return await self._run_turn(rejection_message(plan, feedback), user_words=feedback)

    def cancel_plan(self, reason: str = "") -> Plan:
        """Drop the latest plan (before it is done): it will not be carried out, or no further.

        Raises:
            PlanTransitionError: There is no plan, or it is already finished.
        """
        self._check_open()
        plan = self.engine.record_plan("cancelled", detail=reason)
        self._plan_moved()
        return plan

    async def resume_plan(self) -> TurnOutcome | None:
        """Move an accepted plan forward from wherever it stopped, also in a process started later.

        Compacts (again only if its compaction did not complete), records what completed, then
        dispatches the plan exactly once: the `dispatched` entry is durable before the execution
        message is written, and a dispatch whose message is already logged is never sent again.
        Returns the execution turn's outcome, or None when there was nothing to do or the
        compaction failed.
        """
        self._check_open()
        while (step := next_step(self.engine.plan)) is not None:
            plan = self.engine.plan
            assert plan is not None
            match step:
                case "compact":
                    if plan.state == "accepted":
                        self.engine.record_plan("awaiting_compaction")
                        self._plan_moved()
                    if not await self._compact_for_plan(plan.plan_id):
                        return None
                case "mark_compacted":
                    self.engine.record_plan("compacted", compaction_id=plan.compaction_id)
                case "dispatch":
                    self.engine.record_plan("dispatched")
                case "send":
                    return await self._execute_plan(plan, execution_message(plan))
                case "continue":
                    return await self._execute_plan(plan, continuation_message(plan))
            self._plan_moved()
        return None

    async def _compact_for_plan(self, plan_id: str) -> bool:
        """The plan's compaction under its timeout; on failure the plan is `failed` with the reason."""
        try:
            async with asyncio.timeout(self.plan_compaction_timeout):
                outcome = await self.compact(plan_id=plan_id)
        except TimeoutError:
            reason = f"the compaction took longer than {self.plan_compaction_timeout:g} s"
        except Exception as exc:  # whatever stopped it, the plan must not run half-prepared
            reason = f"the compaction failed: {exc}"
        else:
            reason = f"the compaction did not complete: {outcome.message}"
        plan = self.engine.plan
        if plan is None or plan.plan_id != plan_id:
            return False
        if plan.state == "compacted" or plan.compaction_id is not None:
            return True  # completed (its boundary is durable), whatever was raised after it
        self.engine.record_plan("failed", detail=reason)
        self._plan_moved()
        return False

    async def _execute_plan(self, plan: Plan, message: str) -> TurnOutcome:
        """Send a dispatched plan's execution message (or its continuation), in execute mode; mark it done."""
        if self.engine.mode != PermissionMode.EXECUTE.value:
            self.set_mode(PermissionMode.EXECUTE)  # a recorded state change and a one-shot notice
        try:
            # Lamina's own message in the user's role: nothing in it is the user's words
            outcome = await self._run_turn(message, durable_message=True, user_words="")
        except asyncio.CancelledError:
            self._finish_plan(plan.plan_id, "cancelled", "the user interrupted its execution")
            raise
        except Exception as exc:
            self._finish_plan(plan.plan_id, "failed", f"its execution turn failed: {exc}")
            raise
        self._finish_plan(plan.plan_id, "done", "")
        return outcome

    def _finish_plan(self, plan_id: str, to: Literal["done", "failed", "cancelled"], detail: str) -> None:
        plan = self.engine.plan
        if plan is not None and plan.plan_id == plan_id and plan.state == "dispatched":
            self.engine.record_plan(to, detail=detail)
            self._plan_moved()

    def _plan_moved(self) -> None:
        if self.engine.plan is not None:
            self._emit(PlanUpdate(self.engine.plan))

    async def _compacted(self, trigger: Literal["threshold", "overflow"]) -> bool:
        return (await self.compact(trigger=trigger)).status == "compacted"

    async def _model_call_compacting(self, turn: TurnContext, index: int) -> tuple[TurnContext, Completed]:
        """A model call; on a context overflow, compact and retry once (a second overflow is an error)."""
        try:
            return await self._model_call_recovering(turn, index)
        except ContextOverflowError:
            outcome = await self.compact(trigger="overflow")
            if outcome.status != "compacted":
                raise ContextOverflowError(
                    self.provider.name, f"the request is too long and compaction could not help: {outcome.message}"
                ) from None
            turn = self.engine.reprepare(turn)
        try:
            return turn, await self._model_call(turn, index)
        except ContextOverflowError as exc:
            raise ContextOverflowError(
                self.provider.name, f"the request is still too long after compaction ({exc})", status=exc.status
            ) from exc

    async def _model_call_recovering(self, turn: TurnContext, index: int) -> tuple[TurnContext, Completed]:
        """A model call; when the provider session to resume is gone, recover in a fresh one and retry once."""
        try:
            return turn, await self._model_call(turn, index)
        except ProviderSessionLostError as exc:
            before = self._entries_before(turn.user_entry_id)
            self._recover(before, f"session {exc.session_id} is gone", clear=True)
            turn = self.engine.reprepare(turn)  # the fresh session is told everything: stable, volatile, recovery
        return turn, await self._model_call(turn, index)  # exactly one retry: a second failure goes to the caller

    def _entries_before(self, entry_id: str) -> list[LogEntry]:
        """The provider view up to (not including) entry `entry_id`."""
        entries: list[LogEntry] = []
        for entry in self.engine.view:
            if entry.id == entry_id:
                break
            entries.append(entry)
        return entries

    def _check_provider_sessions(self) -> None:
        """Before a turn: forget other providers' sessions (the conversation goes on here, so they fall
        behind) and this one's when a branch seed or transfer summary waits (it bridges to a fresh one),
        and give a provider that resumes sessions but has none for a conversation already under way a
        recovery block (a session begun elsewhere, an id cleared by a crashed recovery, an older log).
        """
        name = self.provider.name
        for session in self.engine.provider_sessions:
            if session.provider != name:
                self.engine.clear_provider_session(session.provider, f"the conversation went on with {name}")
            elif self._bridge_pending():  # a branch seed or a transfer summary is for a fresh session
                self.engine.clear_provider_session(name, "a pending branch seed or transfer summary starts a fresh one")
        if not self.provider.capabilities.native_resume or self.engine.provider_session(name) is not None:
            return
        if not self._bridge_pending():  # a queued branch seed or transfer summary already bridges the gap
            self._recover(list(self.engine.view), f"{name} holds no session of this conversation", clear=False)

    def _recover(self, before: Sequence[LogEntry], reason: str, *, clear: bool) -> None:
        """Clear the provider's session (durably) and queue a recovery block of the messages in `before`.

        With `clear=False` nothing is recorded when there is nothing to recover (a new session).
        """
        boundary = self.engine.boundary
        block = recovery_text(
            before,
            summary=boundary.summary if boundary is not None else None,
            budget_tokens=self.recovery_tokens,
            estimator=self.engine.estimator,
            reason=reason,
        )
        if block is None and not clear:
            return
        self.engine.clear_provider_session(self.provider.name, reason)
        if block is not None and not self._bridge_pending():
            self.engine.queue_one_shot(RECOVERY_KIND, block.text, hidden=True)  # a bridge: hidden from transcripts

    def _bridge_pending(self) -> bool:
        return any(o.kind in BRIDGE_KINDS for o in self.engine.pending_one_shots)

    def _settle_provider_session(self) -> None:
        update, self._session_update = self._session_update, None
        if update is not None:
            self.engine.set_provider_session(update)

    async def _compact_provider_session(self, focus: str | None) -> CompactionOutcome:
        """`/compact` on an SDK-managed backend: the backend compacts its own session."""
        name = self.provider.name
        stored = self.engine.provider_session(name)
        if stored is None:
            return CompactionOutcome("nothing_to_compact", f"nothing to compact: {name} holds no session yet")
        prompt = "/compact" + (f" {' '.join(focus.split())}" if focus else "")
        request = SdkManagedPrompt(prompt, self.engine.session.id, resume=stored, command=True)
        compacted: ProviderCompacted | None = None
        try:
            async for event in stream_with_retry(self.provider, request, self.retry, on_retry=self._emit):
                match event:
                    case ProviderCompacted():
                        compacted = event
                        self.engine.provider_compacted(name, event.trigger, event.tokens_before)
                    case ProviderSessionChanged(session=session):
                        self._session_update = session
                    case _:
                        pass
        except ProviderSessionLostError:
            self.engine.clear_provider_session(name, "its session could not be resumed to compact it")
            return CompactionOutcome(
                "nothing_to_compact", f"{name} no longer has the session; the next turn starts a fresh one"
            )
        finally:
            self._settle_provider_session()
        if compacted is None:
            return CompactionOutcome("nothing_to_compact", f"{name} did not compact its session")
        before = f" from {compacted.tokens_before:,} tokens" if compacted.tokens_before else ""
        return CompactionOutcome("compacted", f"compacted by {name}{before}", tokens_before=compacted.tokens_before)

    async def _model_call(self, turn: TurnContext, index: int) -> Completed:
        request = self.engine.request(turn, self.provider.target)
        if isinstance(request, SdkManagedPrompt):  # the log says where the provider session resumes
            stored = self.engine.provider_session(self.provider.name)
            request = dataclasses.replace(request, resume=stored, new_session=stored is None)
        estimated = self.engine.context_tokens()
        completed: Completed | None = None
        self._session_update = None
        async for event in stream_with_retry(self.provider, request, self.retry, on_retry=self._emit):
            match event:
                case TextDelta():
                    self._emit(event)
                case ProviderSessionChanged(session=session):
                    self._session_update = session
                case ProviderCompacted(trigger=trigger, tokens_before=tokens):
                    self.engine.provider_compacted(self.provider.name, trigger, tokens)
                case Completed():
                    completed = event
                case _:
                    pass
        if completed is None:
            raise RuntimeError(f"provider {self.provider.name} ended a response without completing it")
        self.engine.observe_usage(estimated, completed.usage)  # the estimator learns the provider's counts
        self._emit(ModelCallFinished(index, completed.usage, completed.stop_reason))
        return completed

    def _interrupt(self, turn: TurnContext, open_calls: Sequence[ToolCallRequest]) -> None:
        for call in open_calls:
            self.engine.record(
                ToolResult(call_id=call.call_id, name=call.name, content=INTERRUPTED_RESULT, is_error=True)
            )
        self.engine.queue_one_shot(
            "interruption",
            "The user interrupted the previous turn"
            + (f" while {len(open_calls)} tool call(s) were running" if open_calls else "")
            + ". Do not assume those actions completed; check before continuing.",
        )

    def branch(self, entry_id: str) -> Branch:
        """Branch the session at `entry_id`, between turns: the next turn sends what the branch holds.

        A provider that forks its own transcript (the Claude Agent SDK) forks it at an answer whose
        provider session the log recorded (`native_fork`); another provider that keeps its own
        transcript (`capabilities.native_resume`) gets a one-shot branch seed; one that renders
        history from the log needs nothing. `Branch.note` says
        whether the branch point is still in the provider view and what happens instead. At a user
        message the branch starts before it and `Branch.offered_text` holds its text. The skills in
        use and the prerequisite reads met become the branch's (its context window's reads count).
        """
        capabilities = self.provider.capabilities
        if capabilities.native_fork and self._forks_natively_at(entry_id):
            # the branch's path keeps the provider session as it stood after that answer: its next
            # turn forks it there (`provider_session` marks it `fork`), nothing injected
            created = dataclasses.replace(self.engine.branch(entry_id, seed=False), strategy="native_fork")
        else:
            created = self.engine.branch(entry_id, seed=capabilities.native_resume)
        if self.activation is not None:  # the skills in use and the reads met are the branch's own
            self.activation.after_branch(_window_reads(self.engine, self.tools))
        return created

    def _forks_natively_at(self, entry_id: str) -> bool:
        """Whether the provider's own session can be forked exactly at `entry_id`: an answer that ends a
        turn whose provider session the log recorded (at a user message, the provider never saw it)."""
        session = self.engine.session
        if not isinstance(session.get(entry_id), AssistantMessage):
            return False
        return provider_session_in_view(session.view(entry_id), self.provider.name) is not None

    def set_mode(self, mode: PermissionMode | str) -> None:
        """Switch the permission mode: recorded in the log, signalled to the model, enforced by the tools."""
        self._check_open()
        mode = PermissionMode(mode)
        self.engine.set_mode(mode.value)
        self.tools.context = dataclasses.replace(self.tools.context, mode=mode)

    def run_turn_sync(
        self, user_text: str, attachments: Sequence[AttachmentInput] = (), *, skills: Sequence[str] = ()
    ) -> TurnOutcome:
        """`run_turn` for synchronous callers (starts and closes its own event loop)."""
        return asyncio.run(self.run_turn(user_text, attachments, skills=skills))


def _window_reads(engine: ContextEngine, pipeline: ToolPipeline) -> Iterator[tuple[RuleCall, ToolOutput]]:
    """The logged calls of the current context window as the pipeline's rules heard them."""
    for call, result in engine.window_calls():
        bound = pipeline.bind(call.call_id, call.name, call.input)
        if bound is not None:
            yield bound, ToolOutput(result.content, is_error=result.is_error)


def open_agent(
    store: SessionStore,
    provider: Provider,
    *,
    workspace: Path,
    session_id: str | None = None,
    mode: PermissionMode | str = PermissionMode.ASK,
    preset: str | Preset = "default",
    custom_preset: str | os.PathLike[str] | None = None,
    interactive: bool | None = None,
    ask: AskCallback | None = None,
    on_event: Callable[[AgentEvent], None] | None = None,
    retry: RetryPolicy | None = None,
    summariser: Summariser | None = None,
    keep_tokens: int = DEFAULT_KEEP_TOKENS,
    user_lane_tokens: int = DEFAULT_USER_LANE_TOKENS,
    prune: PrunePolicy | None = DEFAULT_PRUNE,
    sources: SourceConnections | None = None,
    strict_prerequisites: bool = True,
    nearest_context_rule: bool = True,
    skills_dir: Path | None = None,
) -> Agent:
    """An agent on a new session in `workspace`, or on session `session_id` resumed.

    Wires the pieces the usual way: the workspace's stable context (preset, context files, memory,
    preferences, skill catalogue), the built-in tools and any connected `sources` behind the
    pre-tool-use pipeline (confined to `workspace`, results offloaded to the session's `data/`
    folder, skills and guides enforced as prerequisites, the nearest AGENTS.md required before an
    edit), and the provider. A resumed session keeps its recorded mode; `mode` applies to new
    sessions.

    `preset` is `default`, `mini`, `custom` (with `custom_preset`, the preset's TOML file) or a
    `Preset`. `interactive` picks the prompt's platform section: True when a person reads the
    replies and can answer, False for the headless one (scripts, CI); None (the default) decides
    by whether stdin and stdout are terminals. `prune` says when old tool output leaves the
    provider view before a turn (`lamina.compaction.PrunePolicy`; None: never). A
    `.lamina/project.toml` that cannot be used is skipped, and `on_event` gets a `SkillWarning` naming
    the file and the field.

    The agent owns the session it opens: `agent.close()`, or `with open_agent(...) as agent:`,
    closes it; `store`, `provider` and `sources` stay open for the caller.

    Raises:
        UnknownPresetError, PresetFileError, UsageError: The preset cannot be used (checked
            before any session is created).
    """
    chosen = load_preset(preset, custom_path=custom_preset)
    session = store.open(session_id) if session_id else store.create(cwd=str(workspace))
    try:
        wired = _wire_workspace(workspace, chosen, interactive=interactive, skills_dir=skills_dir)
        context, catalogue = wired.context, wired.catalogue
        problem = context.snapshot().project_problem
        if problem is not None and on_event is not None:  # skipped like a bad SKILL.md; the user is told at start
            on_event(SkillWarning(str(PROJECT_FILE), f"{problem} (the file is skipped)"))
        tools = [*wired.tools, *(sources.tools if sources else ())]
        engine = ContextEngine(
            session,
            stable_source=wired.stable_source,
            tools=tuple(t.spec for t in tools),
            time_zone=context.time_zone,
            mode=PermissionMode(mode).value,
            prune=prune,
            owns_session=True,
        )

        def submit_plan(title: str, path: str, text: str) -> str:
            return engine.submit_plan(title=title, plan_path=path, text=text).plan_id

        tool_context = ToolContext(
            cwd=workspace,
            data_dir=session.data_dir,
            mode=PermissionMode(engine.mode),
            plans_dir=engine.plans_dir,
            submit_plan=submit_plan,
            offload=OffloadPolicy.for_context_window(provider.capabilities.context_window),
            attachments=engine.attachments,
        )

        def stuck(requirement: Requirement, denials: int) -> None:
            if on_event is not None:  # the user learns the agent is stuck; strict mode keeps blocking
                message = f"the agent is stuck: {denials} calls denied until it reads {requirement.path}"
                on_event(SkillWarning(requirement.key, f"{message} ({requirement.reason})"))

        manager = PrerequisiteManager(strict=strict_prerequisites, on_stuck=stuck)
        rules: list[Rule] = [manager.rule()]
        if nearest_context_rule:
            rules.append(NearestContextFileRule(manager, nearest_context_paths(wired.finder, workspace)))
        pipeline = ToolPipeline(tools, tool_context, rules=rules, ask=ask)
        activation = Activation(engine, manager, catalogue, cwd=workspace)
        pipeline.add_rule(activation.rule())  # the active skill's allowed tools
        if sources is not None:
            for source in sources.sources:
                activation.add_source(source.slug, guide_path(source))
            if not session_id:
                engine.set_sources([s.slug for s in sources.sources])
        if session_id:  # a reopened session: the skills in use and the reads met are its path's, as on a branch
            activation.after_branch(_window_reads(engine, pipeline))
    except BaseException:
        session.close()
        raise
    return Agent(
        engine,
        provider,
        pipeline,
        retry=retry or RetryPolicy(),
        on_event=on_event,
        summariser=summariser,
        keep_tokens=keep_tokens,
        user_lane_tokens=user_lane_tokens,
        activation=activation,
        owns_engine=True,
    )


def session_engine(
    session: SessionLog,
    *,
    workspace: Path,
    preset: str | Preset = "default",
    custom_preset: str | os.PathLike[str] | None = None,
    interactive: bool | None = False,
    skills_dir: Path | None = None,
) -> ContextEngine:
    """A context engine over `session` with the stable parts and built-in tools `open_agent` would give it.

    No provider and no tool runs: for reports on a stored session (`lamina sessions budget`) and
    compaction without an agent (`lamina sessions compact`), whose token counts then include the
    stable parts and tool definitions. A source's tools are left out (they need a connection).
    The engine records nothing when it is created; `session` may be read-only for a report.
    """
    chosen = load_preset(preset, custom_path=custom_preset)
    wired = _wire_workspace(workspace, chosen, interactive=interactive, skills_dir=skills_dir)
    return ContextEngine(
        session,
        stable_source=wired.stable_source,
        tools=tuple(t.spec for t in wired.tools),
        time_zone=wired.context.time_zone,
    )


@dataclass(frozen=True, slots=True)
class _Wiring:
    tools: tuple[Tool[Any], ...]
    """The built-in tools the preset keeps."""
    context: WorkspaceContext
    catalogue: SkillCatalogue
    finder: ContextFileFinder

    def stable_source(self) -> tuple[Part, ...]:
        return (*self.context(), *self.catalogue.parts())


def _wire_workspace(workspace: Path, preset: Preset, *, interactive: bool | None, skills_dir: Path | None) -> _Wiring:
    """The workspace's stable context, skill catalogue and built-in tools, the one way agents and reports build them."""
    if interactive is None:
        interactive = sys.stdin.isatty() and sys.stdout.isatty()
    tools = mini_tools() if preset.name == "mini" else default_tools()
    finder = ContextFileFinder()
    context = WorkspaceContext(
        workspace,
        preset=preset,
        tools=tuple(t.spec for t in tools),
        finder=finder,
        platform=detect_platform(interactive=interactive),
    )
    allowed = {s.name for s in context.tools}
    kept = tuple(t for t in tools if t.spec.name in allowed)
    return _Wiring(kept, context, SkillCatalogue(workspace, user_dir=skills_dir), finder)
