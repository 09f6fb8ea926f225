"""Health checks and repairs of stored sessions, like `git fsck` (I/O).

`check_session` reads a whole session read-only and lists what is wrong with it: torn tails,
skipped lines, broken parent links (dangling, lost, cycles), duplicate ids, a byte order mark,
stale or broken metadata, a log shorter than its metadata's record (cut or emptied), symbolic
links in place of session files, leftover torn files and stale locks. `repair_session` writes a clean log
beside the damaged one and swaps it in atomically; the original stays, under a new name, never
deleted, and every change is listed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from lamina.errors import SessionCorruptError, SessionNotFoundError
from lamina.session._entries import encode_entry
from lamina.session._jsonl._jsonl_open import LOG_NAME
from lamina.session._jsonl._jsonl_store import CREATING_PREFIX, DELETING_PREFIX, LocalSessionStore, linked_files
from lamina.session._jsonl._jsonl_write import JsonlSession
from lamina.session._jsonl._session_meta import META_NAME, SessionMeta, read_meta
from lamina.session._jsonl._writer_lock import lock_state
from lamina.session._session_core import with_parent
from lamina.session._session_files import open_for_reading

Severity = Literal["damage", "stale", "note"]
"""`damage`: the log itself is hurt (exit status 1); `stale`: a cache or lock lags behind; `note`: information."""

_SEVERITY_ORDER: Final = {"damage": 0, "stale": 1, "note": 2}


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing `check` found."""

    kind: str
    severity: Severity
    message: str
    file: str
    """The file it concerns, relative to the session folder."""
    line: int | None = None
    offset: int | None = None
    entry_id: str | None = None


@dataclass(slots=True)
class SessionHealth:
    """What `check` found in one session folder."""

    id: str
    entries: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def damaged(self) -> bool:
        return any(f.severity == "damage" for f in self.findings)

    @property
    def ok(self) -> bool:
        return not any(f.severity != "note" for f in self.findings)


@dataclass(frozen=True, slots=True)
class RepairResult:
    """What `repair` changed: every change in words, and where the original log was kept."""

    id: str
    changes: tuple[str, ...]
    original_kept_in: Path | None
    """None when there was nothing to repair in the log."""


def check_store(store: LocalSessionStore) -> list[SessionHealth]:
    """Check every session of the store, and report folders left by interrupted creates."""
    if not store.root.is_dir():
        return []
    rows: list[SessionHealth] = []
    for folder in sorted(store.root.iterdir()):
        if folder.name.startswith(CREATING_PREFIX) and folder.is_dir():
            message = "an interrupted create left this folder (never listed; safe to delete)"
            rows.append(SessionHealth(folder.name, 0, [Finding("interrupted_create", "stale", message, ".")]))
        elif folder.name.startswith(DELETING_PREFIX) and folder.is_dir():
            message = "an interrupted delete left this folder (never listed; removed by the next `sessions list`)"
            rows.append(SessionHealth(folder.name, 0, [Finding("interrupted_delete", "stale", message, ".")]))
        elif not folder.name.startswith(".") and folder.is_dir():
            rows.append(check_session(store, folder.name))
    return rows


def check_session(store: LocalSessionStore, session_id: str) -> SessionHealth:
    """Read a whole session without changing anything and say what is wrong with it."""
    folder = store.folder_of(session_id)
    if not folder.is_dir():
        raise SessionNotFoundError(session_id, store.root)
    health = SessionHealth(session_id)
    found = health.findings
    linked = linked_files(folder)
    for name in linked:
        message = "a symbolic link in place of a session file or folder (never followed: the session is refused)"
        found.append(Finding("symlink", "damage", message, name))
    if linked:
        return health
    if not (folder / LOG_NAME).is_file():
        found.append(Finding("missing_log", "damage", "session log is missing (or not a file)", LOG_NAME))
        return health
    disk_meta = None
    try:
        disk_meta = read_meta(folder)
    except SessionCorruptError as exc:
        found.append(
            Finding("bad_metadata", "stale", f"{exc.reason} (rebuilt from the log on the next open)", META_NAME)
        )
    with store.open(session_id, writable=False) as session:
        session.load_all()
        health.entries = session.loaded_count()
        found.extend(_log_findings(session))
        if disk_meta is not None:
            found.extend(_meta_findings(session, disk_meta))
    found.extend(_leftovers(folder))
    found.sort(key=lambda f: (_SEVERITY_ORDER[f.severity], f.offset if f.offset is not None else -1))
    return health


