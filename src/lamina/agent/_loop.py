"""The agent loop: prepare a turn, render, send, stream, run tools, commit (I/O: provider, tools, log).

The loop knows nothing of JSONL or of any provider's wire format: it talks to a
`ContextEngine` (turn context, log, outbox), a `Provider` (rendered request in, events out) and a
`ToolExecutor` (the pre-tool-use pipeline). Its parts are members: the plan runner (`_plans`), the
provider sessions and their recovery (`_provider_sessions`) and the compaction timing (`_priced`).
Async first; `run_turn_sync` wraps it for scripts.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Literal, Self

from lamina.agent._activation import Activation, window_reads
from lamina.agent._background import BackgroundCompactions, limits_of, summariser_of, timing_of
from lamina.agent._cache_watch import CacheWatch
from lamina.agent._events import (
    AgentEvent,
    PlanUpdate,
    ToolFinished,
    ToolProgress,
    ToolStarted,
    TurnOutcome,
)
from lamina.agent._failure import record_failure
from lamina.agent._interrupted import OutputSeen, interrupted_content
from lamina.agent._lifetime import Lifetime
from lamina.agent._model_calls import ModelCalls
from lamina.agent._plans import DEFAULT_PLAN_COMPACTION_TIMEOUT, PlanRunner
from lamina.agent._priced import DEFAULT_COMPACTION_BAND
from lamina.agent._provider_sessions import SessionRecovery
from lamina.agent._recovery import DEFAULT_RECOVERY_TOKENS
from lamina.agent._warming import DEFAULT_PREWARM, PrewarmSetting, Warming
from lamina.attachments import AttachmentInput
from lamina.compaction import (
    DEFAULT_KEEP_TOKENS,
    DEFAULT_RESERVE,
    DEFAULT_USER_LANE_TOKENS,
    Summariser,
)
from lamina.engine import CompactionOutcome, ContextEngine, Plan, rejection_message
from lamina.errors import TooManyModelCallsError, UsageError
from lamina.placement import RenderedRequest, SdkManagedTarget
from lamina.pricing import CachePrices
from lamina.providers import (
    Completed,
    Provider,
    ProviderEvent,
    RetryPolicy,
    ToolCallRequest,
    stream_with_retry,
)
from lamina.session import (
    AssistantMessage,
    AttachmentRef,
    Branch,
    CacheCheck,
    CostDecision,
    SessionLog,
    ToolCall,
    ToolResult,
    Usage,
)
from lamina.tools import PermissionMode, ToolExecution, ToolPipeline

if TYPE_CHECKING:
    from lamina.reports import BudgetReport


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
    owns_provider: bool = False
    """Whether `close` closes `provider` too (True when `open_agent` built it from a model spec)."""
    compaction_band: float | None = DEFAULT_COMPACTION_BAND
    """From this fraction of the compaction threshold on, compact before a turn when the cost model says it pays;
    None: only at the threshold."""
    cache_prices: CachePrices | None = None
    """The prices the engine's cost model decides with; None: the provider's own, followed across a provider switch
    (`open_agent`'s engine reads them, and the provider's media, from the agent at each use)."""
    cache_diagnostics: bool = True
    """Record why each call missed the prompt cache: the provider's diagnostics (asked for where the model has
    them) beside the simulator's prediction; False: neither asked nor predicted."""
    prewarm: PrewarmSetting = DEFAULT_PREWARM  # a pre-warm between turns: `priced` (when it pays), `always`, `off`
    background_compaction: bool = True
    """Prepare compactions off the user's time (at a turn's end, or once an idle session's cache is cold) and apply
    them at the next turn's start; False: only before a turn, on the user's time (see docs/compaction.md)."""
    _plans: PlanRunner = field(init=False, repr=False)
    _provider_sessions: SessionRecovery = field(init=False, repr=False)
    _calls: ModelCalls = field(init=False, repr=False)
    _lifetime: Lifetime = field(default_factory=Lifetime, init=False, repr=False)
    _background: BackgroundCompactions = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._plans = PlanRunner(
            self.engine,
            compact=lambda plan_id: self.compact(plan_id=plan_id),
            # Lamina's own message in the user's role: nothing in it is the user's words
            send=lambda message: self._run_turn(message, durable_message=True, user_words=""),
            set_mode=self.set_mode,
            emit=self._emit,
        )
        self._provider_sessions = SessionRecovery(self.engine, provider=lambda: self.provider, stream=self._stream)
        self._calls = ModelCalls(
            self.engine,
            provider=lambda: self.provider,
            sessions=self._provider_sessions,
            stream=self._stream,
            compact=lambda: self.compact(trigger="overflow"),
            emit=self._emit,
            watch=CacheWatch(enabled=lambda: self.cache_diagnostics),
            warming=Warming(self.engine, provider=lambda: self.provider, setting=lambda: self.prewarm),
        )
        compact = partial(self.compact, trigger="threshold")
        self._background = BackgroundCompactions(
            self, emit=self._emit, compact=compact, closed=self._lifetime.is_closed, warming=self._calls.warming
        )

    @property
    def session(self) -> SessionLog:
        """The session log the agent's turns are recorded in (the engine's)."""
        return self.engine.session

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._lifetime.closed

    def close(self) -> None:
        """Let go of the agent; using it afterwards raises `UsageError`. Safe to call twice.

        Closes the engine (and, through it, the session it owns) when the agent owns it
        (`owns_engine`), and the provider when the agent built it from a model spec
        (`owns_provider`); otherwise they stay open for their owner.
        """
        self._background.close()
        self._lifetime.close(*self._owned())

    async def aclose(self) -> None:
        """`close` for async callers: the provider's own client is closed on the running loop."""
        self._background.close()
        await self._lifetime.aclose(*self._owned())

    def _owned(self) -> tuple[ContextEngine | None, Provider | None]:
        return (self.engine if self.owns_engine else None), (self.provider if self.owns_provider else None)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _check_open(self) -> None:
        if self._lifetime.closed:
            raise UsageError(f"the agent of session {self.engine.session.id} is closed; open the session again")

    def _emit(self, event: AgentEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)

    async def run_turn(
        self, user_text: str, attachments: Sequence[AttachmentInput] = (), *, skills: Sequence[str] = ()
    ) -> TurnOutcome:
        """Run one user turn to the end: model calls and tool calls until the model stops.

        Cancelling the task leaves a well-formed log: every tool call gets a result (a synthetic
        "interrupted" one if needed) and the next turn carries a one-shot interruption reminder.
        A plan accepted but not yet dispatched (its process stopped) is carried out first: it was
        approved before this message was written (see `resume_plan`).

        Args:
            user_text: The user's message.
            attachments: Files (paths relative to the workspace, or bytes) sent with the message:
                checked, converted and stored first, shown as the provider's model can take them.
            skills: Skills the turn's task uses (a task or sub-agent spec): each becomes a required
                read, exactly as a `[skill:name]` mention in `user_text` does, and the turn's active
                task, whose `allowed_tools` the pipeline enforces (see `docs/agent.md`).

        Returns:
            What the turn did.

        Raises:
            AttachmentError: An attached file cannot be used; nothing was sent or logged.
        """
        self._check_open()
        if self._plans.waiting:
            await self.resume_plan()
        outcome = await self._run_turn(user_text, attachments, skills=skills)
        self._plans.after_turn()
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
        refs = await self._before_turn(user_text, attachments, skills)
        turn = self.engine.prepare_turn(user_text, refs, user_words=user_words)
        if durable_message:  # a plan's execution message is on disk before any request carries it
            self.engine.end_turn()
        usages: list[Usage] = []
        tools_run: list[str] = []
        open_calls: list[ToolCallRequest] = []
        try:
            for index in range(self.max_model_calls):
                # a long tool loop: compact between model calls
                if index and self._due() and (await self._compact_due()).status == "compacted":
                    turn = self.engine.reprepare(turn)
                turn, completed = await self._calls.send(turn, index, recovery_tokens=self.recovery_tokens)
                usages.append(completed.usage)
                # the provider accepted a request carrying the turn's one-shots (a turn prepared again
                # after a compaction may carry new ones; committing delivered ones again is a no-op)
                self.engine.commit(turn)
                # then where its session resumes: a crash between the two costs a fresh session its own
                # recovery block, never a second copy of one in the same provider session
                self._provider_sessions.settle()
                self.engine.record(_answer(completed, turn.id, self._calls.watch.last))
                if not completed.tool_calls:
                    return TurnOutcome(turn, completed.text, tuple(usages), tuple(tools_run), completed.stop_reason)
                open_calls = list(completed.tool_calls)
                if await self._tool_round(open_calls, tools_run):  # a plan was submitted: the user decides
                    return TurnOutcome(turn, completed.text, tuple(usages), tuple(tools_run), "plan_submitted")
            raise TooManyModelCallsError(f"turn {turn.id} made {self.max_model_calls} model calls without stopping")
        except BaseException as exc:  # cancelled: interrupted; an error: the failure logged
            _stopped(self.engine, open_calls, exc)
            raise
        finally:
            self.engine.end_turn()
            self._background.turn_ended()

    async def _before_turn(
        self, user_text: str, attachments: Sequence[AttachmentInput], skills: Sequence[str]
    ) -> tuple[AttachmentRef, ...]:
        """Before a turn: attachments stored, mentions read, a compaction if due or paying, provider sessions checked.

        Returns:
            The stored attachments' references, for the user's message.
        """
        refs = (
            await asyncio.to_thread(self.engine.attachments.add_all, attachments, base=self.tools.context.cwd)
            if attachments
            else ()
        )
        if self.activation is not None:  # mentions are parsed once, from the new text only
            for warning in self.activation.before_turn(user_text, skills):
                self._emit(warning)
        await self._background.before_turn()  # a prepared compaction applied, or one made when due or paying
        self._provider_sessions.before_turn(self.recovery_tokens)
        self.tools.context = dataclasses.replace(self.tools.context, request_results=partial(_in_request, self.engine))
        return refs

    async def _tool_round(self, open_calls: list[ToolCallRequest], tools_run: list[str]) -> bool:
        """The model's tool calls recorded, then run one by one, each result recorded as it comes.

        `open_calls` loses each call once its result is recorded: what is left when the task is
        cancelled gets an "interrupted" result. Returns whether a call ends the turn (a plan was submitted).
        """
        for call in open_calls:
            self.engine.record(ToolCall(call_id=call.call_id, name=call.name, input=dict(call.input)))
        ends_turn = False
        while open_calls:
            call = open_calls[0]
            self._emit(ToolStarted(call.call_id, call.name, call.input))
            result = await _execute(self.tools, call, self._emit if self.on_event is not None else None)
            entry = _result_entry(call, result)
            self.engine.record(entry)
            open_calls.pop(0)
            tools_run.append(call.name)
            ends_turn = ends_turn or result.ends_turn
            self._emit(ToolFinished(call.call_id, call.name, result.is_error, result.content, entry.full_output_path))
        if ends_turn and self.engine.plans.latest is not None:
            self._emit(PlanUpdate(self.engine.plans.latest))
        return ends_turn

    async def compact(
        self,
        focus: str | None = None,
        *,
        trigger: Literal["manual", "threshold", "overflow"] = "manual",
        plan_id: str | None = None,
        force: bool = False,
        decision: CostDecision | None = None,
    ) -> CompactionOutcome:
        """Compact the session now (`/compact [focus]`), or as a trigger asks (or for a plan: see `accept_plan`).

        On an SDK-managed backend (the Claude Agent SDK) a manual compaction is the backend's own: `/compact` goes
        to its session, its boundary recorded as Lamina records the ones it makes by itself. Otherwise, and always
        for a plan's compaction, Lamina compacts its provider view. `force` (`/compact --force`) compacts even a
        conversation that fits the kept budget: all of it is summarised (`Compactor.compact`); call it between
        turns. `decision`: the cost model's, for a compaction in the band below the threshold (`compaction_band`).
        """
        self._check_open()
        if trigger == "manual" and plan_id is None and isinstance(self.provider.target, SdkManagedTarget):
            return await self._provider_sessions.compact(focus)
        between_turns = trigger == "manual" and not plan_id  # the compacted prefix may be pre-warmed
        ready = await self._background.settle() if between_turns and not force else None
        if ready is not None and ready.status == "compacted":  # a discarded one (a branch): compact now
            return await self._calls.warming.after_compaction(ready, between_turns=True)  # never a second one
        outcome = await self.engine.compactor.compact(
            summariser_of(self, self._calls.warming),
            trigger=trigger,
            focus=focus,
            keep_tokens=self.keep_tokens,
            user_lane_tokens=limits_of(self)[2],
            plan_id=plan_id,
            force=force,
            decision=decision,
        )
        return await self._calls.warming.after_compaction(outcome, between_turns=between_turns)

    async def _compact_due(self) -> CompactionOutcome:
        """A due compaction between model calls: the background one waited for and applied, else one made now."""
        if (settled := await self._background.settle()) is not None and settled.status == "compacted":
            return settled
        return await self.compact(trigger="threshold")  # none prepared, or it was discarded (a branch)

    def budget(self, user_text: str | None = None) -> BudgetReport:
        """Tokens per tier (SPEC F17) of the next request, `user_text` standing for the user's message.

        What `lamina context` prints for a new session, for this one: built from a preview of the
        next turn (the cached prefix, history, pending one-shots), so nothing is written to the log.
        Without `user_text`, `lamina.reports.NEXT_MESSAGE` stands for it.
        """
        self._check_open()
        from lamina.reports import NEXT_MESSAGE, budget_of_turn  # the budget module loads the cache simulator

        text = NEXT_MESSAGE if user_text is None else user_text
        attachments = self.engine.attachment_blocks(self.provider.target)  # attached files as this model is sent them
        return budget_of_turn(self.engine.preview_turn(text), attachments=attachments)

    def _due(self, tokens: int | None = None) -> bool:
        """Whether the context (`tokens`, counted now unless given) is over the threshold: a compaction is due."""
        tokens = self.engine.compactor.calibrated_context_tokens() if tokens is None else tokens
        return timing_of(self).due(tokens, self.provider.capabilities.context_window)

    def _stream(self, request: RenderedRequest) -> AsyncIterator[ProviderEvent]:
        return stream_with_retry(self.provider, request, self.retry, on_retry=self._emit)

    def branch(self, entry_id: str) -> Branch:
        """Branch the session at `entry_id`, between turns: the next turn sends what the branch holds.

        A provider that forks its own transcript (the Claude Agent SDK) forks it at an answer whose
        provider session the log recorded (`native_fork`); another provider that keeps its own
        transcript (`capabilities.native_resume`) gets a one-shot branch seed; one that renders
        history from the log needs nothing. `Branch.note` says whether the branch point is still in
        the provider view and what happens instead. At a user
        message the branch starts before it and `Branch.offered_text` holds its text. The skills in
        use and the prerequisite reads met become the branch's (its context window's reads count).
        """
        created = self._provider_sessions.branch(entry_id)
        if self.activation is not None:  # the skills in use and the reads met are the branch's own
            self.activation.after_branch(window_reads(self.engine, self.tools))
        return created

    def set_mode(self, mode: PermissionMode | str) -> None:
        """Switch the permission mode: recorded in the log, signalled to the model, enforced by the tools."""
        self._check_open()
        mode = PermissionMode(mode)
        self.engine.settings.set_mode(mode.value)
        self.tools.context = dataclasses.replace(self.tools.context, mode=mode)

    @property
    def plan(self) -> Plan | None:
        """The session's latest plan and where its approval stands."""
        return self._plans.plan

    async def accept_plan(
        self, *, compact: bool = False, draft: str | None = None, mode: PermissionMode | str = PermissionMode.EXECUTE
    ) -> TurnOutcome | None:
        """Accept the submitted plan and carry it out in `mode`, then go back to the mode before the plan.

        Args:
            compact: "Accept & Compact": the whole conversation is compacted first, with the plan
                as the focus, and the plan runs in that fresh context.
            draft: The user's unsent input, kept with the plan (restored on reload).
            mode: The permission mode the plan runs in: execute (the default: nothing is asked) or
                ask (each change is approved, as chat's "ask before each change").

        Returns:
            The execution turn's outcome; None when the compaction failed or timed out: the plan is
            then `failed`, with the reason, and can be accepted again.

        Raises:
            PlanTransitionError: No plan waits for a decision (none submitted, or it already ran).
        """
        self._check_open()
        self._plans.accept(compact=compact, draft=draft, mode=mode)
        return await self.resume_plan()

    async def reject_plan(self, feedback: str) -> TurnOutcome:
        """Reject the submitted plan: back to planning, with `feedback` as the user's message.

        Raises:
            PlanTransitionError: No plan waits for a decision.
        """
        self._check_open()
        plan = self._plans.record("rejected", feedback)
        # Lamina's message around the user's feedback: only the feedback is the user's words
        return await self._run_turn(rejection_message(plan, feedback), user_words=feedback)

    def cancel_plan(self, reason: str = "") -> Plan:
        """Drop the latest plan (before it is done): it will not be carried out, or no further.

        Raises:
            PlanTransitionError: There is no plan, or it is already finished.
        """
        self._check_open()
        return self._plans.record("cancelled", reason)

    async def resume_plan(self) -> TurnOutcome | None:
        """Move an accepted plan forward from wherever it stopped, also in a process started later.

        Returns:
            The execution turn's outcome; None when there was nothing to do or the compaction failed.
        """
        self._check_open()
        return await self._plans.resume(self.plan_compaction_timeout)

    def run_turn_sync(
        self, user_text: str, attachments: Sequence[AttachmentInput] = (), *, skills: Sequence[str] = ()
    ) -> TurnOutcome:
        """`run_turn` for synchronous callers, on the agent's own event loop (kept until `close`)."""
        self._check_open()
        return self._lifetime.run(self.run_turn(user_text, attachments, skills=skills))


