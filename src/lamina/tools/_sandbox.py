"""The Bash sandbox: bubblewrap around each command on Linux, or a notice saying why not (I/O: processes).

A confined command sees the whole file system read-only except the writable roots (the
workspace, the session's folders, `SandboxSettings.writable`), inside which `.git`, `.lamina/`
and the sources folder stay read-only; `/tmp` is its own; it has no
network (nor Unix sockets) unless the settings allow it, no capabilities, its own process tree,
and an environment without keys. See docs/security.md, "The Bash sandbox".
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from lamina.tools._environment import clean_environment
from lamina.tools._seccomp import unix_socket_filter

PROTECTED: Final = (".git", ".lamina", "sources")
"""Paths inside a writable root that a sandboxed command cannot write: what git or Lamina would run or obey.

All of `.git`, not only its config and hooks: git also obeys `commondir` (another folder's config),
the index (a submodule whose own config it reads) and `modules/*/config`."""
_MADE_IN_WORKSPACE: Final = ".lamina"
"""Made (empty) in the workspace when missing, so that a command cannot make it."""
_PROBE_SECONDS: Final = 10.0
_INSTALL_HINT: Final = "install bubblewrap (Debian and Ubuntu: apt-get install bubblewrap)"


@dataclass(frozen=True, slots=True)
class SandboxSettings:
    """How Bash commands are confined: bubblewrap on Linux, on by default (the `[sandbox]` config table)."""

    enabled: bool = True
    """Confine commands where the machine allows it; where it does not, they run unconfined and
    `BashTool.sandbox_notice` says why. False: never confine (and no notice)."""
    network: bool = False
    """Let commands reach the network (and local services through Unix sockets)."""
    writable: tuple[Path, ...] = ()
    """Folders writable besides the workspace and the session's folders (`~` expanded; missing ones skipped)."""
    program: str = "bwrap"
    """The bubblewrap program: a name looked up on PATH, or a path."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "writable", tuple(Path(os.path.expanduser(p)) for p in self.writable))


@dataclass(frozen=True, slots=True)
class Confinement:
    """One command's launch: the argv to run, the environment, and a file descriptor the child inherits."""

    argv: tuple[str, ...]
    env: dict[str, str]
    pass_fds: tuple[int, ...] = field(default=())

    def close(self) -> None:
        """Close the parent's copy of the inherited descriptors (after the child started, or if it never will)."""
        for fd in self.pass_fds:
            os.close(fd)


def sandbox_problem(settings: SandboxSettings) -> str | None:
    """Why commands cannot be confined here, or None when they can (or the sandbox is turned off).

    The answer is worked out once per program and network setting (a trial run of bubblewrap).
    """
    if not settings.enabled:
        return None
    if not sys.platform.startswith("linux"):
        return f"the Bash sandbox needs Linux and bubblewrap; this is {sys.platform}"
    program = shutil.which(settings.program)
    if program is None:
        return f"bubblewrap ({settings.program}) was not found: {_INSTALL_HINT}"
    return _probe(program, settings.network)


@functools.cache
def _probe(program: str, network: bool) -> str | None:
    confinement = _launch(program, ("true",), network=network, binds=(), chdir="/", env={})
    try:
        done = subprocess.run(
            confinement.argv,
            pass_fds=confinement.pass_fds,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_PROBE_SECONDS,
            env={"PATH": os.environ.get("PATH", os.defpath)},
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap ({program}) could not be run: {exc}"
    finally:
        confinement.close()
    if done.returncode == 0:
        return None
    said = done.stderr.decode("utf-8", "replace").strip().splitlines()
    why = said[-1] if said else f"exit code {done.returncode}"
    return f"bubblewrap cannot make a sandbox here, the kernel may refuse user namespaces ({why})"


def confine(
    command: Sequence[str],
    settings: SandboxSettings,
    *,
    cwd: Path,
    workspace: Iterable[Path],
    writable: Iterable[Path],
    readable: Iterable[Path] = (),
    environ: Mapping[str, str] | None = None,
) -> Confinement:
    """The launch of `command` confined by `settings`, or unconfined (with a clean environment) when it cannot be.

    Args:
        command: The program and its arguments.
        settings: The sandbox settings; disabled: the command and the environment as they are.
        cwd: Where the command starts.
        workspace: The workspace's roots: a protected folder missing there (`.lamina`) is made, empty, so
            that the command cannot make it (the protected paths of other writable roots are kept only
            where they exist).
        writable: The roots it may write (the workspace's in modes that write, the session's folders);
            `settings.writable` is added.
        readable: Roots it must see even where the sandbox hides the host (under `/tmp`), read-only.
        environ: The environment to clean; None: this process's.

    Returns:
        What to run; its `pass_fds` must be passed to the child and closed afterwards (`close`).
    """
    environ = os.environ if environ is None else environ
    if not settings.enabled:
        return Confinement(tuple(command), dict(environ))
    env = clean_environment(environ)
    program = shutil.which(settings.program)
    if program is None or sandbox_problem(settings) is not None:
        return Confinement(tuple(command), env)
    writable_roots = _existing((*writable, *settings.writable))
    binds = _binds(writable_roots, _existing((*readable, cwd)), workspace=_existing(workspace))
    env["TMPDIR"] = "/tmp"  # the command's own
    return _launch(program, tuple(command), network=settings.network, binds=binds, chdir=str(cwd), env=env)


def _launch(
    program: str, command: Sequence[str], *, network: bool, binds: Sequence[str], chdir: str, env: dict[str, str]
) -> Confinement:
    argv = [program, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if network:
        argv.append("--share-net")
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", *binds]
    fds: tuple[int, ...] = ()
    program_bytes = None if network else unix_socket_filter(platform.machine())
    if program_bytes is not None:
        read, write = os.pipe()
        try:
            os.write(write, program_bytes)  # a few hundred bytes: the pipe holds them
        finally:
            os.close(write)
        fds = (read,)
        argv += ["--seccomp", str(read)]
    argv += ["--chdir", chdir, "--", *command]
    return Confinement(tuple(argv), env, fds)


def _existing(paths: Iterable[Path]) -> tuple[Path, ...]:
    """The paths that exist, resolved, without duplicates, outermost first."""
    found = {Path(os.path.realpath(p)) for p in paths if os.path.isdir(p)}
    return tuple(sorted(found, key=lambda p: (len(p.parts), str(p))))


def _binds(writable: Sequence[Path], readable: Sequence[Path], *, workspace: Sequence[Path]) -> list[str]:
    """Bubblewrap's mounts: the readable roots, then the writable ones, then the protected paths inside them."""
    args: list[str] = []
    for root in readable:
        if root not in writable:
            args += ["--ro-bind", str(root), str(root)]
    for root in writable:
        args += ["--bind", str(root), str(root)]
    for root in writable:
        args += _protect(root, make_missing=root in workspace)
    return args


def _protect(root: Path, *, make_missing: bool) -> list[str]:
    """The read-only mounts over `root`'s protected paths (a mount point cannot be renamed or removed either).

    `make_missing`: `root` is the workspace's, where a missing `.lamina` is made first.
    """
    args: list[str] = []
    if make_missing:
        with contextlib.suppress(OSError):  # a file there, or no permission: protected below if it exists
            (root / _MADE_IN_WORKSPACE).mkdir(exist_ok=True)
    for relative in PROTECTED:
        path = root / relative
        if path.exists() and not path.is_symlink():  # a link is not pinned: docs/security.md says so
            args += ["--ro-bind", str(path), str(path)]
    return args
