"""Transfer bundles: one session in one zip file, moved to another store or machine (I/O).

A bundle is a zip archive holding a `manifest.json` (the session's id, title, workspace and
folder at the source, and every other member with its size and sha256), the session folder's
files under `session/` (`log.jsonl`, `meta.json`, `attachments/`, `data/`, `plans/`, and
`provider/`, where a backend keeps a copy of the provider's own transcript), and
`transfer_summary.txt`: the conversation, most recent first, written by the source (F13).

`export_session` writes the bundle beside its destination and renames it into place: a crash
leaves the old file or the whole new one. `import_session` reads and checks the whole bundle
before it writes anything: member names as the archive stores them (no NUL or other control or
invisible character, absolute paths, `..`, backslashes, symlinks, duplicates or names outside the
layout), sizes (declared and actual, total, compression ratio:
no zip bombs), every sha256 against the manifest and the log's entries. A bundle that fails any
check raises `BundleError` and leaves the store as it was. The session is then built under a
hidden folder and renamed into place (nothing half-made is ever listed), with a new id unless
asked to keep it, and with the workspace and session-folder paths its entries name remapped to
the new ones. Without a provider transcript in the bundle, the imported log ends with the
transfer summary as a hidden one-shot bridge, so the first turn carries it, exactly once.

The store-specific parts are `_session_files` (what to export) and `_install` (how a verified
bundle becomes a session); another store provides those two for its sessions.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import stat
import time
import unicodedata
import zipfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Annotated, Final, Literal, Protocol, runtime_checkable

import msgspec

from lamina.errors import BundleError, SessionIOError, SessionNotFoundError, UsageError
from lamina.session._bridges import TRANSFER_SUMMARY_HEADING, view_summary
from lamina.session._entries import LogEntry, OutboxRecord, encode_entry
from lamina.session._files import OS_FILES, FileLayer, write_new_file
from lamina.session._jsonl_open import LOG_NAME
from lamina.session._meta import META_NAME, ForkOrigin, SessionMeta, write_meta
from lamina.session._protocol import SessionLog, SessionStore
from lamina.session._scan import scan_log
from lamina.session._stamp import SUBFOLDERS, check_session_id, new_session_id
from lamina.session._store import CREATING_PREFIX, LocalSessionStore

BUNDLE_FORMAT: Final = "lamina-session-bundle"
BUNDLE_VERSION: Final = 1
MANIFEST_NAME: Final = "manifest.json"
SUMMARY_NAME: Final = "transfer_summary.txt"
SESSION_PREFIX: Final = "session/"
PROVIDER_FOLDER: Final = "provider"
"""A session's copy of its provider's own transcript, when a backend keeps one."""
BUNDLE_FOLDERS: Final = (*SUBFOLDERS, PROVIDER_FOLDER)
_CHUNK: Final = 1 << 20
_Sha256 = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]
_Size = Annotated[int, msgspec.Meta(ge=0)]


@dataclass(frozen=True, slots=True)
class BundleLimits:
    """What an import accepts at most; anything beyond is refused before a byte is written."""

    max_members: int = 100_000
    max_total_bytes: int = 16 * 1024**3
    """Uncompressed bytes of all members together, as declared and as read."""
    max_ratio: int = 200
    """Uncompressed / compressed size of a member larger than `ratio_floor` (a zip bomb's is ~1000)."""
    ratio_floor: int = 1024 * 1024
    max_manifest_bytes: int = 64 * 1024 * 1024
    max_summary_bytes: int = 256 * 1024


class BundleFile(msgspec.Struct, frozen=True):
    """One member of a bundle as the manifest lists it."""

    path: str
    size: _Size
    sha256: _Sha256


class BundleManifest(msgspec.Struct, frozen=True, kw_only=True):
    """The bundle's table of contents (`manifest.json`)."""

    format: Literal["lamina-session-bundle"]
    version: Annotated[int, msgspec.Meta(ge=1, le=BUNDLE_VERSION)]
    session_id: str
    title: str = ""
    cwd: str = ""
    """The session's workspace at the source."""
    folder: str = ""
    """The session's folder at the source (paths in its entries start with it)."""
    created_at: float = 0.0
    exported_at: float = 0.0
    leaf_id: str | None = None
    provider_transcript: bool = False
    """Whether `session/provider/` holds the provider's own transcript."""
    files: tuple[BundleFile, ...]


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


class _Output:
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
    """A store that takes a whole session's entries at once (the PostgreSQL store): what an import needs
    from a store that is not the JSONL one."""

    def new_session_id(self) -> str: ...
    def files_dir_of(self, session_id: str) -> Path: ...
    def import_entries(
        self,
        entries: Sequence[LogEntry],
        *,
        session_id: str | None = None,
        cwd: str = "",
        title: str = "",
        created_at: float | None = None,
        forked_from: ForkOrigin | None = None,
        leaf_id: str | None = None,
    ) -> SessionLog: ...


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
    if isinstance(store, LocalSessionStore):
        with store.open(session_id, writable=False) as local:
            folder, info = local.folder, local.info
            leaf, view = local.leaf_id, local.view()
        log = _log_bytes(folder / LOG_NAME)
        members = list(_session_files(folder))
        files = store.files
    else:
        with store.open(session_id, writable=False) as session:
            entries, info = session.entries(), session.info
            leaf, view = session.leaf_id, session.view()
            folder = session.data_dir.parent
        log = b"".join(encode_entry(e) + b"\n" for e in entries)
        members = [(name, path) for name, path in _session_files(folder) if name != SESSION_PREFIX + META_NAME]
    transcript = any(name.startswith(f"{SESSION_PREFIX}{PROVIDER_FOLDER}/") for name, _ in members)
    summary = view_summary(view, heading=TRANSFER_SUMMARY_HEADING).encode()
    tmp = out.with_name(f".{out.name}.partial-{secrets.token_hex(4)}")
    listed: list[BundleFile] = []
    try:
        fd = files.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with zipfile.ZipFile(_Output(files, fd), "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
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
                    folder=str(folder),
                    created_at=info.created_at,
                    exported_at=clock(),
                    leaf_id=leaf,
                    provider_transcript=transcript,
                    files=tuple(listed),
                )
                zf.writestr(MANIFEST_NAME, msgspec.json.format(msgspec.json.encode(manifest)))
            files.fsync(fd)
        finally:
            files.close(fd)
        files.replace(tmp, out)
        files.fsync_dir(out.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise SessionIOError(out, "write the bundle", exc) from None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return ExportResult(out, info.id, len(listed), sum(f.size for f in listed), transcript)


def _put_bytes(zf: zipfile.ZipFile, name: str, data: bytes) -> BundleFile:
    with zf.open(name, "w") as member:
        member.write(data)
    return BundleFile(name, len(data), hashlib.sha256(data).hexdigest())


def _put_file(zf: zipfile.ZipFile, name: str, source: Path) -> BundleFile:
    digest = hashlib.sha256()
    size = 0
    with source.open("rb") as f, zf.open(name, "w", force_zip64=True) as member:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            member.write(chunk)
            size += len(chunk)
    return BundleFile(name, size, digest.hexdigest())


# -- checking a bundle ------------------------------------------------------------------------

_WINDOWS_DRIVE: Final = re.compile(r"^[A-Za-z]:")
_UNSEEN_CATEGORIES: Final = frozenset({"Cc", "Cf", "Zl", "Zp"})
"""Control (C0, DEL, C1), format (bidi, zero-width) and line-breaking characters: never in a name the store writes."""


def _check_stored_name(bundle: Path, info: zipfile.ZipInfo) -> None:
    """Refuse a member whose name, as the archive stores it, holds a control or invisible character.

    `ZipInfo.filename` stops at a NUL (`ok.txt<NUL>../../x` reads as `ok.txt`, and other tools may
    read it otherwise), so the stored name is checked: `orig_filename`, the central directory's
    bytes decoded whole. Opening a member compares its local header's name with that same name.
    """
    stored = info.orig_filename
    bad = next((c for c in stored if unicodedata.category(c) in _UNSEEN_CATEGORIES), None)
    if bad is not None:
        reason = f"member name holds a control or invisible character (U+{ord(bad):04X})"
        raise BundleError(bundle, reason, member=stored)


def _check_name(bundle: Path, name: str) -> None:
    """Refuse a member name that could leave the session folder or is not part of the layout."""
    if not name or "\\" in name or "\0" in name or name.startswith("/") or _WINDOWS_DRIVE.match(name):
        raise BundleError(bundle, "absolute or malformed member name", member=name)
    parts = PurePosixPath(name).parts
    if any(p in ("", ".", "..") for p in name.split("/")):
        raise BundleError(bundle, "member name with '..', '.' or an empty part (path traversal)", member=name)
    if name in (MANIFEST_NAME, SUMMARY_NAME, SESSION_PREFIX + LOG_NAME, SESSION_PREFIX + META_NAME):
        return
    if len(parts) < 3 or parts[0] != SESSION_PREFIX.rstrip("/") or parts[1] not in BUNDLE_FOLDERS:
        raise BundleError(bundle, "member outside the session layout", member=name)
    if any(p.startswith(".") for p in parts):
        raise BundleError(bundle, "hidden member name", member=name)


def _is_link(info: zipfile.ZipInfo) -> bool:
    mode = info.external_attr >> 16
    return info.create_system == 3 and stat.S_ISLNK(mode)


@dataclass(frozen=True, slots=True)
class _Checked:
    manifest: BundleManifest
    infos: dict[str, zipfile.ZipInfo]
    log: bytes
    summary: str


def _read_member(zf: zipfile.ZipFile, bundle: Path, info: zipfile.ZipInfo, expected: BundleFile) -> Iterator[bytes]:
    """The member's bytes in chunks, checked against its declared size and the manifest's sha256 at the end."""
    digest = hashlib.sha256()
    size = 0
    name = info.filename
    try:
        member = zf.open(info)
    except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, ValueError, NotImplementedError) as exc:
        raise BundleError(bundle, f"member cannot be read: {exc}", member=name) from None
    with member:
        while True:
            try:
                chunk = member.read(_CHUNK)
            except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, ValueError, zlib.error) as exc:
                raise BundleError(bundle, f"member cannot be read: {exc}", member=name) from None
            if not chunk:
                break
            size += len(chunk)
            if size > expected.size or size > info.file_size:
                raise BundleError(bundle, "member is larger than declared (a zip bomb?)", member=name)
            digest.update(chunk)
            yield chunk
    if size != expected.size:
        raise BundleError(bundle, f"member holds {size} bytes, the manifest says {expected.size}", member=name)
    if digest.hexdigest() != expected.sha256:
        raise BundleError(bundle, "sha256 does not match the manifest (a bad checksum)", member=name)


