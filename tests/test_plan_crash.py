"""Invariant 7 under SIGKILL: a plan survives a death at every transition, and is dispatched exactly once.

Each case forks a child (Lamina already imported, so a case costs a fraction of a second) that
runs a planning turn and "Accept & Compact" through the real session store, and SIGKILLs itself
through the store's file layer just before, or just after (fsynced), the line of one transition
is written: each `PlanState`, the plan's compaction boundary and the execution message. The test
then reopens the session in this process, lets the engine resume the plan, and checks the whole
log: the plan is there, it was compacted once and dispatched once, and never before its
compaction completed.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from lamina.engine import next_step
from lamina.providers import ScriptedProvider, ScriptedResponse
from lamina.session import LocalSessionStore, OsFiles
from tests.plan_flow import (
    dispatch_facts,
    full_log,
    make_workspace,
    open_plan_agent,
    plan_until_submitted,
    planning_script,
)

POINTS: dict[str, tuple[bytes, bytes]] = {
    "submitted": (b'{"type":"plan_state"', b'"state":"submitted"'),
    "accepted": (b'{"type":"plan_state"', b'"state":"accepted"'),
    "awaiting_compaction": (b'{"type":"plan_state"', b'"state":"awaiting_compaction"'),
    "boundary": (b'{"type":"compaction"', b'"plan_id":"plan_'),
    "compacted": (b'{"type":"plan_state"', b'"state":"compacted"'),
    "dispatched": (b'{"type":"plan_state"', b'"state":"dispatched"'),
    "message": (b'{"type":"user"', b"I approved the plan"),
    "done": (b'{"type":"plan_state"', b'"state":"done"'),
}
"""Each transition's line in the log: how it starts, and what else it holds."""


class _DyingFiles(OsFiles):
    """The real disk, except that the process SIGKILLs itself around one chosen line."""

    def __init__(self, point: tuple[bytes, bytes], when: str) -> None:
        self.point = point
        self.when = when
        self.armed = False

    def write(self, fd: int, data: bytes) -> None:
        start, holds = self.point
        hit = data.startswith(start) and holds in data
        if hit and self.when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        super().write(fd, data)
        self.armed = self.armed or hit

    def fsync(self, fd: int) -> None:
        super().fsync(fd)
        if self.armed:  # just after: the line is durable, nothing after it happened
            os.kill(os.getpid(), signal.SIGKILL)


def _child(root: Path, workspace: Path, session_id: str, point: str, when: str) -> None:
    store = LocalSessionStore(root, files=_DyingFiles(POINTS[point], when))
    agent = open_plan_agent(store, workspace, [], session_id=session_id)
    agent.provider = ScriptedProvider(planning_script(agent.engine.session.plans_dir))

    async def run() -> None:
        await plan_until_submitted(agent)
        await agent.accept_plan(compact=True, draft="rename it afterwards")

    asyncio.run(run())


def _run_child(root: Path, workspace: Path, session_id: str, point: str, when: str) -> int:
    pid = os.fork()
    if pid == 0:  # never return into the test runner
        try:
            _child(root, workspace, session_id, point, when)
        finally:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    return status


@pytest.mark.slow
@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("point", list(POINTS))
def test_a_sigkill_at_a_transition_never_loses_the_plan_nor_dispatches_it_twice(
    tmp_path: Path, point: str, when: str
) -> None:
    workspace = make_workspace(tmp_path)
    root = tmp_path / "store"
    store = LocalSessionStore(root)
    first = open_plan_agent(store, workspace, [])
    session_id = first.engine.session.id
    first.engine.session.close()

    status = _run_child(root, workspace, session_id, point, when)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, f"the child was not killed: {status}"

    again = open_plan_agent(store, workspace, [ScriptedResponse(text="Done after the crash.")], session_id=session_id)
    plan = again.plan
    if point == "submitted" and when == "before":
        assert plan is None  # never recorded: the model's SubmitPlan call never got its result
        again.engine.session.close()
        assert dispatch_facts(full_log(store, session_id)) == {}
        return
    assert plan is not None and plan.title == "Fix total" and plan.text  # the plan is present
    if plan.state == "submitted":  # died before the acceptance was durable: the user accepts again
        asyncio.run(again.accept_plan(compact=True, draft="rename it afterwards"))
    else:
        assert plan.draft_input == "rename it afterwards"  # the unsent draft came back with it
        asyncio.run(again.resume_plan())
    final = again.plan
    assert final is not None and next_step(final) is None
    again.engine.session.close()

    entries = full_log(store, session_id)
    (facts,) = dispatch_facts(entries).values()
    assert len(facts["boundaries"]) == 1, facts  # compacted once: again only if it had not completed
    assert len(facts["dispatched"]) == 1 and len(facts["messages"]) == 1, facts  # dispatched exactly once
    assert facts["boundaries"][0] < facts["dispatched"][0] < facts["messages"][0], facts  # never before it
    expected = "dispatched" if (point, when) == ("done", "before") else "done"
    assert facts["states"][-1] == expected, facts
