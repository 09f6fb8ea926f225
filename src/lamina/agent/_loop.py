"""The agent loop: prepare a turn, render, send, stream, run tools, commit (I/O: provider, tools, log).

The loop knows nothing of JSONL or of any provider's wire format: it talks to a
`ContextEngine` (turn context, log, outbox), a `Provider` (rendered request in, events out) and a
`ToolExecutor` (the pre-tool-use pipeline). Async first; `run_turn_sync` wraps it for scripts.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, Self

from lamina.agent._activation import Activation, window_reads
from lamina.agent._events import (
    AgentEvent,
    ModelCallFinished,
    PlanUpdate,
    ToolFinished,
    ToolProgress,
    ToolStarted,
    TurnOutcome,
)
from lamina.agent._plans import DEFAULT_PLAN_COMPACTION_TIMEOUT, PlanSteps
from lamina.agent._priced import DEFAULT_COMPACTION_BAND, PricedCompaction
from lamina.agent._provider_sessions import ProviderSessions, SessionUpdate
from lamina.agent._recovery import DEFAULT_RECOVERY_TOKENS
from lamina.attachments import AttachmentInput
from lamina.compaction import (
    DEFAULT_KEEP_TOKENS,
    DEFAULT_RESERVE,
    DEFAULT_USER_LANE_TOKENS,
    ProviderSummariser,
    Summariser,
)
from lamina.context import INTERRUPTED_RESULT, TurnContext
from lamina.engine import CompactionOutcome, ContextEngine, next_step, provider_session_in_view
from lamina.errors import ContextOverflowError, TooManyModelCallsError, UsageError
from lamina.placement import SdkManagedPrompt, SdkManagedTarget
from lamina.pricing import CachePrices
from lamina.providers import (
    Completed,
    Provider,
    ProviderCompacted,
    ProviderSessionChanged,
    RetryPolicy,
    TextDelta,
    ToolCallRequest,
    stream_with_retry,
)
from lamina.session import AssistantMessage, Branch, CostDecision, SessionLog, ToolCall, ToolResult, Usage
from lamina.tools import PermissionMode, ToolExecution, ToolPipeline

if TYPE_CHECKING:
    from lamina.reports import BudgetReport


def _in_request(engine: ContextEngine) -> tuple[ToolResult, ...]:
    """The tool results the next request holds (for Read): the context window, prunes applied, from the log."""
    return tuple(result for _, result in engine.window_calls())


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


_LANE_SHARE = 4
"""The user's words lane takes at most 1/4 of the context window, whatever its configured budget."""


