"""What Read, Write and Edit share: an input naming one file, and a run in a worker thread on that file."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TypeVar

import msgspec

from lamina.tools._base import StructTool, ToolContext, ToolOutput


class FileInput(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The input of a tool on one file: its path, as the model gave it."""

    path: str


_FileInputT = TypeVar("_FileInputT", bound=FileInput)


class FileTool(StructTool[_FileInputT]):
    """A tool on the one file its input names, run off the event loop (the disk blocks)."""

    def paths(self, input: _FileInputT) -> tuple[Path, ...]:
        return (Path(input.path),)

    async def run(self, input: _FileInputT, ctx: ToolContext) -> ToolOutput:
        return await asyncio.to_thread(self._run_sync, input, ctx)

    def _run_sync(self, input: _FileInputT, ctx: ToolContext) -> ToolOutput:
        path = ctx.path(input.path)
        return self.on_file(input, ctx, path, ctx.display(path))

    def on_file(self, input: _FileInputT, ctx: ToolContext, path: Path, shown: str) -> ToolOutput:
        """The tool's work on the file (in a worker thread).

        Args:
            input: The call's input.
            ctx: The call's context.
            path: The file, resolved against the working folder.
            shown: The file as the model is shown it.

        Returns:
            What the model is told.
        """
        raise NotImplementedError