def _log_findings(session: JsonlSession) -> list[Finding]:
    report = session.report
    out: list[Finding] = []
    if report.bom:
        out.append(Finding("bom", "damage", "the log starts with a UTF-8 byte order mark", LOG_NAME, 1, 0))
    for c in report.corrupt_lines:
        out.append(Finding("corrupt_line", "damage", f"skipped line: {c.reason}", LOG_NAME, c.line, c.offset))
    for d in report.duplicate_ids:
        message = f"duplicate entry id {d.entry_id} (first at byte {d.first_offset}); skipped"
        out.append(Finding("duplicate_id", "damage", message, LOG_NAME, d.line, d.offset, d.entry_id))
    offsets = dict(zip(session._order, session._offset_list, strict=True))
    for r in report.relinks:
        out.append(Finding(r.problem, "damage", r.describe(), LOG_NAME, None, offsets.get(r.entry_id), r.entry_id))
    if report.torn_tail is not None:
        t = report.torn_tail
        message = f"torn last line ({t.length} bytes): a writer died mid-append; cut on the next append"
        out.append(Finding("torn_tail", "damage", message, LOG_NAME, None, t.offset))
    if report.log_cut is not None:
        message = f"{report.log_cut.describe()}; writers are refused until `sessions repair` accepts it"
        out.append(Finding("cut_log", "damage", message, LOG_NAME, None, report.log_cut.size))
    if report.unknown_entries:
        message = f"{report.unknown_entries} entries of a newer type or version (kept, skipped by the view)"
        out.append(Finding("unknown_entries", "note", message, LOG_NAME))
    return out


def _meta_findings(session: JsonlSession, meta: SessionMeta) -> list[Finding]:
    facts = {
        "log_size": (meta.log_size, session._size),
        "entry_count": (meta.entry_count, session.loaded_count()),
        "leaf_id": (meta.leaf_id, session.leaf_id),
        "resume_offset": (meta.resume_offset, session._resume_offset()),
    }
    wrong = [f"{name} {said!r} (log: {actual!r})" for name, (said, actual) in facts.items() if said != actual]
    if not wrong:
        return []
    held, _ = lock_state(session.folder)
    why = "a writer has the session open, so this may be current" if held else "reconciled on the next writable open"
    return [Finding("stale_metadata", "stale", f"metadata says {'; '.join(wrong)}; {why}", META_NAME)]


def _leftovers(folder: Path) -> list[Finding]:
    out: list[Finding] = []
    for torn in sorted(folder.glob(f"{LOG_NAME}.torn-*")):
        message = f"torn bytes an earlier repair kept ({torn.stat().st_size} bytes)"
        out.append(Finding("torn_file", "note", message, torn.name))
    for kept in sorted(folder.glob(f"{LOG_NAME}.damaged-*")):
        out.append(Finding("damaged_original", "note", "the original log, kept by `sessions repair`", kept.name))
    for tmp in sorted(folder.glob(".*.tmp")):
        out.append(Finding("temporary_file", "stale", "a temporary file left by an interrupted write", tmp.name))
    held, name = lock_state(folder)
    if held:
        out.append(Finding("locked", "note", f"open for writing by {name or 'a writer'}", ".lock"))
    elif name:
        message = f"stale lock file naming {name}: that writer is gone (the next writer takes over)"
        out.append(Finding("stale_lock", "stale", message, ".lock"))
    return out


def repair_session(store: LocalSessionStore, session_id: str, *, wait: float = 0.0) -> RepairResult:
    """Rewrite a clean log beside the damaged one, swap it in atomically and rebuild the metadata.

    Kept: every entry that survives, byte for byte unless its parent link had to be mended.
    Dropped from the new log (and still in the original, kept as `log.jsonl.damaged-<n>`): corrupt
    lines, duplicate ids, a torn tail, a byte order mark. A log cut or emptied from outside is accepted
    as it is (what was cut is gone; the metadata is rebuilt, so writers may open it again). Takes the
    write lock.
    """
    with store._open(session_id, writable=True, wait=wait, accept_cut=True) as session:
        session.load_all()
        report = session.report
        changes: list[str] = []
        if report.log_cut is not None:
            changes.append(f"accepted the log as it is ({report.log_cut.describe()}); metadata rebuilt")
        if report.meta_problem:
            changes.append(f"metadata rebuilt from the log: {report.meta_problem}")
        if report.bom:
            changes.append("removed the UTF-8 byte order mark at the start of the log")
        for c in report.corrupt_lines:
            changes.append(f"dropped the corrupt line at {c.where()}: {c.reason}")
        for d in report.duplicate_ids:
            changes.append(f"dropped the second entry with id {d.entry_id} at {d.where()}")
        for r in report.relinks:
            changes.append(r.describe())
        torn = report.torn_tail
        if torn is not None and torn.saved_to is None:
            changes.append(f"dropped the torn last line at byte {torn.offset} ({torn.length} bytes)")
        log_damaged = bool(report.bom or report.corrupt_lines or report.duplicate_ids or report.relinks or torn)
        if not log_damaged:
            return RepairResult(session_id, tuple(changes), None)
        kept = session._rewrite_log(_clean_log(session))
        changes.append(f"the original log is kept in {kept.name}")
        return RepairResult(session_id, tuple(changes), kept)


def _clean_log(session: JsonlSession) -> bytes:
    """Every surviving entry in file order; unchanged lines byte for byte, mended ones re-encoded."""
    with open_for_reading(session.log_path) as f:
        original = f.read()
    lines: list[bytes] = []
    for entry_id, offset in zip(session._order, session._offset_list, strict=True):
        if entry_id in session._links:
            lines.append(encode_entry(with_parent(session._entries[entry_id], session._links[entry_id])))
            continue
        end = original.find(b"\n", offset)
        lines.append(original[offset : end if end != -1 else len(original)])
    return b"".join(line + b"\n" for line in lines)
