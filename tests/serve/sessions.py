"""Sessions for the inspector's tests, written by a real agent (scripted provider, real tools and store)."""

from __future__ import annotations

import asyncio
import io
import threading
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from lamina.agent import AgentOptions, open_agent
from lamina.attachments import NamedBytes
from lamina.cachesim import AnthropicCacheSimulator
from lamina.compaction import DeterministicSummariser, PrunePolicy
from lamina.engine import ContextEngine
from lamina.placement import AnthropicTarget
from lamina.providers import ScriptedProvider, ScriptedResponse, ScriptedToolCall
from lamina.session import (
    AssistantMessage,
    CompactionBoundary,
    CostDecision,
    Label,
    LocalSessionStore,
    PlanState,
    PlanStateName,
    SessionStore,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from tests.support.engine import TOOLS, Clock, workspace_source

TARGET = AnthropicTarget(model="claude-sonnet-5")
HOSTILE_SCRIPT = "<script>document.title='pwned'</script>"
HOSTILE_MARKUP = "<img src=x onerror=\"document.title='pwned'\"><b>bold?</b>"
_CODE = "    value = compute(item, limit=42)  # a line of code\n"


@dataclass(frozen=True)
class RichSession:
    id: str
    branch_leaf: str
    """The leaf of the branch made from turn 1's answer (after the compaction summarised it)."""
    main_leaf: str
    fork_id: str


def _png() -> bytes:
    image = Image.new("RGB", (64, 48), (200, 40, 40))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _provider(responses: list[ScriptedResponse]) -> ScriptedProvider:
    clock = [1_800_000_000.0]

    def tick() -> float:
        clock[0] += 20.0
        return clock[0]

    return ScriptedProvider(responses, target=TARGET, simulator=AnthropicCacheSimulator(), clock=tick)


def workspace(root: Path) -> Path:
    ws = root / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "AGENTS.md").write_text("# Rules\n- Run the tests after every change.\n")
    (ws / "app.py").write_text("def total(xs):\n    return sum(xs) + 1\n")
    (ws / "notes.txt").write_text("".join(f"note {i}: total() is used by report {i}\n" for i in range(800)))
    return ws


PLAN_STATES: tuple[PlanStateName, ...] = (
    "submitted",
    "accepted",
    "awaiting_compaction",
    "compacted",
    "dispatched",
    "done",
)


def rich_session(store: SessionStore, root: Path) -> RichSession:
    """Four turns with tools, an image, a compaction, a plan, a hidden recovery bridge and a branch."""
    ws = workspace(root)
    read = ScriptedToolCall(name="Read", input={"path": "notes.txt"})
    script = [
        ScriptedResponse(text="Reading the code.", tool_calls=(read,)),
        ScriptedResponse(text="total() adds 1: that is the bug."),
        ScriptedResponse(text="A red rectangle."),
        ScriptedResponse(text="Noted, after the compaction."),
        ScriptedResponse(text="Done as planned."),
        ScriptedResponse(text="Another way: use math.fsum."),
    ]
    provider = _provider(script)
    summariser = DeterministicSummariser()

    async def run() -> tuple[str, str]:
        agent = open_agent(
            store, provider, workspace=ws, options=AgentOptions(mode="explore", summariser=summariser, keep_tokens=200)
        )
        session_id = agent.engine.session.id
        await agent.run_turn("Why is total() wrong? Don't change anything yet.")
        fork = agent.engine.session.leaf_id
        assert fork is not None
        await agent.run_turn("What is in this picture?", attachments=[NamedBytes("red.png", _png())])
        compacted = await agent.compact("the bug")
        assert compacted.status == "compacted", compacted.message
        agent.engine.queue_one_shot("recovery", "Recovered context: the user asked about total().")
        await agent.run_turn("Now plan the fix.")
        await agent.run_turn("Execute the plan.")
        # the plan's transitions, written after its turns: an open plan would make the agent move it forward
        for state in PLAN_STATES:
            agent.engine.record(PlanState(plan_id="plan-1", state=state, plan_path="plans/fix.md", detail=state))
        agent.engine.session.close()
        return session_id, fork

    session_id, fork = asyncio.run(run())
    with store.open(session_id) as session:
        main_leaf = session.leaf_id
        assert main_leaf is not None
        session.branch(fork)
        session.append(Label(target_id=fork, label="another way"))

    async def branch_turn() -> str:
        agent = open_agent(
            store, provider, workspace=ws, session_id=session_id, options=AgentOptions(summariser=summariser)
        )
        await agent.run_turn("Try another way.")
        leaf = agent.engine.session.leaf_id
        agent.engine.session.close()
        assert leaf is not None
        return leaf

    branch_leaf = asyncio.run(branch_turn())
    with store.open(session_id) as session:  # back to the main branch: the session's leaf is main's
        session.branch(main_leaf)
        session.append(Label(target_id=main_leaf, label="main"))
        main_leaf = session.leaf_id or main_leaf
    return RichSession(id=session_id, branch_leaf=branch_leaf, main_leaf=main_leaf, fork_id=fork)


