"""Invariant 6 under power loss: what `flush()` (or a critical append) acknowledged survives a power cut.

The store's writes go through a simulated disk that drops every byte and folder change no fsync
covered. A random workload (appends, critical appends, flushes, branches, compactions, reopens,
new sessions) runs until the power goes out at a random operation; the store is then reopened
from what survived and checked: every acknowledged entry loads, in order, on its path; the leaf
never goes back past the acknowledged one; `meta.json` agrees with the log; no session is unreadable.
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import pytest

from lamina.session import (
    AssistantMessage,
    CompactionBoundary,
    Entry,
    JsonlSession,
    LocalSessionStore,
    LogEntry,
    OutboxRecord,
    PlanState,
    ToolCall,
    ToolResult,
    UserMessage,
)
from lamina.session._jsonl._jsonl_open import LOG_NAME
from lamina.session._jsonl._session_meta import META_NAME, SessionMeta, read_meta
from tests.conftest import EXHAUSTIVE
from tests.session.jsonl._power import PowerCut, SimulatedDisk

POWER_LOSSES = 1_200 if EXHAUSTIVE else 40
STORE_LIFETIME = 40

pytestmark = pytest.mark.timeout(6 * 3600 if EXHAUSTIVE else 300)
"""The exhaustive run is long by design; the suite-wide time limit is for the normal run."""


@dataclass
class _Acked:
    """What the store has acknowledged for one session: entries in file order, and the leaf."""

    entries: list[LogEntry] = field(default_factory=list)
    leaf: str | None = None


@dataclass
class _Tally:
    losses: int = 0
    acknowledged: int = 0
    torn_tails: int = 0
    operations: int = 0


def _random_entry(rng: random.Random, n: int) -> Entry:
    kind = rng.randrange(6)
    big = "x" * rng.choice((5, 300, 3_000))
    if kind == 0:
        return UserMessage(text=f"request {n} {big}")
    if kind == 1:
        return AssistantMessage(text=f"answer {n}")
    if kind == 2:
        return ToolCall(call_id=f"c{n}", name="Read", input={"path": f"f{n}.py"})
    if kind == 3:
        return ToolResult(call_id=f"c{n}", name="Read", content=big)
    if kind == 4:
        return OutboxRecord(part_id=f"p{n}", status="queued", kind="note", text="one-shot")
    return PlanState(plan_id=f"plan{n}", state="submitted", plan_path="plans/p.md")


def _workload(
    store: LocalSessionStore,
    session: JsonlSession,
    acked: dict[str, _Acked],
    rng: random.Random,
    counter: list[int],
) -> None:
    """Random operations until the power goes out (raises `PowerCut`)."""
    pending: list[LogEntry] = []
    mine = acked[session.id]

    def ack() -> None:
        mine.entries.extend(pending)
        pending.clear()
        mine.leaf = session.leaf_id

    while True:
        counter[0] += 1
        roll = rng.random()
        if roll < 0.55:
            entry = session.append(_random_entry(rng, counter[0]))
            if isinstance(entry, (OutboxRecord, PlanState)):  # critical: fsynced before append returns
                pending.append(entry)
                ack()
            else:
                pending.append(entry)
        elif roll < 0.62:
            pending.append(session.append(AssistantMessage(text=f"durable {counter[0]}"), durable=True))
            ack()
        elif roll < 0.80:
            session.flush()
            ack()
        elif roll < 0.85 and session.leaf_id is not None:
            path = session.path()
            kept = rng.choice(path)
            pending.append(
                session.append(
                    CompactionBoundary(
                        summary="summary", first_kept_id=kept.id, tokens_before=100, tokens_after=10, trigger="manual"
                    )
                )
            )
            ack()
        elif roll < 0.90 and mine.entries:
            session.flush()
            ack()
            session.branch(rng.choice(mine.entries).id)
            ack()
        elif roll < 0.95:
            session.close()
            ack()
            session = store.open(session.id)
            mine = acked[session.id]
            mine.leaf = session.leaf_id
        else:
            other = store.create(cwd="/elsewhere")
            acked[other.id] = _Acked()
            other.append(UserMessage(text="second session"))
            other.flush()
            acked[other.id].entries.append(other.entries()[-1])
            acked[other.id].leaf = other.leaf_id
            other.close()


def _check_after_loss(store: LocalSessionStore, acked: dict[str, _Acked], tally: _Tally) -> None:
    listed = {row.id: row for row in store.list()}
    assert set(acked) <= set(listed), f"acknowledged sessions lost: {set(acked) - set(listed)}"
    for session_id, mine in acked.items():
        assert listed[session_id].problem is None, listed[session_id].problem
        with store.open(session_id) as session:
            report = session.report
            everything = session.entries()
            by_id = {e.id: e for e in everything}
            assert not report.corrupt_lines and not report.relinks and not report.duplicate_ids, report.messages()
            tally.torn_tails += report.torn_tail is not None
            lost = [e.id for e in mine.entries if by_id.get(e.id) != e]
            assert not lost, f"{session_id}: acknowledged entries lost or changed: {lost[:5]}"
            index = {e.id: i for i, e in enumerate(everything)}
            positions = [index[e.id] for e in mine.entries]
            assert positions == sorted(positions), f"{session_id}: acknowledged entries out of order"
            if mine.leaf is not None:
                assert mine.leaf in {e.id for e in session.path()}, f"{session_id}: the leaf went back"
            session.view()
            meta = read_meta(session.folder)
            assert meta.leaf_id == session.leaf_id
            assert meta.entry_count == len(everything)
            assert meta.log_size == session._size
            tally.acknowledged += len(mine.entries)
            # what this open loaded is durable now (a writable open fsyncs the log)
            mine.entries = everything
            mine.leaf = session.leaf_id


@pytest.mark.slow
def test_power_loss_at_random_moments_loses_nothing_acknowledged(tmp_path: Path) -> None:
    rng = random.Random(20261130)
    tally = _Tally()
    counter = [0]
    for round_no in range(POWER_LOSSES):
        if round_no % STORE_LIFETIME == 0:  # a fresh store now and then keeps every round small
            root = tmp_path / f"store-{round_no}"
            disk = SimulatedDisk(root, seed=round_no)
            store = LocalSessionStore(root, files=disk)
            with store.create(cwd="/project") as first:
                acked = {first.id: _Acked()}
            main_id = first.id
        session = store.open(rng.choice([main_id, *acked]) if rng.random() < 0.2 else main_id)
        acked[session.id].leaf = session.leaf_id
        acked[session.id].entries = session.entries()
        disk.cut_after(rng.randrange(1, 80))
        with pytest.raises(PowerCut):
            _workload(store, session, acked, rng, counter)
        disk.power_loss(rng)
        tally.losses += 1
        _check_after_loss(store, acked, tally)
    tally.operations = counter[0]
    assert tally.losses == POWER_LOSSES
    assert tally.acknowledged > 0 and tally.torn_tails > 0, tally
    print(f"power losses: {tally}")


def _one_session(tmp_path: Path) -> tuple[SimulatedDisk, LocalSessionStore, JsonlSession]:
    root = tmp_path / "store"
    disk = SimulatedDisk(root)
    store = LocalSessionStore(root, files=disk)
    return disk, store, store.create()


def test_flush_makes_appends_survive_a_power_loss(tmp_path: Path) -> None:
    # removing the fsync from flush() makes this fail: the appends are in the page cache only
    disk, store, session = _one_session(tmp_path)
    written = [session.append(UserMessage(text=f"turn {n}")) for n in range(3)]
    session.flush()
    disk.power_loss()
    with store.open(session.id) as reopened:
        assert reopened.entries() == written


def test_appends_without_flush_may_be_lost_but_nothing_else_is(tmp_path: Path) -> None:
    disk, store, session = _one_session(tmp_path)
    kept = session.append(UserMessage(text="flushed"))
    session.flush()
    session.append(UserMessage(text="never flushed"))
    disk.power_loss()  # drops every unsynced byte
    with store.open(session.id) as reopened:
        assert reopened.entries() == [kept]
        assert reopened.report.torn_tail is None


def test_critical_append_survives_a_power_loss_without_flush(tmp_path: Path) -> None:
    disk, store, session = _one_session(tmp_path)
    before = session.append(UserMessage(text="plain"))
    critical = session.append(OutboxRecord(part_id="p1", status="queued", kind="note", text="hi"))
    disk.power_loss()
    with store.open(session.id) as reopened:
        assert reopened.entries() == [before, critical]


@pytest.mark.slow
def test_meta_json_is_the_old_or_the_new_one_at_every_power_cut(tmp_path: Path) -> None:
    root = tmp_path / "store"
    disk = SimulatedDisk(root)
    store = LocalSessionStore(root, files=disk)
    with store.create() as session:
        session.append(UserMessage(text="first"))
    folder = session.folder
    seen = {(folder / META_NAME).read_bytes()}
    cut_points = 0
    for n in range(1, 12):
        writer = store.open(session.id)
        writer.append(UserMessage(text=f"more {n}"))
        writer.flush()
        disk.cut_after(n)
        try:
            writer.branch(writer.path()[0].id)  # an urgent metadata write
            writer.close()
        except PowerCut:
            cut_points += 1
        disk.power_loss()
        raw = (folder / META_NAME).read_bytes()
        meta = msgspec.json.decode(raw, type=SessionMeta)  # never missing, never half-written
        assert meta.id == session.id and raw != b""
        assert not list(folder.glob(".meta.json.*"))  # a temporary file never outlives its folder's fsync
        seen.add(raw)
    assert cut_points > 0 and len(seen) > 1


def test_a_torn_tail_saved_by_a_repair_survives_a_power_loss(tmp_path: Path) -> None:
    # the copy of the torn bytes is made durable (file and folder) before the log is cut
    root = tmp_path / "store"
    with LocalSessionStore(root).create() as session:
        kept = session.append(UserMessage(text="kept"))
    with open(session.folder / LOG_NAME, "ab") as f:
        f.write(b'{"type":"user","id":"torn","par')
    disk = SimulatedDisk(root)  # everything on disk now, the torn bytes too, is durable
    store = LocalSessionStore(root, files=disk)
    reopened = store.open(session.id)
    reopened.append(UserMessage(text="after"))  # repairs the tail, then appends (not flushed)
    saved = reopened.report.torn_tail
    assert saved is not None and saved.saved_to is not None
    disk.cut_after(1)
    with pytest.raises(PowerCut):
        reopened.flush()
    disk.power_loss()
    assert saved.saved_to.read_bytes() == b'{"type":"user","id":"torn","par'
    with store.open(session.id) as again:
        assert again.entries()[0] == kept
        assert again.report.corrupt_lines == []


def test_an_interrupted_create_leaves_no_half_made_session(tmp_path: Path) -> None:
    root = tmp_path / "store"
    disk = SimulatedDisk(root)
    store = LocalSessionStore(root, files=disk)
    for n in range(1, 14):
        disk.cut_after(n)
        with contextlib.suppress(PowerCut):
            store.create().close()
        disk.power_loss()
        assert all(row.problem is None for row in store.list())
