"""Grep: search file contents with a regular expression (I/O: disk).

Searches one file, or every file below a folder that a project search should see (`walk_files`),
line by line with Python's `re` syntax, optionally narrowed by a glob. Output modes: file paths,
matching lines or counts, in path order and capped. See docs/tools.md, "Grep".
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
from typing import Annotated, Any, Final, Literal

import msgspec

from lamina.tools._base import StructTool, ToolContext, ToolInputError, ToolOutput, within
from lamina.tools._read import SNIFF_BYTES
from lamina.tools._walk import compile_glob, walk_files

DEFAULT_MAX_RESULTS: Final = 200
DEFAULT_MAX_LINE_CHARS: Final = 300
DEFAULT_MAX_FILE_BYTES: Final = 16 * 1024 * 1024
DEFAULT_TIME_LIMIT: Final = 30.0
# `\A` and `\Z` mean "start/end of the line" when searching line by line but "of the file" when
# searching the whole text, so the whole-file pre-check would wrongly skip files.
_WHOLE_TEXT_ANCHOR: Final = re.compile(r"\\[AZ]")

OutputMode = Literal["files_with_matches", "content", "count"]


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
        except re.error as exc:
            raise ToolInputError("pattern", f"not a valid regular expression: {exc}") from None
        if input.glob is not None:
            try:
                compile_glob(input.glob)
            except (ValueError, re.error) as exc:
                raise ToolInputError("glob", f"not a usable glob: {exc}") from None
        return input

    def paths(self, input: GrepInput) -> tuple[Path, ...]:
        return (Path(input.path or "."),)

    async def run(self, input: GrepInput, ctx: ToolContext) -> ToolOutput:
        return await asyncio.to_thread(self._grep, input, ctx)

    def _grep(self, input: GrepInput, ctx: ToolContext) -> ToolOutput:
        target = ctx.path(input.path or ".")
        shown = ctx.display(target)
        try:
            st = os.stat(target)
        except FileNotFoundError:
            return ToolOutput(f"Path not found: {shown}", is_error=True)
        except OSError as exc:
            return ToolOutput(f"Cannot search {shown}: {exc.strerror or type(exc).__name__}", is_error=True)
        regex = re.compile(input.pattern, re.MULTILINE | (re.IGNORECASE if input.ignore_case else 0))
        if stat.S_ISDIR(st.st_mode):
            real = target.resolve()
            candidates = sorted(walk_files(str(real)), key=lambda f: f.relative)
            if input.glob is not None:
                matcher = compile_glob(input.glob)
                by_name = "/" not in input.glob
                candidates = [
                    f for f in candidates if matcher.fullmatch(f.relative.rpartition("/")[2] if by_name else f.relative)
                ]
            prefix = "" if shown == "." else shown.rstrip("/") + "/"
            files = [(Path(f.path), prefix + f.relative, f.symlink) for f in candidates]
        elif stat.S_ISREG(st.st_mode):
            files = [(target, shown, False)]  # a file named explicitly is searched whatever the rules say
        else:
            return ToolOutput(f"{shown} is not a regular file (a device, socket or pipe).", is_error=True)
        found = self._search(files, regex, input.output_mode, ctx)
        return ToolOutput(self._report(found, input, shown))

    def _search(
        self, files: list[tuple[Path, str, bool]], regex: re.Pattern[str], mode: OutputMode, ctx: ToolContext
    ) -> _Search:
        found = _Search()
        deadline = time.monotonic() + self.time_limit
        whole_text_check = _WHOLE_TEXT_ANCHOR.search(regex.pattern) is None
        for path, shown, symlink in files:
            if time.monotonic() > deadline:
                found.timed_out = True
                break
            if symlink:
                try:
                    inside = within(path.resolve(), ctx.readable_roots)
                except (OSError, RuntimeError):
                    inside = False
                if not inside:
                    found.outside += 1
                    continue
            text = self._text(path, found)
            if text is None or (whole_text_check and regex.search(text) is None):
                continue
            if mode == "files_with_matches":
                found.rows.append(shown)
            else:
                count = 0
                for number, line in enumerate(text.splitlines(), 1):
                    if regex.search(line) is None:
                        continue
                    count += 1
                    if mode == "content":
                        if len(found.rows) >= self.max_results:
                            found.more = True
                            break
                        if len(line) > self.max_line_chars:
                            line = line[: self.max_line_chars] + " […]"
                        found.rows.append(f"{shown}:{number}:{line}")
                if mode == "count" and count:
                    found.rows.append(f"{shown}:{count}")
            if len(found.rows) > self.max_results or found.more:
                found.more = True
                del found.rows[self.max_results :]
                break
        return found

    def _text(self, path: Path, found: _Search) -> str | None:
        try:
            with open(path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size > self.max_file_bytes:
                    found.too_large += 1
                    return None
                data = handle.read()
        except OSError:
            return None
        if b"\0" in data[:SNIFF_BYTES]:
            return None
        return data.decode("utf-8", errors="replace")

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
        if found.too_large:
            notes.append(f"{found.too_large} file(s) over {self.max_file_bytes:,} bytes were not searched")
        if found.outside:
            notes.append(f"{found.outside} symlinked file(s) pointing outside the allowed folders were not searched")
        body = "\n".join(found.rows) if found.rows else f"No matches for `{input.pattern}` in {shown}."
        return body + ("\n[" + "; ".join(notes) + "]" if notes else "")