def _in_request(engine: ContextEngine) -> tuple[ToolResult, ...]:
    """The tool results the next request holds (for Read): the context window, prunes applied, from the log."""
    return tuple(result for _, result in engine.window_calls())


def _stopped(engine: ContextEngine, open_calls: Sequence[ToolCallRequest], error: BaseException) -> None:
    """A turn that did not finish: cancelled (the user interrupted it) or failed with an error."""
    if isinstance(error, asyncio.CancelledError):
        _interrupt(engine, open_calls)
    elif isinstance(error, Exception):
        record_failure(engine, error)


def _interrupt(engine: ContextEngine, open_calls: Sequence[ToolCallRequest]) -> None:
    """A turn cancelled: each open call gets an "interrupted" result, and the next turn a one-shot saying so."""
    for call in open_calls:
        content = interrupted_content(call.call_id)  # what it printed before the user stopped it
        engine.record(ToolResult(call_id=call.call_id, name=call.name, content=content, is_error=True))
    engine.queue_one_shot(
        "interruption",
        "The user interrupted the previous turn"
        + (f" while {len(open_calls)} tool call(s) were running" if open_calls else "")
        + ". Do not assume those actions completed; check before continuing.",
    )


def _answer(completed: Completed, turn_id: str, cache_check: CacheCheck | None) -> AssistantMessage:
    """The log entry of the model's answer, with why its request missed the cache."""
    return AssistantMessage(
        text=completed.text,
        model=completed.model,
        usage=completed.usage,
        stop_reason=completed.stop_reason,
        turn_id=turn_id,
        reasoning=completed.reasoning,
        context_edits=completed.context_edits,
        cache_check=cache_check,
    )


