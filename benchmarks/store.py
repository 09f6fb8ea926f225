"""The session store: append throughput, flat resume, full-load speed, and the Agents SDK peer.

Figures:

- `append_per_s_group_commit` / `append_per_s_fsync_each`: entries appended per second through
  `JsonlSession.append` to fresh sessions, with a turn boundary (`flush`) every 10 entries; the
  second one also fsyncs every append (`durable=True`). The full run also appends 20k entries to
  one session without a compaction and names that rate in the note.
- `resume_ms_10k` / `resume_ms_100k` / `resume_ms_1m`: `store.open(id)` + `view()` + `close()` of a
  session whose latest compaction boundary sits 200 entries from the end. Resume reads only from
  the boundary's first kept entry, so the three should be flat (within 2x of each other).
- `full_load_mb_per_s`: `open` + `entries()` (the whole log) of a big session, in MB of log per second.
- `full_load_ms_100k`: `open` + `entries()` of the 100k-entry session: every entry decoded into its
  typed struct (the lines `meta.json`'s canonical record covers in one msgspec call, their CRC-32
  worked out on a second thread beside it; no per-line Python decoding).
- `peer_sqlite_session_reload_ms_100k` / `peer_sqlite_session_add_items_per_s`: the OpenAI Agents
  SDK's file-backed `SQLiteSession` holding the same 100k items as Responses input item dicts,
  reloaded by a fresh session with `get_items()` (what the SDK does to resume), and filled with
  `add_items` one turn (10 items) per call.
- `peer_sqlite_session_get_items_limit_ms_100k`: a fresh `SQLiteSession` on the same 100k items
  reading only the latest N with `get_items(limit=N)`, N being the number of entries our resume
  loads (the boundary's kept entries and what follows): the like-for-like peer of our resume.
- `resume_vs_peer_limit_ratio`: `peer_sqlite_session_get_items_limit_ms_100k / resume_ms_100k`, and
  `full_load_vs_peer_ratio`: `peer_sqlite_session_reload_ms_100k / full_load_ms_100k`. Both are
  speed-ups: above 1 means Lamina is faster for the same work. The note of the second also gives
  the ratio of the two sides' CPU time (the process's, every thread), which other jobs on a busy
  machine disturb far less than wall-clock time.
- `export_mb_per_s` / `import_mb_per_s`: `export_session` and `import_session` (into another store)
  of the 100k-entry session, in MB of session files (uncompressed) per second; the import checks
  every member before writing anything, so it reads the bundle twice.
- `branch_ms_100k`: `ContextEngine.branch` on a freshly opened 100k-entry session, to an entry
  half way back (the whole log is loaded, the branch's view built); the note gives a branch to an
  entry still in the provider view.

The big logs are written directly (encoded entries plus `meta.json`, with the canonical record an
appending writer leaves: the canonical prefix, its links to earlier entries and its distinct,
increasing ids) rather than through `append`, which would take minutes for a million
entries; the benchmark checks that a resume loads only the tail and that the provider view starts
at the boundary. Every file is in a fresh temporary folder and the OS page cache is warm (the files
were just written), so resume and reload times are warm-cache times for both sides.
"""

from __future__ import annotations

import asyncio
import gc
import json
import shutil
import statistics
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import Figure, ratio
from lamina.engine import ContextEngine
from lamina.session import JsonlSession, LocalSessionStore, export_session, import_session
from lamina.session._entries import (
    AssistantMessage,
    CompactionBoundary,
    LogEntry,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
    encode_entry,
)
from lamina.session._jsonl._jsonl_open import LOG_NAME
from lamina.session._jsonl._session_meta import SessionMeta, write_meta

TURN: int = 10
"""Entries per turn: a user message, then three rounds of assistant / tool call / tool result."""
TAIL: int = 200
"""The latest compaction boundary sits this many entries from the end of a big log."""
KEPT_BEFORE: int = 20
"""Entries before the boundary that it keeps verbatim (its `first_kept_id` is the first of them)."""
MAX_TAIL_LOAD: int = 1_000
"""A resume that loads more entries than this is not reading from the boundary."""
_T0: float = 1_750_000_000.0

