"""Glob: the files whose paths match a pattern, sorted (I/O: disk).

The pattern is relative to the working directory (or to `path`): `*.py` matches in that folder
only, `**/*.py` at any depth, `src/**/test_*.{py,pyi}` below `src`. Only the pattern's literal
leading folders are walked, from a folder resolved by descriptor (`lamina.workspace.locate`). What
`.gitignore` ignores, version-control and dependency folders, and files a rule hides
(`ToolContext.hidden`) are left out. Results are files, sorted by path and capped at `max_results`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final

import msgspec

from lamina.tools._base import StructTool, ToolContext, ToolInputError, ToolOutput, located
from lamina.tools._search_files import walk_files
from lamina.workspace import GlobError, compile_glob, split_glob

DEFAULT_MAX_RESULTS: Final = 500


class GlobInput(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    pattern: Annotated[
        str,
        msgspec.Meta(min_length=1, description="`*` does not cross `/`; `**` matches any depth."),
    ]
    path: Annotated[str, msgspec.Meta(description="Folder (default: the working directory).")] | None = None


class GlobTool(StructTool[GlobInput]):
    """Lists files matching a glob pattern."""

    name = "Glob"
    description = (
        "Find files by glob pattern, e.g. `src/**/*.py`; paths sorted by name. Skips what .gitignore ignores, "
        "version-control and dependency folders."
    )
    read_only = True
    input_type = GlobInput

    def __init__(self, *, max_results: int = DEFAULT_MAX_RESULTS) -> None:
        self.max_results = max_results

    def validate(self, raw: Mapping[str, Any]) -> GlobInput:
        input = super().validate(raw)
        try:
            compile_glob(split_glob(input.pattern)[1])
        except GlobError as exc:
            raise ToolInputError("pattern", str(exc)) from None
        return input

    def paths(self, input: GlobInput) -> tuple[Path, ...]:
        return (self._base(input),)

    async def run(self, input: GlobInput, ctx: ToolContext) -> ToolOutput:
        return await asyncio.to_thread(self._glob, input, ctx)

    def _base(self, input: GlobInput) -> Path:
        prefix, _ = split_glob(input.pattern)
        return Path(input.path or ".") / (prefix or ".")

    def _glob(self, input: GlobInput, ctx: ToolContext) -> ToolOutput:
        base = ctx.path(self._base(input))
        rest = split_glob(input.pattern)[1]
        try:
            with located(ctx, base, folder=True) as where:
                real, key = where.real, where.identity()
        except FileNotFoundError:
            return ToolOutput(f"No files found: {ctx.display(base)} does not exist.", is_error=True)
        except NotADirectoryError:
            return ToolOutput(f"No files found: {ctx.display(base)} is not a folder.")
        except OSError as exc:
            return ToolOutput(f"Cannot list {ctx.display(base)}: {exc.strerror or type(exc).__name__}", is_error=True)
        matcher = compile_glob(rest)
        found = sorted(
            f.relative
            for f in walk_files(real, root_key=key)
            if matcher.matches(f.relative) and not ctx.hides(Path(f.path))
        )
        if not found:
            hint = ""
            if "/" not in rest and "**" not in rest:
                named = "the working directory" if ctx.display(base) == "." else ctx.display(base)
                hint = f" `{rest}` matches in {named} only; use `**/{rest}` to search subfolders too."
            return ToolOutput(f"No files found for `{input.pattern}`.{hint}")
        shown_base = ctx.display(base)
        lines = [f if shown_base == "." else f"{shown_base.rstrip('/')}/{f}" for f in found[: self.max_results]]
        if len(found) > self.max_results:
            lines.append(
                f"[{len(found) - self.max_results:,} more files not shown ({len(found):,} in all); "
                "narrow the pattern or the path]"
            )
        return ToolOutput("\n".join(lines))