def _result_entry(call: ToolCallRequest, result: ToolExecution) -> ToolResult:
    """The log entry of a call's result: its content, error flag, offloaded output, attachments and Read stamp."""
    return ToolResult(
        call_id=call.call_id,
        name=call.name,
        content=result.content,
        is_error=result.is_error,
        full_output_path=str(result.full_output_path) if result.full_output_path else None,
        attachments=result.attachments,
        read=result.read,
    )


async def _execute(
    tools: ToolPipeline, call: ToolCallRequest, emit: Callable[[AgentEvent], None] | None
) -> ToolExecution:
    """One call through the pipeline: what it reports while it runs emitted as `ToolProgress`, kept if cancelled."""
    before = tools.context.progress
    seen = OutputSeen()

    def report(output: str) -> None:
        seen.add(output)
        if emit is not None:
            emit(ToolProgress(call.call_id, call.name, output))
        if before is not None:  # the caller's own listener hears it too
            before(output)

    tools.context = dataclasses.replace(tools.context, progress=report)
    try:
        return await tools.execute(call.call_id, call.name, call.input)
    except asyncio.CancelledError:
        seen.keep(call.call_id)
        raise
    finally:  # only the listener goes back: a mode switched meanwhile stays switched
        tools.context = dataclasses.replace(tools.context, progress=before)