def _check(zf: zipfile.ZipFile, bundle: Path, limits: BundleLimits) -> _Checked:
    infos = zf.infolist()
    if len(infos) > limits.max_members:
        raise BundleError(bundle, f"more than {limits.max_members} members")
    by_name: dict[str, zipfile.ZipInfo] = {}
    folded: set[str] = set()
    declared = 0
    for info in infos:
        _check_stored_name(bundle, info)
        name = info.filename
        if info.is_dir():
            _check_name(bundle, f"{name.rstrip('/')}/x")  # a folder entry: only its name matters
            continue
        _check_name(bundle, name)
        if name in by_name or name.casefold() in folded:
            raise BundleError(bundle, "duplicate member name", member=name)
        if _is_link(info):
            raise BundleError(bundle, "member is a symbolic link", member=name)
        declared += info.file_size
        if declared > limits.max_total_bytes:
            raise BundleError(bundle, f"members declare more than {limits.max_total_bytes} bytes")
        if info.file_size > limits.ratio_floor and info.file_size > limits.max_ratio * max(info.compress_size, 1):
            raise BundleError(bundle, "member compresses more than a real file does (a zip bomb?)", member=name)
        by_name[name] = info
        folded.add(name.casefold())
    manifest_info = by_name.pop(MANIFEST_NAME, None)
    if manifest_info is None:
        raise BundleError(bundle, f"no {MANIFEST_NAME}: not a Lamina session bundle")
    if manifest_info.file_size > limits.max_manifest_bytes:
        raise BundleError(bundle, "manifest is too large", member=MANIFEST_NAME)
    try:
        with zf.open(manifest_info) as f:
            raw = f.read(limits.max_manifest_bytes + 1)
        manifest = msgspec.json.decode(raw, type=BundleManifest)
    except msgspec.ValidationError as exc:
        raise BundleError(bundle, f"invalid manifest: {exc}", member=MANIFEST_NAME) from None
    except (msgspec.DecodeError, zipfile.BadZipFile, OSError, EOFError) as exc:
        raise BundleError(bundle, f"manifest cannot be read: {exc}", member=MANIFEST_NAME) from None
    listed = {f.path: f for f in manifest.files}
    if len(listed) != len(manifest.files):
        raise BundleError(bundle, "the manifest lists a file twice", member=MANIFEST_NAME)
    for name in listed.keys() - by_name.keys():
        raise BundleError(bundle, "listed in the manifest but missing", member=name)
    for name in by_name.keys() - listed.keys():
        raise BundleError(bundle, "not listed in the manifest", member=name)
    for required in (SESSION_PREFIX + LOG_NAME, SUMMARY_NAME):
        if required not in listed:
            raise BundleError(bundle, "missing", member=required)
    if listed[SUMMARY_NAME].size > limits.max_summary_bytes:
        raise BundleError(bundle, "transfer summary is too large", member=SUMMARY_NAME)
    log = b""
    summary = b""
    for name, info in sorted(by_name.items()):
        chunks = _read_member(zf, bundle, info, listed[name])
        if name == SESSION_PREFIX + LOG_NAME:
            log = b"".join(chunks)
        elif name == SUMMARY_NAME:
            summary = b"".join(chunks)
        else:
            for _ in chunks:
                pass
    scan = scan_log(log, base_offset=0, first_line=1)
    if scan.corrupt or scan.torn is not None:
        where = scan.corrupt[0].where() if scan.corrupt else f"byte {scan.torn.offset if scan.torn else 0}"
        raise BundleError(bundle, f"the session log is damaged at {where}", member=SESSION_PREFIX + LOG_NAME)
    try:
        text = summary.decode("utf-8")
    except UnicodeDecodeError:
        raise BundleError(bundle, "transfer summary is not UTF-8", member=SUMMARY_NAME) from None
    return _Checked(manifest, by_name, log, text)


