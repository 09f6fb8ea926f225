"""Invariant 7 as a hypothesis state machine: accept / reject / compact / crash / reopen in any order.

Crashes are injected through the store's file layer, at a plan transition's line (just before it
is written, or just after it is fsynced): the process's session is then abandoned without another
write, as a SIGKILL leaves it (the kernel keeps what was written), and reopened. After every step
the whole log is read back and checked: no plan dispatched twice, no execution message without
its recorded dispatch, no "Accept & Compact" plan dispatched before its compaction, and the
reopened engine, which reads from the last boundary only, knows the same plan as the whole log.
"""

from __future__ import annotations

import asyncio
import functools
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from lamina.agent import Agent, AgentOptions, open_agent
from lamina.compaction import DeterministicSummariser
from lamina.engine import OPEN_STATES, PlanTransitionError, advance, next_step
from lamina.providers import RetryPolicy, ScriptedProvider, ScriptedResponse
from lamina.session import CompactionBoundary, JsonlSession, LocalSessionStore, OsFiles, PlanState
from tests.agent.plan_flow import dispatch_facts, full_log, make_workspace
from tests.agent.test_plan_crash import POINTS
from tests.conftest import EXHAUSTIVE


class _Crash(BaseException):
    """The process dies here (a BaseException: nothing in Lamina may catch it)."""


class _CrashingFiles(OsFiles):
    def __init__(self) -> None:
        self.point: tuple[bytes, bytes] | None = None
        self.when = "before"
        self.armed = False

    def arm(self, point: str | None, when: str) -> None:
        self.point, self.when, self.armed = (POINTS[point] if point else None), when, False

    def write(self, fd: int, data: bytes) -> None:
        hit = self.point is not None and data.startswith(self.point[0]) and self.point[1] in data
        if hit and self.when == "before":
            self.point = None
            raise _Crash
        super().write(fd, data)
        self.armed = self.armed or hit

    def fsync(self, fd: int) -> None:
        super().fsync(fd)
        if self.armed:
            self.point, self.armed = None, False
            raise _Crash


async def _no_sleep(_: float) -> None:
    return None


CRASH = st.none() | st.tuples(st.sampled_from(list(POINTS)), st.sampled_from(["before", "after"]))


class PlanMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="lamina-plan-machine-"))
        self.workspace = make_workspace(self.tmp)
        self.files = _CrashingFiles()
        self.store = LocalSessionStore(self.tmp / "store", files=self.files)
        self.agent = self._open(None)
        self.session_id = self.agent.engine.session.id
        self.titles = 0

    def _open(self, session_id: str | None) -> Agent:
        provider = ScriptedProvider([ScriptedResponse(text="Working on it. " * 40)] * 200)
        return open_agent(
            self.store,
            provider,
            workspace=self.workspace,
            session_id=session_id,
            options=AgentOptions(
                mode="plan", summariser=DeterministicSummariser(), retry=RetryPolicy(sleep=_no_sleep), keep_tokens=100
            ),
        )

    def _do(self, work: object, crash: tuple[str, str] | None) -> None:
        """Run `work` (a coroutine function or callable) with a crash armed; a crash reopens the session."""
        self.files.arm(*(crash or (None, "before")))
        try:
            result = work()  # type: ignore[operator]
            if asyncio.iscoroutine(result):
                asyncio.run(result)
        except _Crash:
            session = self.agent.engine.session
            assert isinstance(session, JsonlSession)
            session._abandon()  # dies: nothing more is written
            self.agent = self._open(self.session_id)
        finally:
            self.files.arm(None, "before")

    @rule(text=st.sampled_from(["Look at app.py.", "Why does total() add 1?", "Keep it pure, please."]))
    def chat(self, text: str) -> None:
        self._do(functools.partial(self.agent.run_turn, text + " " + "More detail. " * 30), None)

    @rule(crash=CRASH)
    def submit(self, crash: tuple[str, str] | None) -> None:
        self.titles += 1
        title = f"Plan {self.titles}"

        async def go() -> None:
            result = await self.agent.tools.execute("c", "SubmitPlan", {"title": title, "text": f"1. Do {title}.\n"})
            plan = self.agent.plan
            in_flight = plan is not None and plan.state in ("accepted", "awaiting_compaction", "compacted")
            assert result.is_error == in_flight, result.content

        self._do(go, crash)

    @rule(compact=st.booleans(), crash=CRASH)
    def accept(self, compact: bool, crash: tuple[str, str] | None) -> None:
        plan = self.agent.plan
        if plan is None or plan.state not in OPEN_STATES or plan.dispatched:
            try:
                asyncio.run(self.agent.accept_plan(compact=compact))
            except PlanTransitionError:
                return
            raise AssertionError(f"a {plan.state if plan else 'missing'} plan was accepted")
        self._do(functools.partial(self.agent.accept_plan, compact=compact, draft="my draft"), crash)

    @precondition(lambda self: self.agent.plan is not None and self.agent.plan.state in OPEN_STATES)
    @rule()
    def reject(self) -> None:
        self._do(functools.partial(self.agent.reject_plan, "Not like that."), None)

    @rule()
    def compact(self) -> None:
        self._do(functools.partial(self.agent.compact, "by hand"), None)

    @rule()
    def reopen(self) -> None:
        self.agent.engine.session.close()
        self.agent = self._open(self.session_id)

    @precondition(lambda self: next_step(self.agent.plan) is not None)
    @rule(crash=CRASH)
    def resume(self, crash: tuple[str, str] | None) -> None:
        self._do(self.agent.resume_plan, crash)

    @invariant()
    def plans_are_dispatched_at_most_once_and_only_after_their_compaction(self) -> None:
        self.agent.engine.session.flush()
        entries = full_log(self.store, self.session_id)
        for plan_id, facts in dispatch_facts(entries).items():
            assert len(facts["dispatched"]) <= 1, facts
            assert len(facts["messages"]) <= 1, facts
            if facts["messages"]:
                assert facts["dispatched"] and facts["dispatched"][0] < facts["messages"][0], facts
            if facts["dispatched"]:
                at = facts["dispatched"][0]
                accepted = [i for i, e in enumerate(entries[:at]) if isinstance(e, PlanState) and e.state == "accepted"]
                last = entries[accepted[-1]]
                assert isinstance(last, PlanState) and last.plan_id == plan_id
                if last.compact:  # its compaction completed in between: recorded, and its boundary before that
                    window = list(enumerate(entries[accepted[-1] : at], accepted[-1]))
                    done = [(i, e) for i, e in window if isinstance(e, PlanState) and e.state == "compacted"]
                    assert done, f"plan {plan_id} dispatched before its compaction: {facts}"
                    named = done[-1][1]
                    assert isinstance(named, PlanState)
                    if named.compaction_id is not None:
                        ids = [e.id for e in entries[: done[-1][0]] if isinstance(e, CompactionBoundary)]
                        assert named.compaction_id in ids, facts
        whole = None
        for entry in entries:
            whole = advance(whole, entry)
        assert self.agent.plan == whole  # the engine (reading from the boundary) knows what the whole log says

    def teardown(self) -> None:
        self.agent.engine.session.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


PlanMachine.TestCase.settings = settings(
    max_examples=300 if EXHAUSTIVE else 20,
    stateful_step_count=14,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_plan_state_machine = pytest.mark.slow(PlanMachine.TestCase)
