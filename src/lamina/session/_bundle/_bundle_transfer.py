"""Transfer bundles: one session in one zip file, moved to another store or machine (I/O).

`export_session` writes a bundle atomically; `import_session` checks it whole (`check_zip`) before
it writes anything. The format and the checks are described in docs/session-log.md.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import secrets
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol, TypeAlias, Unpack, runtime_checkable

import msgspec

from lamina._atomic import atomic_write
from lamina.errors import BundleError, SessionIOError, SessionNotFoundError, UsageError
from lamina.session._bridges import TRANSFER_SUMMARY_HEADING, view_summary
from lamina.session._bundle._bundle_adopt import not_adopted
from lamina.session._bundle._bundle_check import BundleLimits, Checked, check_zip, open_zip, read_member
from lamina.session._bundle._bundle_manifest import (
    BUNDLE_FOLDERS,
    BUNDLE_FORMAT,
    BUNDLE_VERSION,
    CHUNK,
    MANIFEST_NAME,
    PROVIDER_FOLDER,
    SESSION_PREFIX,
    SUMMARY_NAME,
    BundleFile,
    BundleManifest,
)
from lamina.session._bundle._bundle_remap import remap_paths
from lamina.session._entries import LogEntry, OutboxRecord, PlanState, StateChange, encode_entry
from lamina.session._jsonl._file_layer import OS_FILES, FileLayer, write_new_file
from lamina.session._jsonl._jsonl_open import LOG_NAME
from lamina.session._jsonl._jsonl_store import CREATING_PREFIX, LocalSessionStore
from lamina.session._jsonl._session_meta import META_NAME, SessionMeta, write_meta
from lamina.session._protocol import (
    VIRTUAL_ROOT,
    ImportKeywords,
    SessionLog,
    SessionStore,
    SessionSummary,
    absolute_cwd,
)
from lamina.session._scan import scan_log
from lamina.session._stamp import SUBFOLDERS, check_session_id, new_session_id
from lamina.session._tree import ProviderView


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What `export_session` wrote."""

    path: Path
    session_id: str
    files: int
    """Members besides the manifest."""
    bytes: int
    """Uncompressed bytes of those members."""
    provider_transcript: bool


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What `import_session` made of a bundle."""

    session_id: str
    source_session_id: str
    cwd: str
    files: int
    bytes: int
    transfer_summary_id: str | None
    """The outbox id of the transfer summary the first turn carries (None: a provider transcript came along)."""


# -- export -----------------------------------------------------------------------------------


def _session_files(folder: Path) -> Iterator[tuple[str, Path]]:
    """The files of a local session folder a bundle carries, as (name in the bundle, path), sorted."""
    yield SESSION_PREFIX + META_NAME, folder / META_NAME
    for top in BUNDLE_FOLDERS:
        root = folder / top
        if not root.is_dir() or root.is_symlink():
            continue
        found: list[tuple[str, Path]] = []
        for here, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if not (Path(here) / d).is_symlink()]
            for name in files:
                path = Path(here) / name
                if path.is_symlink() or not path.is_file() or name.startswith("."):
                    continue  # the store writes regular files only; temporary and foreign files stay behind
                found.append((SESSION_PREFIX + path.relative_to(folder).as_posix(), path))
        yield from sorted(found)


class _ZipOutput:
    """A write-only file for `zipfile` whose every write goes through the store's file layer."""

    def __init__(self, files: FileLayer, fd: int) -> None:
        self._files = files
        self._fd = fd
        self._pos = 0

    def write(self, data: bytes) -> int:
        self._files.write(self._fd, bytes(data))
        self._pos += len(data)
        return len(data)

    def tell(self) -> int:
        return self._pos

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass  # the descriptor is fsynced and closed by its owner


def _log_bytes(log: Path) -> bytes:
    """The log up to its last complete line (a writer may be appending while it is exported)."""
    data = log.read_bytes()
    end = data.rfind(b"\n") + 1
    return data[:end]


@runtime_checkable
class EntryImporter(Protocol):
    """A store that takes a whole session's entries and files at once (the PostgreSQL store).

    It is what an import needs from a store that is not the JSONL one; its sessions show their
    files under `VIRTUAL_ROOT`.
    """

    def new_session_id(self) -> str: ...
    def import_entries(self, entries: Sequence[LogEntry], **keywords: Unpack[ImportKeywords]) -> SessionLog: ...


