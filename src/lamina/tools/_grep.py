"""Grep: search file contents with a regular expression (I/O: disk).

Searches one file, or every file below a folder that a project search should see (`walk_files`),
each opened by descriptor from the folder (`lamina.workspace.locate`), files a rule hides left
out; line by line with Python's `re` syntax in a worker process killed at the time limit or on
cancellation (`_grep_process`). Output modes: paths, matching lines or counts, in path order, capped.
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, BinaryIO, Final

import msgspec

from lamina._text_codec import UTF8, decode, find_codec
from lamina.tools._base import StructTool, ToolContext, ToolInputError, ToolOutput, located
from lamina.tools._grep_process import SearchWorker
from lamina.tools._grep_worker import Mode as OutputMode
from lamina.tools._read import SNIFF_BYTES
from lamina.tools._search_files import walk_files
from lamina.workspace import GlobError, Located, PathEscapeError, compile_glob, locate

DEFAULT_MAX_RESULTS: Final = 200
DEFAULT_MAX_LINE_CHARS: Final = 300
DEFAULT_MAX_FILE_BYTES: Final = 16 * 1024 * 1024
DEFAULT_TIME_LIMIT: Final = 30.0


class GrepInput(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    pattern: Annotated[str, msgspec.Meta(min_length=1)]
    path: Annotated[str, msgspec.Meta(description="File or folder (default: the working directory).")] | None = None
    glob: Annotated[str, msgspec.Meta(description="Only files matching this glob, e.g. `*.py`.")] | None = None
    ignore_case: bool = False
    output_mode: Annotated[
        OutputMode,
        msgspec.Meta(
            description="`files_with_matches`: paths; `content`: path:line:text lines; `count`: matches per file."
        ),
    ] = "files_with_matches"


@dataclass(slots=True)
class _Search:
    """What one search found, and what it passed over."""

    rows: list[str] = field(default_factory=list)
    more: bool = False
    too_large: int = 0
    outside: int = 0
    timed_out: bool = False
    failed: bool = False
    """The worker process ended by itself (killed from outside, out of memory): results are incomplete."""


class GrepTool(StructTool[GrepInput]):
    """Searches file contents with a regular expression."""

    name = "Grep"
    description = (
        "Search file contents with a Python regular expression. Skips binary files, what .gitignore ignores, "
        "version-control and dependency folders."
    )
    read_only = True
    input_type = GrepInput

    def __init__(
        self,
        *,
        max_results: int = DEFAULT_MAX_RESULTS,
        max_line_chars: int = DEFAULT_MAX_LINE_CHARS,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        time_limit: float = DEFAULT_TIME_LIMIT,
    ) -> None:
        self.max_results = max_results
        self.max_line_chars = max_line_chars
        self.max_file_bytes = max_file_bytes
        self.time_limit = time_limit

    def validate(self, raw: Mapping[str, Any]) -> GrepInput:
        input = super().validate(raw)
        try:
            re.compile(input.pattern)
        except (re.error, OverflowError, RecursionError) as exc:
            raise ToolInputError("pattern", f"not a valid regular expression: {exc}") from None
        if input.glob is not None:
            try:
                compile_glob(input.glob)
            except GlobError as exc:
                raise ToolInputError("glob", str(exc)) from None
        return input

    def paths(self, input: GrepInput) -> tuple[Path, ...]:
        return (Path(input.path or "."),)

    async def run(self, input: GrepInput, ctx: ToolContext) -> ToolOutput:
        deadline = time.monotonic() + self.time_limit
        worker = SearchWorker(
            pattern=input.pattern,
            ignore_case=input.ignore_case,
            mode=input.output_mode,
            max_line_chars=self.max_line_chars,
            deadline=deadline,
        )
        try:
            return await asyncio.to_thread(self._grep, input, ctx, worker)
        except asyncio.CancelledError:
            worker.kill()  # the thread sees the worker gone and ends; nothing goes on searching
            raise

    def _grep(self, input: GrepInput, ctx: ToolContext, worker: SearchWorker) -> ToolOutput:
        target = ctx.path(input.path or ".")
        shown = ctx.display(target)
        found: _Search | ToolOutput
        try:
            try:
                with located(ctx, target, folder=True) as base:
                    found = self._search_folder(base, input, ctx, shown, worker)
            except NotADirectoryError:
                with located(ctx, target) as where:
                    found = self._search_file(where, input, shown, worker)
        except FileNotFoundError:
            return ToolOutput(f"Path not found: {shown}", is_error=True)
        except OSError as exc:
            return ToolOutput(f"Cannot search {shown}: {exc.strerror or type(exc).__name__}", is_error=True)
        finally:
            worker.close()
        if isinstance(found, ToolOutput):
            return found
        return ToolOutput(self._report(found, input, shown))

    def _search_file(self, where: Located, input: GrepInput, shown: str, worker: SearchWorker) -> _Search | ToolOutput:
        """Search the one file named (whatever the ignore rules say)."""
        found = _Search()
        with os.fdopen(where.open(), "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return ToolOutput(f"{shown} is not a regular file (a device, socket or pipe).", is_error=True)
            data = self._data(handle, found)
        if data is not None:
            self._add(found, worker, shown, data, input.output_mode)
        found.timed_out = worker.stopped == "deadline"
        found.failed = worker.stopped == "failed"
        return found

    def _search_folder(
        self, base: Located, input: GrepInput, ctx: ToolContext, shown: str, worker: SearchWorker
    ) -> _Search:
        """Search every file below the folder held as `base`, each opened from it by descriptor."""
        candidates = sorted(walk_files(base.real, root_key=base.identity()), key=lambda f: f.relative)
        if input.glob is not None:
            matcher = compile_glob(input.glob)
            by_name = "/" not in input.glob
            candidates = [
                f for f in candidates if matcher.matches(f.relative.rpartition("/")[2] if by_name else f.relative)
            ]
        prefix = "" if shown == "." else shown.rstrip("/") + "/"
        found = _Search()
        for walked in candidates:
            if worker.stopped is not None or time.monotonic() > worker.deadline:
                break
            data = self._read_walked(base, walked.relative, ctx, found)
            if data is not None and not self._add(found, worker, prefix + walked.relative, data, input.output_mode):
                break
        found.timed_out = worker.stopped == "deadline" or time.monotonic() > worker.deadline
        found.failed = worker.stopped == "failed"
        return found

    def _read_walked(self, base: Located, relative: str, ctx: ToolContext, found: _Search) -> bytes | None:
        """A walked file's bytes, opened from `base` by descriptor; None when it is passed over (and counted)."""
        if ctx.hides(Path(base.real, relative)):
            return None
        try:
            with locate(relative, ctx.readable_roots, start=base) as where:
                if ctx.hides(Path(where.real)):  # a link to a file a rule hides
                    return None
                with os.fdopen(where.open(), "rb") as handle:
                    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                        return None
                    return self._data(handle, found)
        except PathEscapeError:
            found.outside += 1
        except OSError:
            pass
        return None

    def _data(self, handle: BinaryIO, found: _Search) -> bytes | None:
        """The open file's text as UTF-8 (from the encoding it is in), or None when too large (counted) or binary."""
        if os.fstat(handle.fileno()).st_size > self.max_file_bytes:
            found.too_large += 1
            return None
        data = handle.read(self.max_file_bytes + 1)
        if len(data) > self.max_file_bytes:
            found.too_large += 1
            return None
        codec = find_codec(data)
        if codec is None:
            return None if b"\0" in data[:SNIFF_BYTES] else data  # not text in any encoding found: as UTF-8
        return data if codec == UTF8 else decode(data, codec).encode("utf-8")  # the worker reads UTF-8

    def _add(self, found: _Search, worker: SearchWorker, shown: str, data: bytes, mode: OutputMode) -> bool:
        """Search one file in the worker and keep its rows; False when the search must end here."""
        answer = worker.search(shown, data, self.max_results - len(found.rows))
        if answer is None:
            return False
        rows, more = answer
        found.rows.extend(rows)
        if more or len(found.rows) > self.max_results:
            found.more = True
            del found.rows[self.max_results :]
            return False
        return True

    def _report(self, found: _Search, input: GrepInput, shown: str) -> str:
        notes: list[str] = []
        if found.more:
            what = "lines" if input.output_mode == "content" else "files"
            notes.append(
                f"showing the first {self.max_results} matching {what}; there are more: narrow the pattern, path "
                "or glob"
            )
        if found.timed_out:
            notes.append(f"the search stopped after {self.time_limit:g} s; results are incomplete: narrow the path")
        if found.failed:
            notes.append("the search process ended unexpectedly; results are incomplete")
        if found.too_large:
            notes.append(f"{found.too_large} file(s) over {self.max_file_bytes:,} bytes were not searched")
        if found.outside:
            notes.append(f"{found.outside} symlinked file(s) pointing outside the allowed folders were not searched")
        body = "\n".join(found.rows) if found.rows else f"No matches for `{input.pattern}` in {shown}."
        return body + ("\n[" + "; ".join(notes) + "]" if notes else "")