def check_bundle(path: Path | str, *, limits: BundleLimits | None = None) -> BundleManifest:
    """Read and check a whole bundle without writing anything; its manifest, or `BundleError`."""
    bundle = Path(path)
    with _open_zip(bundle) as zf:
        return _check(zf, bundle, limits or BundleLimits()).manifest


@contextlib.contextmanager
def _open_zip(bundle: Path) -> Iterator[zipfile.ZipFile]:
    try:
        handle: IO[bytes] = bundle.open("rb")
    except FileNotFoundError:
        raise UsageError(f"no bundle at {bundle}") from None
    except OSError as exc:
        raise BundleError(bundle, f"cannot be read: {exc.strerror or exc}") from None
    with handle:
        try:
            zf = zipfile.ZipFile(handle)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
            raise BundleError(bundle, f"not a zip archive: {exc}") from None
        with zf:
            yield zf


# -- import -----------------------------------------------------------------------------------


def _remap(log: bytes, pairs: list[tuple[str, str]]) -> bytes:
    """The log with each old path (at a path boundary, inside JSON strings) replaced by the new one.

    Only paths with at least one folder below the root are remapped (a workspace at `/` is not).
    One pass, longest old path first, so a new path is never remapped again (a store inside the
    workspace, say).
    """
    table = {
        msgspec.json.encode(old)[1:-1]: msgspec.json.encode(new)[1:-1]
        for old, new in pairs
        if old != new and len(PurePosixPath(old).parts) >= 2  # never "/" or "": they are in every text
    }
    if not table:
        return log
    alternatives = b"|".join(re.escape(old) for old in sorted(table, key=len, reverse=True))
    # a path boundary: not where a longer name goes on (`/ws2`, `/ws-old`, `/ws.bak`)
    pattern = re.compile(b"(?:" + alternatives + rb")(?![A-Za-z0-9_\-]|\.[A-Za-z0-9_])")
    return pattern.sub(lambda match: table[match.group()], log)


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
    with _open_zip(bundle) as zf:
        checked = _check(zf, bundle, limits or BundleLimits())
        manifest = checked.manifest
        if keep_id:
            try:
                check_session_id(manifest.session_id)
            except UsageError:
                raise BundleError(bundle, f"invalid session id {manifest.session_id!r}", member=MANIFEST_NAME) from None
            if _exists(store, manifest.session_id):
                raise UsageError(f"session {manifest.session_id} already exists in store {store.location}")
        new_cwd = None if cwd is None else str(cwd)
        if isinstance(store, LocalSessionStore):
            return _install(store, zf, bundle, checked, cwd=new_cwd, keep_id=keep_id, clock=clock)
        if not isinstance(store, EntryImporter):
            raise UsageError(f"store {store.location} cannot import a bundle")
        return _install_entries(store, zf, bundle, checked, cwd=new_cwd, keep_id=keep_id, clock=clock)


