"""Workspace trust: which folders the user trusts to configure Lamina, kept in the user's config (I/O: disk).

A cloned repository is untrusted until the user trusts it: until then its sources do not start and
its `.lamina/config.toml` cannot raise permissions, pick the model or write system text. The user's
trust lives in `trusted.toml` in the user config directory (never in the workspace), one entry per
folder, keyed by its resolved absolute path. What trust unlocks: docs/security.md.
"""

from __future__ import annotations

import contextlib
import enum
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import msgspec
import platformdirs

from lamina._atomic import atomic_write
from lamina._typed_toml import read_config_file
from lamina.errors import ConfigError, UsageError

__all__ = [
    "TRUST_FILE_NAME",
    "TrustedWorkspace",
    "WorkspaceTrust",
    "default_trust_path",
    "revoke_trust",
    "trust_workspace",
    "trusted_workspaces",
    "workspace_trust",
]

TRUST_FILE_NAME: Final = "trusted.toml"
"""The file, in the user config directory, that lists the trusted workspaces."""

_HEADER: Final = (
    "# Workspaces you trust: Lamina starts their sources and applies their .lamina/config.toml.\n"
    "# Written by `lamina trust PATH`; `lamina trust --revoke PATH` removes one.\n"
)


class WorkspaceTrust(enum.Enum):
    """Whether the user trusts a workspace to configure Lamina (its sources and its `.lamina/config.toml`)."""

    UNTRUSTED = "untrusted"
    """Its sources never start or connect; its config may narrow (deny rules, a lower mode), never widen."""
    TRUSTED = "trusted"
    """The user trusted it: its sources start and its whole config applies."""

    @property
    def trusted(self) -> bool:
        """Whether this is `TRUSTED`."""
        return self is WorkspaceTrust.TRUSTED


@dataclass(frozen=True, slots=True)
class TrustedWorkspace:
    """One trusted folder, as `trusted_workspaces` lists it."""

    path: Path
    """The folder's resolved absolute path when it was trusted (the key)."""
    trusted_at: datetime
    """When the user trusted it (UTC)."""


class _Entry(msgspec.Struct, kw_only=True):
    path: str
    trusted_at: datetime


class _TrustFile(msgspec.Struct, kw_only=True):
    workspace: list[_Entry] = []


def default_trust_path() -> Path:
    """The user's trust file (`trusted.toml` in the user config directory; it may not exist)."""
    return platformdirs.user_config_path("lamina") / TRUST_FILE_NAME


def trusted_workspaces(*, file: Path | None = None) -> tuple[TrustedWorkspace, ...]:
    """Every trusted workspace, in the order they were trusted.

    Args:
        file: The trust file; `trusted.toml` in the user config directory unless given.

    Raises:
        ConfigError: The file cannot be read or is not a trust file (it names the file).
    """
    path = file or default_trust_path()
    return tuple(TrustedWorkspace(Path(e.path), _utc(e.trusted_at)) for e in _read(path).workspace)


def workspace_trust(workspace: str | os.PathLike[str], *, file: Path | None = None) -> WorkspaceTrust:
    """Whether the user trusts `workspace`: its resolved path must be listed exactly (a parent does not count).

    Args:
        workspace: The folder.
        file: The trust file; `trusted.toml` in the user config directory unless given.

    Raises:
        ConfigError: The trust file cannot be read or is not a trust file.
    """
    key = str(Path(workspace).resolve())
    listed = any(entry.path == key for entry in _read(file or default_trust_path()).workspace)
    return WorkspaceTrust.TRUSTED if listed else WorkspaceTrust.UNTRUSTED


def trust_workspace(
    workspace: str | os.PathLike[str], *, file: Path | None = None, now: datetime | None = None
) -> TrustedWorkspace:
    """Trust `workspace` (its resolved path); trusting it again keeps the first date.

    Args:
        workspace: An existing folder.
        file: The trust file; `trusted.toml` in the user config directory unless given (made, with
            its folder, if missing).
        now: The time recorded; the current time unless given.

    Returns:
        The entry, as listed.

    Raises:
        UsageError: `workspace` is not a folder.
        ConfigError: The trust file cannot be read, parsed or written.
    """
    folder = Path(workspace).resolve()
    if not folder.is_dir():
        raise UsageError(f"{workspace}: not a folder, so it cannot be trusted")
    path = file or default_trust_path()
    with _locked(path):
        current = _read(path)
        for entry in current.workspace:
            if entry.path == str(folder):
                return TrustedWorkspace(folder, _utc(entry.trusted_at))
        entry = _Entry(path=str(folder), trusted_at=(now or datetime.now(UTC)).replace(microsecond=0))
        _write(path, [*current.workspace, entry])
    return TrustedWorkspace(folder, _utc(entry.trusted_at))


def revoke_trust(workspace: str | os.PathLike[str], *, file: Path | None = None) -> bool:
    """Stop trusting `workspace`; False when it was not trusted.

    The entry matches the folder's resolved path or, for a folder that moved or is gone, the
    absolute path as given (what `trusted_workspaces` listed).

    Raises:
        ConfigError: The trust file cannot be read, parsed or written.
    """
    keys = {str(Path(workspace).resolve()), os.path.abspath(workspace)}
    path = file or default_trust_path()
    with _locked(path):
        current = _read(path)
        kept = [entry for entry in current.workspace if entry.path not in keys]
        if len(kept) == len(current.workspace):
            return False
        _write(path, kept)
    return True


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _read(path: Path) -> _TrustFile:
    return read_config_file(path, _TrustFile) or _TrustFile()


def _write(path: Path, entries: list[_Entry]) -> None:
    blocks = [
        f"\n[[workspace]]\npath = {_toml_string(entry.path, path)}\n"
        f"trusted_at = {_utc(entry.trusted_at).strftime('%Y-%m-%dT%H:%M:%SZ')}\n"
        for entry in entries
    ]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, (_HEADER + "".join(blocks)).encode())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write: {exc.strerror or exc}") from None


def _toml_string(text: str, file: Path) -> str:
    """`text` as a TOML basic string: quote, backslash and every control character escaped.

    Raises:
        ConfigError: `text` is not valid Unicode (a file name that is not UTF-8).
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"{file}: cannot record {text!r}: the path is not valid UTF-8") from None
    escaped = (c if c not in '"\\' and c.isprintable() else f"\\U{ord(c):08X}" for c in text)
    return '"' + "".join(escaped) + '"'


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock beside `path` while it is read and rewritten (two `lamina trust` at once)."""
    try:
        import fcntl
    except ImportError:  # no advisory locks here: the rewrite is still atomic
        yield
        return
    lock = path.with_name(path.name + ".lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise ConfigError(f"{lock}: cannot open: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
