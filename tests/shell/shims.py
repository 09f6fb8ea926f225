"""A scratch folder where bash runs commands with a PATH of recording shims (for differential tests).

A shim for each program writes its name and arguments to a file of its own; the wrappers (`env`,
`xargs`, `find`, `sudo`, `bash`, …) record themselves, then run the real program, which finds the shims.
"""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

from tests.shell.commands import PROGRAMS, WRAPPERS

RECORD = 'printf "%s\\0" "${0##*/}" "$@" > "$(/usr/bin/mktemp "$SHIM_LOG/XXXXXXXX")"\n'
REAL = {"sudo": 'while [ "${1#-}" != "$1" ]; do shift; done; exec "$@"\n'}


class Scratch:
    """A folder to run commands in, a PATH of shims, and the log they write."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.log = root.parent / f"{root.name}.log"
        self.bin.mkdir(parents=True)
        self.log.mkdir()
        for name in PROGRAMS:
            self._shim(name, RECORD)
        for name in WRAPPERS:
            real = shutil.which(name, path="/usr/bin:/bin")
            tail = REAL.get(name) or (f'exec {real} "$@"\n' if real else "exit 127\n")
            self._shim(name, RECORD + tail)

    def _shim(self, name: str, body: str) -> None:
        path = self.bin / name
        path.write_text("#!/bin/bash\n" + body)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)

    def run(self, command: str) -> list[list[str]] | None:
        """The programs the command ran, each with its arguments; None when bash refuses its syntax."""
        for entry in self.root.iterdir():
            if entry != self.bin:
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        for record in self.log.iterdir():
            record.unlink()
        if subprocess.run(["bash", "-n", "-c", command], capture_output=True, check=False).returncode != 0:
            return None
        env = {"PATH": str(self.bin), "SHIM_LOG": str(self.log), "HOME": str(self.root), "LC_ALL": "C"}
        subprocess.run(
            ["/bin/bash", "-c", command],
            cwd=self.root,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            check=False,
        )
        return [path.read_bytes().decode(errors="replace").split("\0")[:-1] for path in self.log.iterdir()]

    def created(self) -> list[str]:
        return sorted(entry.name for entry in self.root.iterdir() if entry != self.bin)