def export_session(
    store: SessionStore,
    session_id: str,
    out: Path | str,
    *,
    clock: Callable[[], float] = time.time,
) -> ExportResult:
    """Write session `session_id` as one bundle at `out` (replaced atomically if it exists).

    The session is read as it is now (a writer may keep appending; the bundle ends at the last
    complete line, or the last commit). Works with either store: a JSONL session's log is copied
    byte for byte; another store's entries are encoded as the same lines. Raises
    `SessionNotFoundError`, `SessionCorruptError` or `SessionIOError`.
    """
    out = Path(out)
    files: FileLayer = OS_FILES
    with contextlib.ExitStack() as held:
        if isinstance(store, LocalSessionStore):
            with store.open(session_id, writable=False) as local:
                folder, info = str(local.folder), local.info
                leaf, view = local.leaf_id, local.view()
            log = _log_bytes(local.folder / LOG_NAME)
            members: list[tuple[str, Opener]] = [(n, _opener(p)) for n, p in _session_files(local.folder)]
            files = store.files
        else:  # the files are read through the session, kept open until the bundle is written
            session = held.enter_context(store.open(session_id, writable=False))
            entries, info = session.entries(), session.info
            leaf, view = session.leaf_id, session.view()
            folder = session.shown_path()
            log = b"".join(encode_entry(e) + b"\n" for e in entries)
            members = [
                (SESSION_PREFIX + f.name, functools.partial(session.open_file, f.name)) for f in session.list_files()
            ]
        return _write_bundle(out, files, (info, leaf, view, folder, log), members, clock)


Opener: TypeAlias = Callable[[], BinaryIO]
"""Opens one file a bundle carries, for reading."""


def _opener(path: Path) -> Opener:
    def opened() -> BinaryIO:
        return path.open("rb")

    return opened


