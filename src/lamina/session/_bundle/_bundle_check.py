"""Checking a transfer bundle whole before anything is written: names, sizes, checksums, the log (I/O).

What is refused, and why, is described in docs/session-log.md ("Transfer bundles").
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import stat
import unicodedata
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Final

import msgspec

from lamina.errors import BundleError, UsageError
from lamina.session._bundle._bundle_manifest import (
    BUNDLE_FOLDERS,
    CHUNK,
    MANIFEST_NAME,
    SESSION_PREFIX,
    SUMMARY_NAME,
    BundleFile,
    BundleManifest,
)
from lamina.session._jsonl._jsonl_open import LOG_NAME
from lamina.session._jsonl._session_meta import META_NAME
from lamina.session._scan import scan_log


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


@dataclass(frozen=True, slots=True)
class Checked:
    """A bundle that passed every check: its manifest, its members by name, its log and transfer summary."""

    manifest: BundleManifest
    infos: dict[str, zipfile.ZipInfo]
    """Every member but the manifest."""
    log: bytes
    summary: str


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


def read_member(zf: zipfile.ZipFile, bundle: Path, info: zipfile.ZipInfo, expected: BundleFile) -> Iterator[bytes]:
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
                chunk = member.read(CHUNK)
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


def _members(zf: zipfile.ZipFile, bundle: Path, limits: BundleLimits) -> dict[str, zipfile.ZipInfo]:
    """The archive's file members by name, each name, kind and size checked (folder entries: their names only)."""
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
    return by_name


def _read_manifest(
    zf: zipfile.ZipFile, bundle: Path, info: zipfile.ZipInfo | None, limits: BundleLimits
) -> BundleManifest:
    """The manifest decoded and validated (`info`: its member, None when the bundle has none)."""
    if info is None:
        raise BundleError(bundle, f"no {MANIFEST_NAME}: not a Lamina session bundle")
    if info.file_size > limits.max_manifest_bytes:
        raise BundleError(bundle, "manifest is too large", member=MANIFEST_NAME)
    try:
        with zf.open(info) as f:
            raw = f.read(limits.max_manifest_bytes + 1)
        return msgspec.json.decode(raw, type=BundleManifest)
    except msgspec.ValidationError as exc:
        raise BundleError(bundle, f"invalid manifest: {exc}", member=MANIFEST_NAME) from None
    except (msgspec.DecodeError, zipfile.BadZipFile, OSError, EOFError) as exc:
        raise BundleError(bundle, f"manifest cannot be read: {exc}", member=MANIFEST_NAME) from None


def _listing(
    bundle: Path, manifest: BundleManifest, by_name: dict[str, zipfile.ZipInfo], limits: BundleLimits
) -> dict[str, BundleFile]:
    """The manifest's files by name, once each, matching the archive's members, the log and summary among them."""
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
    return listed


def _read_all(
    zf: zipfile.ZipFile, bundle: Path, by_name: dict[str, zipfile.ZipInfo], listed: dict[str, BundleFile]
) -> tuple[bytes, bytes]:
    """Every member read and checked against the manifest; the log's bytes and the transfer summary's."""
    log = b""
    summary = b""
    for name, info in sorted(by_name.items()):
        chunks = read_member(zf, bundle, info, listed[name])
        if name == SESSION_PREFIX + LOG_NAME:
            log = b"".join(chunks)
        elif name == SUMMARY_NAME:
            summary = b"".join(chunks)
        else:
            for _ in chunks:
                pass
    return log, summary


def _check_log(bundle: Path, log: bytes) -> None:
    """Refuse a session log with a damaged or torn line."""
    scan = scan_log(log, base_offset=0, first_line=1)
    if scan.corrupt or scan.torn is not None:
        where = scan.corrupt[0].where() if scan.corrupt else f"byte {scan.torn.offset if scan.torn else 0}"
        raise BundleError(bundle, f"the session log is damaged at {where}", member=SESSION_PREFIX + LOG_NAME)


def check_zip(zf: zipfile.ZipFile, bundle: Path, limits: BundleLimits) -> Checked:
    """The whole bundle read and checked; raises `BundleError` at the first thing refused.

    Args:
        zf: The bundle, open.
        bundle: Its path, for the error.
        limits: What is accepted at most.

    Raises:
        BundleError: the bundle is refused.
    """
    by_name = _members(zf, bundle, limits)
    manifest = _read_manifest(zf, bundle, by_name.pop(MANIFEST_NAME, None), limits)
    listed = _listing(bundle, manifest, by_name, limits)
    log, summary = _read_all(zf, bundle, by_name, listed)
    _check_log(bundle, log)
    try:
        text = summary.decode("utf-8")
    except UnicodeDecodeError:
        raise BundleError(bundle, "transfer summary is not UTF-8", member=SUMMARY_NAME) from None
    return Checked(manifest, by_name, log, text)


def check_bundle(path: Path | str, *, limits: BundleLimits | None = None) -> BundleManifest:
    """Read and check a whole bundle without writing anything; its manifest, or `BundleError`."""
    bundle = Path(path)
    with open_zip(bundle) as zf:
        return check_zip(zf, bundle, limits or BundleLimits()).manifest


@contextlib.contextmanager
def open_zip(bundle: Path) -> Iterator[zipfile.ZipFile]:
    """The bundle at `bundle` open as a zip archive.

    Raises:
        UsageError: there is no file at `bundle`.
        BundleError: it cannot be read or is not a zip archive.
    """
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