@dataclass
class Agent(PlanSteps, ProviderSessions, PricedCompaction):
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
    """The prices the engine's cost model decides with; None: the provider's own, followed across a provider switch."""
    _session_update: SessionUpdate = field(default=None, init=False, repr=False)
    _closed: bool = field(default=False, init=False, repr=False)
    _runner: asyncio.Runner | None = field(default=None, init=False, repr=False)
    """The one event loop of `run_turn_sync`: an SDK client's connections outlive a turn, not their loop."""
    _closing: asyncio.Task[None] | None = field(default=None, init=False, repr=False)

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
        (`owns_engine`), and the provider when the agent built it from a model spec
        (`owns_provider`); otherwise they stay open for their owner.
        """
        if self._closed:
            return
        self._closed = True
        try:
            if self.owns_provider:
                self._close_provider()
        finally:
            self._release()

    async def aclose(self) -> None:
        """`close` for async callers: the provider's own client is closed on the running loop."""
        if self._closed:
            return
        self._closed = True
        try:
            aclose = self._provider_aclose() if self.owns_provider else None
            if aclose is not None:
                await aclose()
        finally:
            self._release()

    def _release(self) -> None:
        if self._runner is not None:
            self._runner.close()
            self._runner = None
        if self.owns_engine:
            self.engine.close()

    def _provider_aclose(self) -> Callable[[], Coroutine[Any, Any, None]] | None:
        aclose: Callable[[], Coroutine[Any, Any, None]] | None = getattr(self.provider, "aclose", None)
        return aclose

    def _close_provider(self) -> None:
        aclose = self._provider_aclose()
        if aclose is None:
            return
        if self._runner is not None:  # the loop its client's connections were made on
            self._runner.run(aclose())
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(aclose())
            return
        self._closing = loop.create_task(aclose())  # closed from async code without await: the loop ends it

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

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
        if next_step(self.engine.plans.latest) is not None:
            await self.resume_plan()
        outcome = await self._run_turn(user_text, attachments, skills=skills)
        plan = self.engine.plans.latest
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
        cwd = self.tools.context.cwd
        refs = await asyncio.to_thread(self.engine.attachments.add_all, attachments, base=cwd) if attachments else ()
        if self.activation is not None:  # mentions are parsed once, from the new text only
            for warning in self.activation.before_turn(user_text, skills):
                self._emit(warning)
        await self._compact_before_turn()
        self._check_provider_sessions()
        self.tools.context = dataclasses.replace(self.tools.context, request_results=partial(_in_request, self.engine))
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
                    result = await _execute(self.tools, call, self._emit if self.on_event is not None else None)
                    entry = _result_entry(call, result)
                    self.engine.record(entry)
                    open_calls.pop(0)
                    tools_run.append(call.name)
                    ends_turn = ends_turn or result.ends_turn
                    self._emit(
                        ToolFinished(call.call_id, call.name, result.is_error, result.content, entry.full_output_path)
                    )
                if ends_turn:  # a plan was submitted: the user decides before the model goes on
                    if self.engine.plans.latest is not None:
                        self._emit(PlanUpdate(self.engine.plans.latest))
                    return TurnOutcome(turn, completed.text, tuple(usages), tuple(tools_run), "plan_submitted")
            raise TooManyModelCallsError(f"turn {turn.id} made {self.max_model_calls} model calls without stopping")
        except asyncio.CancelledError:
            self._interrupt(turn, open_calls)
            raise
        finally:
            self.engine.end_turn()

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

        On an SDK-managed backend (the Claude Agent SDK) a manual compaction is the backend's own:
        `/compact` goes to its session, and its boundary is recorded as Lamina records the ones it
        makes by itself. Otherwise, and always for a plan's compaction, Lamina compacts its provider view.
        `force` (`/compact --force`) compacts even a conversation that fits the kept budget: all of
        it is summarised (`Compactor.compact`); call it between turns. `decision`: the cost
        model's, for a compaction in the band below the threshold (see `compaction_band`).
        """
        self._check_open()
        if trigger == "manual" and plan_id is None and isinstance(self.provider.target, SdkManagedTarget):
            return await self._compact_provider_session(focus)
        summariser = self.summariser or ProviderSummariser(self.provider, session_id=self.engine.session.id)
        # a small model's window cannot hold 20,000 tokens of earlier messages beside the kept ones
        lane_tokens = min(self.user_lane_tokens, self.provider.capabilities.context_window // _LANE_SHARE)
        return await self.engine.compactor.compact(
            summariser,
            trigger=trigger,
            focus=focus,
            keep_tokens=self.keep_tokens,
            user_lane_tokens=lane_tokens,
            plan_id=plan_id,
            force=force,
            decision=decision,
        )

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

    async def _model_call(self, turn: TurnContext, index: int) -> Completed:
        request = self.engine.request(turn, self.provider.target)
        if isinstance(request, SdkManagedPrompt):  # the log says where the provider session resumes
            stored = self.engine.provider_sessions.get(self.provider.name)
            request = dataclasses.replace(request, resume=stored, new_session=stored is None)
        estimated = self.engine.compactor.context_tokens()
        completed: Completed | None = None
        self._session_update = None
        async for event in stream_with_retry(self.provider, request, self.retry, on_retry=self._emit):
            match event:
                case TextDelta():
                    self._emit(event)
                case ProviderSessionChanged(session=session):
                    self._session_update = session
                case ProviderCompacted(trigger=trigger, tokens_before=tokens):
                    self.engine.provider_sessions.compacted(self.provider.name, trigger, tokens)
                case Completed():
                    completed = event
                case _:
                    pass
        if completed is None:
            raise RuntimeError(f"provider {self.provider.name} ended a response without completing it")
        self.engine.compactor.observe_usage(estimated, completed.usage)  # the estimator learns the provider's counts
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
            self.activation.after_branch(window_reads(self.engine, self.tools))
        return created

    def _forks_natively_at(self, entry_id: str) -> bool:
        """Whether the provider's own session can be forked exactly at `entry_id`.

        It can at an answer that ends a turn whose provider session the log recorded (at a user
        message, the provider never saw it).
        """
        session = self.engine.session
        if not isinstance(session.get(entry_id), AssistantMessage):
            return False
        return provider_session_in_view(session.view(entry_id), self.provider.name) is not None

    def set_mode(self, mode: PermissionMode | str) -> None:
        """Switch the permission mode: recorded in the log, signalled to the model, enforced by the tools."""
        self._check_open()
        mode = PermissionMode(mode)
        self.engine.settings.set_mode(mode.value)
        self.tools.context = dataclasses.replace(self.tools.context, mode=mode)

    def run_turn_sync(
        self, user_text: str, attachments: Sequence[AttachmentInput] = (), *, skills: Sequence[str] = ()
    ) -> TurnOutcome:
        """`run_turn` for synchronous callers, on the agent's own event loop (kept until `close`)."""
        self._check_open()
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner.run(self.run_turn(user_text, attachments, skills=skills))


async def _execute(
    tools: ToolPipeline, call: ToolCallRequest, emit: Callable[[AgentEvent], None] | None
) -> ToolExecution:
    """One call through the pipeline, what it reports while it runs emitted as `ToolProgress`."""
    if emit is None:
        return await tools.execute(call.call_id, call.name, call.input)
    before = tools.context.progress

    def report(output: str) -> None:
        emit(ToolProgress(call.call_id, call.name, output))
        if before is not None:  # the caller's own listener hears it too
            before(output)

    tools.context = dataclasses.replace(tools.context, progress=report)
    try:
        return await tools.execute(call.call_id, call.name, call.input)
    finally:  # only the listener goes back: a mode switched meanwhile stays switched
        tools.context = dataclasses.replace(tools.context, progress=before)
