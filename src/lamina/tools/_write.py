"""Write: create or replace a file with the given text (I/O: disk).

Missing parent folders are created. The file is replaced atomically (a temporary file in the same
folder, then a rename), so a crash never leaves it half written; an existing file keeps its
permission bits, and writing through a symlink changes the file it points to, not the link.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import stat
from pathlib import Path

import msgspec

from lamina.tools._base import StructTool, ToolContext, ToolOutput


class WriteInput(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    path: str
    content: str


class WriteTool(StructTool[WriteInput]):
    """Creates or overwrites a file."""

    name = "Write"
    description = (
        "Create or replace a whole file with content (missing folders are created); Edit changes part of a file."
    )
    input_type = WriteInput

    def paths(self, input: WriteInput) -> tuple[Path, ...]:
        return (Path(input.path),)

    async def run(self, input: WriteInput, ctx: ToolContext) -> ToolOutput:
        return await asyncio.to_thread(self._write, input, ctx)

    def _write(self, input: WriteInput, ctx: ToolContext) -> ToolOutput:
        path = ctx.path(input.path)
        shown = ctx.display(path)
        if path.is_dir():
            return ToolOutput(f"{shown} is a folder; give the path of a file to write.", is_error=True)
        data = input.content.encode("utf-8", errors="surrogatepass")
        try:
            previous = os.stat(path).st_size if path.exists() else None
            replace_file(path, data)
        except OSError as exc:
            return ToolOutput(f"Cannot write {shown}: {exc.strerror or type(exc).__name__}", is_error=True)
        what = "new file" if previous is None else f"replaced the previous {previous:,} bytes"
        return ToolOutput(f"Wrote {len(data):,} bytes to {shown} ({what}).")


def replace_file(path: Path, data: bytes) -> None:
    """Atomically make `data` the content of `path` (through a symlink: of its target), creating folders.

    Raises:
        OSError: The folder cannot be created or the file written.
    """
    target = path.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    # 0o666 lets the umask decide a new file's mode, as for any other program creating a file.
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
