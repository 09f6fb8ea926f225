"""The python blocks of README.md and docs/, found and run page by page (tests/test_docs_examples.py).

A page's ```python (or ```py) blocks run in order in one namespace, as one script would, with
top-level `await` allowed (one event loop for the page). A block whose last non-blank line before
it is `<!-- test: wire anthropic -->` (or `openai`, or both: `wire anthropic openai`) runs with the
local wire server of tests/wire answering for that provider: its SDK's `*_BASE_URL` points at the
server, a dummy key is set, and every request gets `WIRE_ANSWER`. Any other marker, or a marker
that no python block follows, fails the page before its first block runs.
"""

from __future__ import annotations

import ast
import asyncio
import gc
import inspect
import re
import sys
import types
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

from tests.wire.fixtures import API_KEY
from tests.wire.script import Reply
from tests.wire.server import WireServer

PYTHON_INFOS: Final = frozenset({"python", "py"})
"""The fence info words whose blocks run."""

WIRE_APIS: Final = ("anthropic", "openai")
"""What may follow `wire` in a marker."""

WIRE_ANSWER: Final = "This answer comes from the local wire server standing in for the provider."
"""What the wire server answers every request of a marked block."""

_WIRE_REPLIES: Final = 64
"""Scripted replies kept queued for a wire block (the server answers 400 once its script runs dry)."""

_FENCE: Final = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_MARKER: Final = re.compile(r"^\s*<!--\s*test:(?P<marker>.*?)-->\s*$")


class DocsExampleError(AssertionError):
    """A page's python block failed, or a page's test marker is wrong; the message names the page and line."""


@dataclass(frozen=True)
class Block:
    """One python block of a page."""

    line: int
    """The line of its opening fence (1-based)."""
    source: str
    """Its code, the fence's indentation removed."""
    wire: tuple[str, ...] = ()
    """The providers the wire server answers for (from its marker); empty: no server."""


@dataclass(frozen=True)
class Page:
    """A Markdown page's python blocks, and what is wrong with its markers."""

    path: Path
    name: str
    """The path shown in errors (relative to the repository)."""
    blocks: tuple[Block, ...]
    problems: tuple[str, ...]


@dataclass
class _Fence:
    line: int
    indent: int
    char: str
    length: int
    runs: bool
    marker: tuple[int, str] | None
    lines: list[str]


def read_page(path: Path, name: str) -> Page:
    """The python blocks of one Markdown file.

    Args:
        path: The file.
        name: How errors name it.

    Returns:
        Its blocks in order, and any marker problems (an unknown marker, or one no python block follows).
    """
    blocks: list[Block] = []
    problems: list[str] = []
    pending: tuple[int, str] | None = None  # a marker waiting for its block
    fence: _Fence | None = None
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if fence is not None:
            if _closes(fence, text):
                if fence.runs:
                    blocks.append(_block(fence, name, problems))
                fence = None
            else:
                fence.lines.append(_dedent(text, fence.indent))
            continue
        if not text.strip():
            continue
        opening = _FENCE.match(text)
        marker = _MARKER.match(text)
        if marker is not None:
            _orphan(pending, name, problems)
            pending = (number, marker["marker"].strip())
        elif opening is not None and not (opening["fence"][0] == "`" and "`" in opening["info"]):
            runs = _info_word(opening["info"]) in PYTHON_INFOS
            if not runs:
                _orphan(pending, name, problems)
            fence = _Fence(
                number, len(opening["indent"]), opening["fence"][0], len(opening["fence"]), runs, pending, []
            )
            pending = None
        else:
            _orphan(pending, name, problems)
            pending = None
    if fence is not None and fence.runs:  # an unclosed fence runs to the end of the page, as in CommonMark
        blocks.append(_block(fence, name, problems))
    _orphan(pending, name, problems)
    return Page(path, name, tuple(blocks), tuple(problems))


def _closes(fence: _Fence, text: str) -> bool:
    stripped = text.strip()
    return len(stripped) >= fence.length and set(stripped) == {fence.char}


def _dedent(text: str, indent: int) -> str:
    cut = len(text) - len(text.lstrip(" "))
    return text[min(cut, indent) :]


def _info_word(info: str) -> str:
    words = info.strip().split(maxsplit=1)
    return words[0].lower().lstrip("{.") if words else ""


def _block(fence: _Fence, name: str, problems: list[str]) -> Block:
    wire: tuple[str, ...] = ()
    if fence.marker is not None:
        wire = _wire_apis(fence.marker, name, problems)
    return Block(fence.line, "\n".join(fence.lines) + "\n", wire)