def _write_bundle(
    out: Path,
    files: FileLayer,
    what: tuple[SessionSummary, str | None, ProviderView, str, bytes],
    members: list[tuple[str, Opener]],
    clock: Callable[[], float],
) -> ExportResult:
    info, leaf, view, folder, log = what
    transcript = any(name.startswith(f"{SESSION_PREFIX}{PROVIDER_FOLDER}/") for name, _ in members)
    summary = view_summary(view, heading=TRANSFER_SUMMARY_HEADING).encode()
    listed: list[BundleFile] = []

    def write_zip(fd: int) -> None:
        with zipfile.ZipFile(_ZipOutput(files, fd), "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
            listed.append(_put_bytes(zf, SESSION_PREFIX + LOG_NAME, log))
            for name, source in members:
                listed.append(_put_file(zf, name, source))
            listed.append(_put_bytes(zf, SUMMARY_NAME, summary))
            manifest = BundleManifest(
                format=BUNDLE_FORMAT,
                version=BUNDLE_VERSION,
                session_id=info.id,
                title=info.title,
                cwd=info.cwd,
                folder=folder,
                created_at=info.created_at,
                exported_at=clock(),
                leaf_id=leaf,
                provider_transcript=transcript,
                files=tuple(listed),
            )
            zf.writestr(MANIFEST_NAME, msgspec.json.format(msgspec.json.encode(manifest)))

    try:
        atomic_write(out, write_zip, steps=files)
    except OSError as exc:
        raise SessionIOError(out, "write the bundle", exc) from None
    return ExportResult(out, info.id, len(listed), sum(f.size for f in listed), transcript)


def _put_bytes(zf: zipfile.ZipFile, name: str, data: bytes) -> BundleFile:
    with zf.open(name, "w") as member:
        member.write(data)
    return BundleFile(name, len(data), hashlib.sha256(data).hexdigest())


def _put_file(zf: zipfile.ZipFile, name: str, source: Opener) -> BundleFile:
    digest = hashlib.sha256()
    size = 0
    with source() as f, zf.open(name, "w", force_zip64=True) as member:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
            member.write(chunk)
            size += len(chunk)
    return BundleFile(name, size, digest.hexdigest())


# -- import -----------------------------------------------------------------------------------


def import_session(
    store: SessionStore,
    path: Path | str,
    *,
    cwd: Path | str | None = None,
    keep_id: bool = False,
    limits: BundleLimits | None = None,
    clock: Callable[[], float] = time.time,
) -> ImportResult:
    """Import a bundle as a new session of `store`; everything is checked before anything is written.

    `cwd` is the session's workspace here (default: the one it had at the source); paths under
    the old workspace and the old session folder are remapped in its entries. The session gets a
    new id unless `keep_id` (then the id must be free here).

    Raises:
        BundleError: the bundle is refused (nothing was written).
        UsageError: no file at `path`, or `keep_id` and the id exists here.
    """
    bundle = Path(path)
    with open_zip(bundle) as zf:
        checked = check_zip(zf, bundle, limits or BundleLimits())
        manifest = checked.manifest
        if keep_id:
            try:
                check_session_id(manifest.session_id)
            except UsageError:
                raise BundleError(bundle, f"invalid session id {manifest.session_id!r}", member=MANIFEST_NAME) from None
            if _exists(store, manifest.session_id):
                raise UsageError(f"session {manifest.session_id} already exists in store {store.location}")
        new_cwd = manifest.cwd if cwd is None else absolute_cwd(str(cwd))
        job = _Import(zf, bundle, checked, new_cwd, keep_id, clock)
        if isinstance(store, LocalSessionStore):
            return _install(store, job)
        if not isinstance(store, EntryImporter):
            raise UsageError(f"store {store.location} cannot import a bundle")
        return _install_entries(store, job)


@dataclass(frozen=True, slots=True)
class _Import:
    """A checked bundle on its way into a store, and how the new session is made."""

    zf: zipfile.ZipFile
    bundle: Path
    checked: Checked
    cwd: str
    """The new session's workspace."""
    keep_id: bool
    clock: Callable[[], float]

    def result(self, session_id: str, size: int, summary_id: str | None) -> ImportResult:
        """What the import made: the new session of `size` bytes (files and log), its transfer summary's id."""
        manifest = self.checked.manifest
        return ImportResult(
            session_id=session_id,
            source_session_id=manifest.session_id,
            cwd=self.cwd,
            files=len(manifest.files),
            bytes=size,
            transfer_summary_id=summary_id,
        )


def _exists(store: SessionStore, session_id: str) -> bool:
    if isinstance(store, LocalSessionStore):
        return store.folder_of(session_id).exists()
    try:
        store.open(session_id, writable=False).close()
    except SessionNotFoundError:
        return False
    return True


def _entries_to_install(
    checked: Checked, bundle: Path, pairs: list[tuple[str, str]], now: float
) -> tuple[bytes, list[LogEntry], str | None, str | None]:
    """The remapped log and its entries, with the leaf and the transfer summary's outbox id.

    The transfer summary is appended as a hidden one-shot when no provider transcript came along.
    """
    manifest = checked.manifest
    log = remap_paths(checked.log, pairs)
    scan = scan_log(log, base_offset=0, first_line=1)
    if scan.corrupt:  # a path that cannot sit in JSON as it was: never for paths the store wrote
        raise BundleError(
            bundle, "the session log cannot be remapped to the new paths", member=SESSION_PREFIX + LOG_NAME
        )
    entries = list(scan.entries)
    leaf = manifest.leaf_id if manifest.leaf_id in {e.id for e in entries} else None
    if leaf is None and entries:
        leaf = entries[-1].id
    for change in not_adopted(entries):  # a bundle is data: none of its author's settings or acceptances
        marker: StateChange | PlanState = msgspec.structs.replace(
            change, id=secrets.token_hex(8), parent_id=leaf, ts=now
        )
        log += encode_entry(marker) + b"\n"
        entries.append(marker)
        leaf = marker.id
    summary_id: str | None = None
    if not manifest.provider_transcript and checked.summary.strip():
        summary_id = "os_" + secrets.token_hex(6)
        record = OutboxRecord(
            id=secrets.token_hex(8),
            parent_id=leaf,
            ts=now,
            part_id=summary_id,
            status="queued",
            kind="transfer_summary",
            text=checked.summary,
            hidden=True,
        )
        log += encode_entry(record) + b"\n"
        entries.append(record)
        leaf = record.id
    return log, entries, leaf, summary_id


def _install_entries(store: EntryImporter, job: _Import) -> ImportResult:
    """Hand the session's files, then its entries, to the store (each file streamed from the bundle, checked).

    The store commits the files first and then the session with all its entries at once
    (nothing half-made is ever listed).
    """
    checked, manifest = job.checked, job.checked.manifest
    now = job.clock()
    session_id = manifest.session_id if job.keep_id else store.new_session_id()
    log, entries, leaf, summary_id = _entries_to_install(
        checked, job.bundle, [(manifest.folder, VIRTUAL_ROOT), (manifest.cwd, job.cwd)], now
    )
    listed = {f.path: f for f in manifest.files}
    members = [
        (name[len(SESSION_PREFIX) :], info)
        for name, info in sorted(checked.infos.items())
        if name.startswith(SESSION_PREFIX)
        and name not in (SESSION_PREFIX + LOG_NAME, SESSION_PREFIX + META_NAME)
        and name[len(SESSION_PREFIX) :].split("/")[0] in SUBFOLDERS
    ]
    # read again (and checked again) while put: the bundle may have changed since the check
    files = [(name, read_member(job.zf, job.bundle, info, listed[SESSION_PREFIX + name])) for name, info in members]
    store.import_entries(
        entries,
        session_id=session_id,
        cwd=job.cwd,
        title=manifest.title[:200],
        created_at=manifest.created_at or now,
        leaf_id=leaf,
        files=files,
    ).close()
    return job.result(session_id, sum(info.file_size for _, info in members) + len(log), summary_id)


def _write_members(files: FileLayer, job: _Import, folder: Path, *, existing: set[Path]) -> int:
    """Write the bundle's session files (not its log or metadata) under `folder`, each durable with its folder.

    Returns:
        The bytes written.
    """
    made = {folder, *existing}
    listed = {f.path: f for f in job.checked.manifest.files}
    written = 0
    for name, info in sorted(job.checked.infos.items()):
        if not name.startswith(SESSION_PREFIX) or name in (SESSION_PREFIX + LOG_NAME, SESSION_PREFIX + META_NAME):
            continue
        target = folder / name[len(SESSION_PREFIX) :]
        for parent in reversed(target.relative_to(folder).parents[:-1]):
            if folder / parent not in made:
                files.mkdir(folder / parent)
                made.add(folder / parent)
        # read again (and checked again) while written: the bundle may have changed since the check
        data = b"".join(read_member(job.zf, job.bundle, info, listed[name]))
        write_new_file(files, target, data)
        written += len(data)
    for made_folder in sorted(made, key=lambda p: len(p.parts), reverse=True):
        files.fsync_dir(made_folder)
    return written


def _install(store: LocalSessionStore, job: _Import) -> ImportResult:
    """Build the session under a hidden folder from the checked bundle, then rename it into place."""
    checked, manifest = job.checked, job.checked.manifest
    files = store.files
    try:
        store.root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SessionIOError(store.root, "create the store folder", exc) from None
    now = job.clock()
    session_id = manifest.session_id if job.keep_id else new_session_id(now)
    folder = store.folder_of(session_id)
    staging = store.root / f"{CREATING_PREFIX}{session_id}"
    log, entries, leaf, summary_id = _entries_to_install(
        checked, job.bundle, [(manifest.folder, str(folder)), (manifest.cwd, job.cwd)], now
    )
    meta = SessionMeta(
        id=session_id,
        created_at=manifest.created_at or now,
        updated_at=now,
        cwd=job.cwd,
        title=manifest.title[:200],
        leaf_id=leaf,
        leaf_offset=len(log),
        log_size=len(log),
        entry_count=len(entries),
    )
    written = 0
    try:
        files.mkdir(staging)
        for name in SUBFOLDERS:
            files.mkdir(staging / name)
        written = _write_members(files, job, staging, existing={staging / n for n in SUBFOLDERS})
        write_new_file(files, staging / LOG_NAME, log)
        files.fsync_dir(staging)
        write_meta(staging, meta, files)  # fsyncs the staging folder
        if folder.exists():
            raise UsageError(f"session {session_id} already exists in store {store.root}")
        files.replace(staging, folder)
        files.fsync_dir(store.root)
    except OSError as exc:
        _discard(staging)
        raise SessionIOError(staging, "write the imported session", exc) from None
    except BaseException:
        _discard(staging)
        raise
    return job.result(session_id, written + len(log), summary_id)


def _discard(staging: Path) -> None:
    """Remove a half-built import (never listed: its name is hidden)."""
    import shutil

    shutil.rmtree(staging, ignore_errors=True)