_PROSE = (
    "the session store keeps an append only log of entries so that a resume reads from the latest "
    "compaction boundary and never from the start while the provider view holds the summary and the "
    "kept entries the model needs to continue the task without losing the user's constraints"
)
_WORDS = _PROSE.split(" ")


def _text(seed: int, length: int) -> str:
    """Deterministic prose of about `length` characters."""
    out: list[str] = []
    size = 0
    i = seed
    while size < length:
        word = _WORDS[(i * 7 + seed) % len(_WORDS)]
        out.append(word)
        size += len(word) + 1
        i += 1
    return " ".join(out)


_POOL = 64
_USER_TEXTS = [_text(s, 160) for s in range(_POOL)]
_ASSISTANT_TEXTS = [_text(s + 100, 260) for s in range(_POOL)]
_RESULT_TEXTS = [_text(s + 200, 420) for s in range(_POOL)]
_TOOLS = ("read_file", "bash", "grep", "edit_file")


def _make_entry(i: int, stamp: dict[str, Any] | None = None) -> LogEntry:
    """The `i`-th entry of a realistic session; unstamped (id, parent and ts left empty) unless
    `stamp` gives them."""
    extra = stamp or {}
    k = i % TURN
    p = (i // TURN) % _POOL
    if k == 0:
        return UserMessage(text=_USER_TEXTS[p], **extra)
    round_, kind = divmod(k - 1, 3)
    if kind == 0:
        return AssistantMessage(
            text=_ASSISTANT_TEXTS[(p + round_) % _POOL],
            model="example-model-1",
            usage=Usage(input=1_200 + p, output=180 + round_ * 40, cache_read=24_000 + i % 9_000, cache_write=900),
            stop_reason="tool_use",
            turn_id=f"turn_{i // TURN:08d}",
            **extra,
        )
    call_id = f"call_{i // TURN:08d}_{round_}"
    tool = _TOOLS[(p + round_) % len(_TOOLS)]
    if kind == 1:
        return ToolCall(
            call_id=call_id,
            name=tool,
            input={"path": f"src/pkg/module_{p:02d}.py", "command": f"sed -n {p},{p + 80}p", "timeout_s": 30},
            **extra,
        )
    return ToolResult(call_id=call_id, name=tool, content=_RESULT_TEXTS[(p + round_) % _POOL], **extra)


def _entry_id(i: int) -> str:
    return f"{i:016x}"


def _peer_item(entry: LogEntry) -> dict[str, Any]:
    """The same entry as a Responses-style input item, as the Agents SDK stores it."""
    if isinstance(entry, UserMessage):
        return {"role": "user", "content": entry.text}
    if isinstance(entry, AssistantMessage):
        return {"role": "assistant", "content": entry.text}
    if isinstance(entry, ToolCall):
        return {
            "type": "function_call",
            "call_id": entry.call_id,
            "name": entry.name,
            "arguments": json.dumps(entry.input),
        }
    assert isinstance(entry, ToolResult)
    return {"type": "function_call_output", "call_id": entry.call_id, "output": entry.content}


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1_000.0


# -- append -----------------------------------------------------------------------------------


def _append_once(store: LocalSessionStore, entries: list[LogEntry], *, durable: bool) -> float:
    """Entries per second appending `entries` to a fresh session, flushing every `TURN`."""
    session = store.create(cwd="/project")
    started = time.perf_counter()
    for i, entry in enumerate(entries, 1):
        session.append(entry, durable=durable)
        if i % TURN == 0:
            session.flush()
    session.flush()
    elapsed = time.perf_counter() - started
    session.close()
    return len(entries) / elapsed


# -- big logs ---------------------------------------------------------------------------------


def _build_log(store: LocalSessionStore, n: int, progress: Callable[[str], None]) -> tuple[str, int]:
    """A session of `n` entries whose latest boundary is `TAIL` entries from the end.

    The log is written directly and `meta.json` is written to match it, exactly as a session that
    appended these entries and flushed would have left it. Returns the session id and log size.
    """
    created = store.create(cwd="/project", title="benchmark session")
    session_id = created.id
    folder = created.folder
    created.close()
    boundary_at = n - TAIL
    first_kept = boundary_at - KEPT_BEFORE
    resume_offset = 0
    offset = 0
    step = max(n // 5, 100_000)
    parent: str | None = None
    crc = 0
    chunk: list[bytes] = []
    with open(folder / LOG_NAME, "wb") as out:
        for i in range(n):
            entry_id = _entry_id(i)
            stamp = {"id": entry_id, "parent_id": parent, "ts": _T0 + i * 0.5}
            parent = entry_id
            if i == boundary_at:
                entry: LogEntry = CompactionBoundary(
                    summary=_text(i, 1_500),
                    first_kept_id=_entry_id(first_kept),
                    tokens_before=180_000,
                    tokens_after=22_000,
                    trigger="threshold",
                    **stamp,
                )
            else:
                entry = _make_entry(i, stamp)
            if i == first_kept:
                resume_offset = offset
            line = encode_entry(entry) + b"\n"
            chunk.append(line)
            offset += len(line)
            if len(chunk) == 4_096:
                block = b"".join(chunk)
                out.write(block)
                crc = zlib.crc32(block, crc)
                chunk.clear()
            if (i + 1) % step == 0 and i + 1 < n:
                progress(f"writing a {n:,}-entry log: {i + 1:,} entries, {offset / 1e6:,.0f} MB")
        block = b"".join(chunk)
        out.write(block)
        crc = zlib.crc32(block, crc)
    now = _T0 + n * 0.5
    meta = SessionMeta(
        id=session_id,
        created_at=_T0,
        updated_at=now,
        cwd="/project",
        title="benchmark session",
        leaf_id=_entry_id(n - 1),
        leaf_offset=offset,
        resume_offset=resume_offset,
        log_size=offset,
        entry_count=n,
        canonical_size=offset,  # every line was written by `encode_entry`, as appends record it
        canonical_crc32=crc,
        canonical_linked=offset,  # each entry's parent is the one before it, as appends to the leaf record it
        canonical_distinct=offset,  # and the ids increase, as appends with made ids record it
        canonical_max_id=_entry_id(n - 1),
    )
    write_meta(folder, meta)
    return session_id, offset


def _check_resume(session: JsonlSession, n: int) -> tuple[int, str]:
    """Entries a resume loaded, and why it is wrong (empty when it read only the tail and the view
    starts at the boundary)."""
    problems: list[str] = []
    loaded = session.loaded_count()
    if loaded > MAX_TAIL_LOAD:
        problems.append(f"resume loaded {loaded:,} of {n:,} entries (expected about {TAIL + KEPT_BEFORE})")
    view = session.view()
    if view.boundary is None or view.boundary.id != _entry_id(n - TAIL):
        problems.append("the provider view does not start at the latest compaction boundary")
    elif len(view.entries) != KEPT_BEFORE + TAIL - 1:
        problems.append(f"the view holds {len(view.entries)} entries, expected {KEPT_BEFORE + TAIL - 1}")
    if not session.report.clean:
        problems.append("; ".join(session.report.messages()))
    return loaded, "; ".join(problems)


def _resume_once(store: LocalSessionStore, session_id: str) -> float:
    """Seconds to open a session to continue it, build its provider view and close it."""
    started = time.perf_counter()
    session = store.open(session_id)
    session.view()
    session.close()
    return time.perf_counter() - started


def _full_load_mb_per_s(store: LocalSessionStore, session_id: str, n: int, size: int, runs: int) -> float:
    rates: list[float] = []
    for _ in range(runs):
        gc.collect()
        started = time.perf_counter()
        session = store.open(session_id)
        loaded = len(session.entries())
        session.close()
        elapsed = time.perf_counter() - started
        if loaded != n:
            raise RuntimeError(f"full load returned {loaded:,} entries, the log holds {n:,}")
        rates.append(size / 1e6 / elapsed)
        del session
    return statistics.median(rates)


# -- peer: the Agents SDK's SQLiteSession -----------------------------------------------------


def _batches(items: list[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


async def _peer_add_once(sqlite_session: Any, db: Path, items: list[dict[str, Any]]) -> float:
    """Items per second through `add_items`, one turn per call, into a fresh file db."""
    session = sqlite_session("bench", db_path=db)
    started = time.perf_counter()
    for batch in _batches(items, TURN):
        await session.add_items(batch)
    elapsed = time.perf_counter() - started
    session.close()
    return len(items) / elapsed


async def _peer_fill(sqlite_session: Any, db: Path, items: list[dict[str, Any]]) -> None:
    session = sqlite_session("bench", db_path=db)
    for batch in _batches(items, 1_000):
        await session.add_items(batch)
    session.close()


async def _peer_reload_once(sqlite_session: Any, db: Path, n: int, *, limit: int | None = None) -> float:
    """Seconds for a fresh session on `db` to reload its items with `get_items()` (the SDK's resume),
    or only the latest `limit` of them."""
    started = time.perf_counter()
    fresh = sqlite_session("bench", db_path=db)
    loaded = await fresh.get_items(limit=limit)
    fresh.close()
    elapsed = time.perf_counter() - started
    expected = n if limit is None else limit
    if len(loaded) != expected:
        raise RuntimeError(f"SQLiteSession reloaded {len(loaded):,} items, expected {expected:,}")
    return elapsed


def _full_load_ms(store: LocalSessionStore, session_id: str, n: int, cpu: list[float]) -> float:
    """Milliseconds to open a session and load every entry of its log (its CPU time goes to `cpu`)."""
    gc.collect()
    started, started_cpu = time.perf_counter(), time.process_time()
    session = store.open(session_id)
    loaded = len(session.entries())
    session.close()
    elapsed = time.perf_counter() - started
    cpu.append(time.process_time() - started_cpu)
    if loaded != n:
        raise RuntimeError(f"full load returned {loaded:,} entries, the log holds {n:,}")
    return elapsed * 1_000.0


def _peer_reload_cpu(sqlite_session: Any, db: Path, n: int, cpu: list[float]) -> float:
    """`_peer_reload_once` of everything, its CPU time (every thread of the process) going to `cpu`."""
    started_cpu = time.process_time()
    elapsed = asyncio.run(_peer_reload_once(sqlite_session, db, n))
    cpu.append(time.process_time() - started_cpu)
    return elapsed


def _load_peer() -> tuple[Any, str]:
    """The Agents SDK's `SQLiteSession` class, or `None` and why it is missing."""
    try:
        from agents import SQLiteSession
    except Exception as exc:  # the peer is optional: report and go on
        return None, f"peer skipped: cannot import agents.SQLiteSession ({type(exc).__name__}: {exc})"
    return SQLiteSession, ""


# -- run --------------------------------------------------------------------------------------


def run(*, quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    group_count, fsync_count = 2_000, 500
    append_runs = 3 if quick else 7
    long_count = 0 if quick else 20_000
    resume_runs = 31 if quick else 101
    load_runs, reload_runs = (3, 3) if quick else (5, 5)
    transfer_runs = 3 if quick else 5
    sizes = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000}
    labels = {"10k": "10k", "100k": "100k", "1m": "1M"}
    full_load_key = "100k" if quick else "1m"
    peer_n = sizes["100k"]
    sqlite_session, peer_note = _load_peer()
    if peer_note:
        progress(peer_note)

    with tempfile.TemporaryDirectory(prefix="lamina-bench-store-") as tmp:
        root = Path(tmp)
        store = LocalSessionStore(root / "sessions")
        peer_folder = root / "peer"
        peer_folder.mkdir()
        peer_items = [_peer_item(_make_entry(i)) for i in range(peer_n)]

        # append: ours and the peer's runs alternate, so a noisy moment hits both sides
        progress(f"appending {group_count:,} entries, flush every {TURN}, and the peer's add_items (x{append_runs})")
        entries = [_make_entry(i) for i in range(max(group_count, fsync_count, long_count))]
        group_rates: list[float] = []
        peer_add_rates: list[float] = []
        for run_no in range(append_runs):
            group_rates.append(_append_once(store, entries[:group_count], durable=False))
            if sqlite_session is not None:
                db = peer_folder / f"add-{run_no}.db"
                peer_add_rates.append(asyncio.run(_peer_add_once(sqlite_session, db, peer_items[:group_count])))
        progress(f"appending {fsync_count:,} entries, fsync on each (x{append_runs})")
        each_rates = [_append_once(store, entries[:fsync_count], durable=True) for _ in range(append_runs)]
        long_rate = 0.0
        if long_count:
            progress(f"appending {long_count:,} entries to one session with no compaction")
            long_rate = _append_once(store, entries[:long_count], durable=False)

        # resume: build the three logs, check them, then time them round-robin
        built: dict[str, tuple[str, int]] = {}
        problems: dict[str, str] = {}
        loaded: dict[str, int] = {}
        for key, n in sizes.items():
            progress(f"writing a {n:,}-entry log")
            built[key] = _build_log(store, n, progress)
            with store.open(built[key][0]) as session:
                loaded[key], problems[key] = _check_resume(session, n)
            if problems[key]:
                progress(f"WARNING resume of {n:,} entries: {problems[key]}")
        peer_db = peer_folder / "reload.db"
        if sqlite_session is not None:
            progress(f"peer: filling a SQLiteSession with {peer_n:,} items")
            asyncio.run(_peer_fill(sqlite_session, peer_db, peer_items))
        del peer_items, entries
        progress(f"resuming the three sessions (x{resume_runs}) and reloading the peer (x{reload_runs})")
        resume_samples: dict[str, list[float]] = {key: [] for key in sizes}
        reload_samples: list[float] = []
        limit_samples: list[float] = []
        full_100k_samples: list[float] = []
        full_cpu: list[float] = []
        reload_cpu: list[float] = []
        limit = loaded["100k"]
        for run_no in range(resume_runs):
            for key in sizes:
                resume_samples[key].append(_resume_once(store, built[key][0]))
            if sqlite_session is not None:
                limit_samples.append(asyncio.run(_peer_reload_once(sqlite_session, peer_db, peer_n, limit=limit)))
            if run_no < reload_runs:  # the whole 100k, ours and the peer's, side by side
                full_100k_samples.append(_full_load_ms(store, built["100k"][0], sizes["100k"], full_cpu))
                if sqlite_session is not None:
                    gc.collect()
                    reload_samples.append(_peer_reload_cpu(sqlite_session, peer_db, peer_n, reload_cpu))
        resume = {key: _median_ms(samples) for key, samples in resume_samples.items()}
        full_100k = statistics.median(full_100k_samples)

        progress(f"full load of the {sizes[full_load_key]:,}-entry log (x{load_runs})")
        full_id, full_size = built[full_load_key]
        full_load = _full_load_mb_per_s(store, full_id, sizes[full_load_key], full_size, load_runs)

        progress(f"export, import and branch of the 100k-entry session (x{transfer_runs})")
        transfer = _transfer(store, root, built["100k"][0], sizes["100k"], transfer_runs)

    group = statistics.median(group_rates)
    peer_add = statistics.median(peer_add_rates) if peer_add_rates else 0.0
    peer_reload = _median_ms(reload_samples) if reload_samples else 0.0
    peer_limit = _median_ms(limit_samples) if limit_samples else 0.0
    spread = max(resume.values()) / min(resume.values())
    flat_note = f"max/min over 10k..1M = {spread:.2f}x"
    if spread > 2.0:
        flat_note += " — NOT FLAT (more than 2x apart)"
        progress(f"WARNING resume times are not within 2x: {resume}")
    warm = "warm page cache"
    long_note = f"; {long_count:,} appends to one session without compaction: {long_rate:,.0f}/s" if long_count else ""
    figures = [
        Figure(
            "append_per_s_group_commit",
            group,
            "entries/s",
            ratio_vs=ratio(group, peer_add, "peer_sqlite_session_add_items_per_s") if peer_add_rates else None,
            note=f"median of {append_runs} fresh sessions x {group_count:,} appends, flush every {TURN}"
            + long_note
            + _extra(peer_note),
        ),
        Figure(
            "append_per_s_fsync_each",
            statistics.median(each_rates),
            "entries/s",
            note=f"median of {append_runs} fresh sessions x {fsync_count:,} appends, durable=True, flush every {TURN}",
        ),
    ]
    for key in sizes:
        parts = [
            f"{labels[key]} entries, {built[key][1] / 1e6:,.0f} MB log, boundary {TAIL} from the end, "
            f"{loaded[key]} entries loaded"
        ]
        parts.append(f"median of {resume_runs} (min {min(resume_samples[key]) * 1e3:.2f}), {warm}")
        if key == "1m":
            parts.append(flat_note)
        if problems[key]:
            parts.append(f"WARNING: {problems[key]}")
        ratio_vs = None
        if key == "100k" and limit_samples:  # like for like: the peer reading the same number of latest items
            ratio_vs = ratio(resume[key], peer_limit, "peer_sqlite_session_get_items_limit_ms_100k")
        figures.append(Figure(f"resume_ms_{key}", resume[key], "ms", ratio_vs=ratio_vs, note="; ".join(parts)))
    figures.append(
        Figure(
            "full_load_mb_per_s",
            full_load,
            "MB/s",
            note=f"open + entries() of the {labels[full_load_key]}-entry log "
            f"({full_size / 1e6:,.0f} MB), median of {load_runs}, {warm}",
        )
    )
    figures.append(
        Figure(
            "full_load_ms_100k",
            full_100k,
            "ms",
            ratio_vs=ratio(full_100k, peer_reload, "peer_sqlite_session_reload_ms_100k") if reload_samples else None,
            note=f"open + entries() of the 100k-entry log ({built['100k'][1] / 1e6:,.0f} MB), every entry a typed "
            f"struct, median of {reload_runs}, {warm}",
        )
    )
    if sqlite_session is not None:
        figures.append(
            Figure(
                "resume_vs_peer_limit_ratio",
                peer_limit / resume["100k"],
                "x",
                note=f"peer get_items(limit={limit}) {peer_limit:.2f} ms / our resume {resume['100k']:.2f} ms for the "
                f"same {limit} entries of a 100k session (above 1: Lamina faster)",
            )
        )
        figures.append(
            Figure(
                "full_load_vs_peer_ratio",
                peer_reload / full_100k,
                "x",
                note=f"peer get_items() {peer_reload:,.0f} ms / our open + entries() {full_100k:,.0f} ms for all "
                f"{peer_n:,} entries; in CPU time {_median_ms(reload_cpu):,.0f} ms / {_median_ms(full_cpu):,.0f} ms "
                f"= {statistics.median(reload_cpu) / statistics.median(full_cpu):.2f}x (above 1: Lamina faster; "
                "goal at least 3)",
            )
        )
        figures.append(
            Figure(
                "peer_sqlite_session_get_items_limit_ms_100k",
                peer_limit,
                "ms",
                note=f"fresh SQLiteSession + get_items(limit={limit}) on {peer_n:,} items, median of {resume_runs}, "
                f"{warm}",
            )
        )
        figures.append(
            Figure(
                "peer_sqlite_session_add_items_per_s",
                peer_add,
                "items/s",
                note=f"agents.SQLiteSession, file db (WAL), add_items of {TURN} items per call, "
                f"median of {append_runs} fresh dbs x {group_count:,} items",
            )
        )
        figures.append(
            Figure(
                "peer_sqlite_session_reload_ms_100k",
                peer_reload,
                "ms",
                note=f"fresh SQLiteSession + get_items() of all {peer_n:,} items (no compaction point to start "
                f"from), median of {reload_runs}, {warm}",
            )
        )
    figures.extend(transfer.figures(transfer_runs))
    return figures


@dataclass
class _Transfer:
    """Export, import and branch timings of one session."""

    bytes: int = 0
    """Uncompressed bytes a bundle carries (the log, metadata, files, the transfer summary)."""
    bundle_bytes: int = 0
    export_s: list[float] = field(default_factory=list)
    import_s: list[float] = field(default_factory=list)
    branch_old_ms: list[float] = field(default_factory=list)
    branch_recent_ms: list[float] = field(default_factory=list)

    def figures(self, runs: int) -> list[Figure]:
        mb = self.bytes / 1e6
        bundle = f"{mb:,.0f} MB of session files in a {self.bundle_bytes / 1e6:,.0f} MB zip"
        return [
            Figure(
                "export_mb_per_s",
                mb / statistics.median(self.export_s),
                "MB/s",
                note=f"export_session of the 100k-entry session: {bundle}, sha256 of every file, fsync and "
                f"rename; median of {runs}",
            ),
            Figure(
                "import_mb_per_s",
                mb / statistics.median(self.import_s),
                "MB/s",
                note=f"import_session of that bundle into another store: every member read and checked before "
                f"anything is written, then read again while written, paths remapped, fsynced; median of {runs}",
            ),
            Figure(
                "branch_ms_100k",
                statistics.median(self.branch_old_ms),
                "ms",
                note=f"ContextEngine.branch on a freshly opened 100k-entry session to an entry 50,000 back (summarised "
                f"by its compaction: the whole log is loaded and the branch's 50k-entry view built); a branch to an "
                f"entry in the view takes {statistics.median(self.branch_recent_ms):.1f} ms; median of {runs}",
            ),
        ]


def _transfer(store: LocalSessionStore, root: Path, session_id: str, n: int, runs: int) -> _Transfer:
    result = _Transfer()
    for run_no in range(runs):
        bundle = root / f"bundle-{run_no}.zip"
        gc.collect()
        started = time.perf_counter()
        exported = export_session(store, session_id, bundle)
        result.export_s.append(time.perf_counter() - started)
        result.bytes, result.bundle_bytes = exported.bytes, bundle.stat().st_size
        target = LocalSessionStore(root / f"imported-{run_no}")
        gc.collect()
        started = time.perf_counter()
        imported = import_session(target, bundle, cwd="/elsewhere")
        result.import_s.append(time.perf_counter() - started)
        if imported.source_session_id != session_id:
            raise RuntimeError("the imported session does not name its source")
        shutil.rmtree(target.root)
        bundle.unlink()
    for run_no in range(runs):
        for point, samples in ((_entry_id(n // 2), result.branch_old_ms), (_entry_id(n - 10), result.branch_recent_ms)):
            with store.open(session_id) as session:
                engine = ContextEngine(session, stable_source=tuple)
                gc.collect()
                started = time.perf_counter()
                branch = engine.branch(point)
                samples.append((time.perf_counter() - started) * 1e3)
                # at a user message the branch starts just before it (its text is offered back)
                leaf = session.get(point).parent_id if branch.kind == "user" else point
                if branch.entry_id != point or session.leaf_id != leaf:
                    raise RuntimeError(f"branch {run_no} did not move the leaf to {leaf}")
                engine.branch(_entry_id(n - 1))  # back to the leaf the log was built with
    return result


def _extra(note: str) -> str:
    return f"; {note}" if note else ""