def _wire_apis(marker: tuple[int, str], name: str, problems: list[str]) -> tuple[str, ...]:
    line, text = marker
    words = text.split()
    apis = tuple(words[1:])
    if not words or words[0] != "wire" or not apis or any(api not in WIRE_APIS for api in apis):
        problems.append(
            f"{name}, line {line}: unknown test marker <!-- test: {text} --> "
            f"(known: {', '.join(f'wire {api}' for api in WIRE_APIS)})"
        )
        return ()
    return apis


def _orphan(pending: tuple[int, str] | None, name: str, problems: list[str]) -> None:
    if pending is not None:
        problems.append(
            f"{name}, line {pending[0]}: the test marker <!-- test: {pending[1]} --> precedes no python block"
        )


def find_pages(root: Path) -> list[Page]:
    """README.md and every Markdown file under docs/ that has a python block or a test marker.

    Args:
        root: The repository.

    Returns:
        The pages, README.md first, then docs/ in path order.
    """
    paths = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    pages = [read_page(path, path.relative_to(root).as_posix()) for path in paths if path.is_file()]
    return [page for page in pages if page.blocks or page.problems]


def run_page(page: Page, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run a page's python blocks in order, in one `__main__` namespace and one event loop.

    The caller has set the working directory and the environment; wire blocks change it for
    their own run only.

    Args:
        page: The page.
        monkeypatch: Sets `sys.modules["__main__"]` and the wire blocks' environment.

    Raises:
        DocsExampleError: A marker problem (before anything runs), or the first block that
            raised, with its page and line.
    """
    __tracebackhide__ = True
    if page.problems:
        raise DocsExampleError("; ".join(page.problems))
    main = types.ModuleType("__main__")
    monkeypatch.setitem(sys.modules, "__main__", main)
    wire: WireServer | None = None
    try:
        with ExitStack() as stack:
            runner = stack.enter_context(asyncio.Runner())
            for block in page.blocks:
                if block.wire and wire is None:
                    wire = stack.enter_context(WireServer())
                with monkeypatch.context() as patch:
                    if block.wire and wire is not None:
                        _point_at(wire, block.wire, patch)
                    _run_block(page, block, main.__dict__, runner)
    finally:
        # What the page left unclosed warns now, in its own test, rather than in whichever test runs when
        # the collector next does. An SDK client's connection sits in reference cycles, hence the full
        # collection (about 0.25 s) after a page that talked to the wire server; elsewhere dropping the
        # names suffices.
        main.__dict__.clear()
        if wire is not None:
            gc.collect()


def _point_at(wire: WireServer, apis: tuple[str, ...], patch: pytest.MonkeyPatch) -> None:
    missing = _WIRE_REPLIES - wire.pending
    wire.script(*(Reply(text=WIRE_ANSWER) for _ in range(missing)))
    if "anthropic" in apis:
        patch.setenv("ANTHROPIC_BASE_URL", wire.url)
        patch.setenv("ANTHROPIC_API_KEY", API_KEY)
    if "openai" in apis:
        patch.setenv("OPENAI_BASE_URL", wire.openai_url)
        patch.setenv("OPENAI_API_KEY", API_KEY)


def _shifted(code: types.CodeType, lines: int) -> types.CodeType:
    consts = tuple(_shifted(const, lines) if isinstance(const, types.CodeType) else const for const in code.co_consts)
    return code.replace(co_firstlineno=code.co_firstlineno + lines, co_consts=consts)


def _run_block(page: Page, block: Block, namespace: dict[str, object], runner: asyncio.Runner) -> None:
    __tracebackhide__ = True
    where = f"{page.name}: the python block at line {block.line}"
    try:
        code = compile(block.source, str(page.path), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    except SyntaxError as exc:
        raise DocsExampleError(f"{where} does not compile: {exc.msg} (line {block.line + (exc.lineno or 1)})") from exc
    # the block's lines keep their page line numbers, so a traceback shows the block itself
    code = _shifted(code, block.line)
    try:
        if code.co_flags & inspect.CO_COROUTINE:
            runner.run(eval(code, namespace))
        else:
            exec(code, namespace)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise DocsExampleError(f"{where} exited with {exc.code!r}") from exc
    except Exception as exc:
        raise DocsExampleError(f"{where} failed: {type(exc).__name__}: {exc}") from exc
