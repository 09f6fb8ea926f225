"""The writer of the crash test: appends forever, reporting each durable append."""

from __future__ import annotations

import random
from collections.abc import Callable

from lamina.session import AssistantMessage, LocalSessionStore, OutboxRecord, ToolCall, ToolResult, UserMessage


def write_forever(root: str, session_id: str, seed: int, report: Callable[[str], None]) -> None:
    """Open the session and append until killed; `report` gets "ready" then "D <id>" per durable entry."""
    rng = random.Random(seed)
    store = LocalSessionStore(root)
    session = store.open(session_id)
    report("ready\n")
    pending: list[str] = []
    n = 0
    while True:
        n += 1
        big = "x" * rng.choice((10, 200, 5_000, 200_000))
        kind = rng.randrange(5)
        entry: UserMessage | AssistantMessage | ToolCall | ToolResult | OutboxRecord
        if kind == 0:
            entry = UserMessage(text=f"request {n} {big}")
        elif kind == 1:
            entry = AssistantMessage(text=f"answer {n}")
        elif kind == 2:
            entry = ToolCall(call_id=f"c{n}", name="Read", input={"path": f"f{n}.py"})
        elif kind == 3:
            entry = ToolResult(call_id=f"c{n}", name="Read", content=big)
        else:
            entry = OutboxRecord(part_id=f"p{n}", status="queued", kind="note", text="one-shot")
        stamped = session.append(entry)  # OutboxRecord is critical: fsynced before append returns
        if isinstance(stamped, OutboxRecord):
            report(f"D {stamped.id}\n")
        else:
            pending.append(stamped.id)
        if n % 7 == 0:  # a turn boundary: group commit
            session.flush()
            report("".join(f"D {i}\n" for i in pending))
            pending.clear()
