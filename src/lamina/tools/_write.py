"""Write: create or replace a file with the given text (I/O: disk).

Missing parent folders are created. The path is resolved by descriptor (`lamina.workspace.locate`),
and the file replaced atomically: a temporary file in the checked folder, then a rename there, so a
crash never leaves it half written and a link re-pointed meanwhile cannot send it elsewhere. An
existing file keeps its permission bits; writing through a symlink changes the file it points to.
"""

from __future__ import annotations

from pathlib import Path

from lamina.tools._base import ToolContext, ToolOutput, located
from lamina.tools._file_tool import FileInput, FileTool
from lamina.workspace import locate


class WriteInput(FileInput, forbid_unknown_fields=True, kw_only=True):
    content: str


class WriteTool(FileTool[WriteInput]):
    """Creates or overwrites a file."""

    name = "Write"
    description = (
        "Create or replace a whole file with content (missing folders are created); Edit changes part of a file."
    )
    input_type = WriteInput

    def on_file(self, input: WriteInput, ctx: ToolContext, path: Path, shown: str) -> ToolOutput:
        data = input.content.encode("utf-8", errors="surrogatepass")
        try:
            with located(ctx, path, write=True, make_folders=True) as where:
                previous = where.replace(data)
        except IsADirectoryError:
            return ToolOutput(f"{shown} is a folder; give the path of a file to write.", is_error=True)
        except OSError as exc:
            return ToolOutput(f"Cannot write {shown}: {exc.strerror or type(exc).__name__}", is_error=True)
        what = "new file" if previous is None else f"replaced the previous {previous:,} bytes"
        return ToolOutput(f"Wrote {len(data):,} bytes to {shown} ({what}).")


def replace_file(path: Path, data: bytes, roots: tuple[Path, ...]) -> int | None:
    """Atomically make `data` the content of `path` inside `roots`, creating folders (`Located.replace`).

    Returns:
        The previous file's size, or None when it is new.

    Raises:
        OSError: The path leads outside `roots` (`PathEscapeError`), or cannot be written.
    """
    with locate(path, roots, make_folders=True) as where:
        return where.replace(data)