def hostile_session(store: SessionStore) -> str:
    """Script tags, markup and a huge entry in every place a session shows text."""
    with store.create(cwd=f"/tmp/{HOSTILE_MARKUP}", title=f"{HOSTILE_SCRIPT} title") as session:
        session.append(UserMessage(text=f"{HOSTILE_SCRIPT} hello {HOSTILE_MARKUP}"))
        session.append(ToolCall(call_id="c1", name="Read", input={"path": HOSTILE_SCRIPT}))
        session.append(ToolResult(call_id="c1", name="Read", content=HOSTILE_SCRIPT + "\n" + "x" * 1_000_000))
        session.append(
            AssistantMessage(text=f"</pre>{HOSTILE_SCRIPT}", model="claude-sonnet-5", usage=Usage(input=10, output=2))
        )
        session.flush()
        return session.id


@dataclass(frozen=True)
class PricedSession:
    id: str
    boundary: str
    """The compaction boundary written with its decision."""
    boundary_decision: CostDecision


def priced_session(root: Path) -> PricedSession:
    """Eight turns through a real engine that prunes by the cost model, idle gaps of two hours, then a priced boundary.

    The engine logs a priced prune after each long gap and a TTL decision on every turn record (the
    5-minute one after a gap, the 1-hour one otherwise); the boundary is written with the public
    session API, as a compaction the cost model priced.
    """
    ws = root / "priced-ws"
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "AGENTS.md").write_text("Run the tests.\n")
    clock = Clock()
    store = LocalSessionStore(root / "priced-store", clock=clock)
    session = store.create(cwd=str(ws), title="priced decisions")
    policy = PrunePolicy(protect_turns=2, protect_tokens=1_000, minimum_tokens=2_000, smallest_tokens=50)
    engine = ContextEngine(session, stable_source=workspace_source(ws), tools=TOOLS, clock=clock, prune=policy)
    for t in range(8):
        turn = engine.prepare_turn(f"Look at module {t}")
        engine.record(ToolCall(call_id=f"call{t}", name="Read", input={"path": f"m{t}.py"}))
        engine.record(ToolResult(call_id=f"call{t}", name="Read", content=f"M{t}\n" + _CODE * 200))
        engine.record(AssistantMessage(text=f"Read m{t}.py.", model="claude-sonnet-5"))
        engine.commit(turn)
        engine.end_turn()
        clock.advance(120 if t % 3 == 2 else 1)
    session_id = session.id
    engine.close()
    session.close()
    decision = CostDecision(
        action="compact", expected=41_250.5, expected_nothing=58_000.0, horizon=12, cache="cold", reread_chance=0.0
    )
    with store.open(session_id) as session:
        kept = next(e.id for e in reversed(session.entries()) if isinstance(e, UserMessage))
        boundary = session.append(
            CompactionBoundary(
                summary="## Goal\nRead the modules.",
                first_kept_id=kept,
                tokens_before=30_000,
                tokens_after=4_000,
                trigger="threshold",
                decision=decision,
            )
        )
    return PricedSession(id=session_id, boundary=boundary.id, boundary_decision=decision)


def edits_session(store: SessionStore, ws: Path) -> str:
    """A session whose model reads, edits one file and writes another (real tools, scripted model), in `ws`.

    Written in a thread of its own: Playwright's sync API may run an event loop in the caller's.
    """
    ws.mkdir()
    (ws / "AGENTS.md").write_text("# Rules\n- Keep total() pure.\n")
    (ws / "app.py").write_text("def total(xs):\n    return sum(xs) + 1\n")
    reads = (
        ScriptedToolCall(name="Read", input={"path": "AGENTS.md"}),
        ScriptedToolCall(name="Read", input={"path": "app.py"}),
    )
    edit = ScriptedToolCall(name="Edit", input={"path": "app.py", "old_string": "sum(xs) + 1", "new_string": "sum(xs)"})
    write = ScriptedToolCall(name="Write", input={"path": "NOTES.md", "content": "# Notes\n- total() is pure.\n"})
    provider = _provider(
        [
            ScriptedResponse(text="Reading first.", tool_calls=reads),
            ScriptedResponse(text="Fixing it.", tool_calls=(edit, write)),
            ScriptedResponse(text="Fixed."),
        ]
    )

    async def run() -> str:
        agent = open_agent(store, provider, workspace=ws, options=AgentOptions(mode="execute"))
        await agent.run_turn("Fix total() and note it in NOTES.md.")
        agent.engine.session.close()
        return agent.engine.session.id

    made: list[str] = []
    writer = threading.Thread(target=lambda: made.append(asyncio.run(run())))
    writer.start()
    writer.join(60)
    return made[0]