def _exists(store: SessionStore, session_id: str) -> bool:
    if isinstance(store, LocalSessionStore):
        return store.folder_of(session_id).exists()
    try:
        store.open(session_id, writable=False).close()
    except SessionNotFoundError:
        return False
    return True


def _entries_to_install(
    checked: _Checked, bundle: Path, pairs: list[tuple[str, str]], now: float
) -> tuple[bytes, list[LogEntry], str | None, str | None]:
    """The remapped log and its entries, with the transfer summary appended as a hidden one-shot
    when no provider transcript came along; and the leaf and the summary's outbox id."""
    manifest = checked.manifest
    log = _remap(checked.log, pairs)
    scan = scan_log(log, base_offset=0, first_line=1)
    if scan.corrupt:  # a path that cannot sit in JSON as it was: never for paths the store wrote
        raise BundleError(
            bundle, "the session log cannot be remapped to the new paths", member=SESSION_PREFIX + LOG_NAME
        )
    entries = list(scan.entries)
    leaf = manifest.leaf_id if manifest.leaf_id in {e.id for e in entries} else None
    if leaf is None and entries:
        leaf = entries[-1].id
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


def _install_entries(
    store: EntryImporter,
    zf: zipfile.ZipFile,
    bundle: Path,
    checked: _Checked,
    *,
    cwd: str | None,
    keep_id: bool,
    clock: Callable[[], float],
) -> ImportResult:
    """Write the session's files into the store's folder for it, then hand the entries to the store,
    which commits the session and all its entries at once (nothing half-made is ever listed)."""
    manifest = checked.manifest
    now = clock()
    session_id = manifest.session_id if keep_id else store.new_session_id()
    folder = store.files_dir_of(session_id)
    new_cwd = manifest.cwd if cwd is None else cwd
    log, entries, leaf, summary_id = _entries_to_install(
        checked, bundle, [(manifest.folder, str(folder)), (manifest.cwd, new_cwd)], now
    )
    written = 0
    try:
        written = _write_members(OS_FILES, zf, bundle, checked, folder, existing={folder / name for name in SUBFOLDERS})
        store.import_entries(
            entries,
            session_id=session_id,
            cwd=new_cwd,
            title=manifest.title[:200],
            created_at=manifest.created_at or now,
            leaf_id=leaf,
        ).close()
    except OSError as exc:
        raise SessionIOError(folder, "write the imported session's files", exc) from None
    except BaseException:
        _discard(folder)
        raise
    return ImportResult(
        session_id=session_id,
        source_session_id=manifest.session_id,
        cwd=new_cwd,
        files=len(manifest.files),
        bytes=written + len(log),
        transfer_summary_id=summary_id,
    )


def _write_members(
    files: FileLayer, zf: zipfile.ZipFile, bundle: Path, checked: _Checked, folder: Path, *, existing: set[Path]
) -> int:
    """Write the bundle's session files (not its log or metadata) under `folder`, each durable with its
    folder; returns the bytes written."""
    made = {folder, *existing}
    listed = {f.path: f for f in checked.manifest.files}
    written = 0
    for name, info in sorted(checked.infos.items()):
        if not name.startswith(SESSION_PREFIX) or name in (SESSION_PREFIX + LOG_NAME, SESSION_PREFIX + META_NAME):
            continue
        target = folder / name[len(SESSION_PREFIX) :]
        for parent in reversed(target.relative_to(folder).parents[:-1]):
            if folder / parent not in made:
                files.mkdir(folder / parent)
                made.add(folder / parent)
        # read again (and checked again) while written: the bundle may have changed since the check
        data = b"".join(_read_member(zf, bundle, info, listed[name]))
        write_new_file(files, target, data)
        written += len(data)
    for made_folder in sorted(made, key=lambda p: len(p.parts), reverse=True):
        files.fsync_dir(made_folder)
    return written


def _install(
    store: LocalSessionStore,
    zf: zipfile.ZipFile,
    bundle: Path,
    checked: _Checked,
    *,
    cwd: str | None,
    keep_id: bool,
    clock: Callable[[], float],
) -> ImportResult:
    """Build the session under a hidden folder from the checked bundle, then rename it into place."""
    manifest = checked.manifest
    files = store.files
    try:
        store.root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SessionIOError(store.root, "create the store folder", exc) from None
    now = clock()
    session_id = manifest.session_id if keep_id else new_session_id(now)
    folder = store.folder_of(session_id)
    staging = store.root / f"{CREATING_PREFIX}{session_id}"
    new_cwd = manifest.cwd if cwd is None else cwd
    log, entries, leaf, summary_id = _entries_to_install(
        checked, bundle, [(manifest.folder, str(folder)), (manifest.cwd, new_cwd)], now
    )
    meta = SessionMeta(
        id=session_id,
        created_at=manifest.created_at or now,
        updated_at=now,
        cwd=new_cwd,
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
        written = _write_members(files, zf, bundle, checked, staging, existing={staging / n for n in SUBFOLDERS})
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
    return ImportResult(
        session_id=session_id,
        source_session_id=manifest.session_id,
        cwd=new_cwd,
        files=len(manifest.files),
        bytes=written + len(log),
        transfer_summary_id=summary_id,
    )


def _discard(staging: Path) -> None:
    """Remove a half-built import (never listed: its name is hidden)."""
    import shutil

    shutil.rmtree(staging, ignore_errors=True)
