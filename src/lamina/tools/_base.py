"""The tool interface: `Tool`, its `ToolContext` and `ToolOutput`, input validation (I/O: path resolution).

A tool satisfies the `Tool` protocol; `StructTool` derives the schema from a msgspec `Struct`, so
the schema the model sees and the validation it gets cannot drift apart. Tools never raise for a
bad call: it is a `ToolOutput` with `is_error=True`. See docs/tools.md, "The tool interface".
"""

from __future__ import annotations

import copy
import enum
import functools
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Generic, Protocol, TypeAlias, TypeVar

import msgspec

from lamina.attachments import AttachmentStore, NamedBytes
from lamina.context import ToolSpec
from lamina.defang import trusted
from lamina.errors import LaminaError, UsageError
from lamina.session import VIRTUAL_ROOT, ReadStamp, SessionFiles, ToolResult
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator
from lamina.tools._offload import OffloadPolicy
from lamina.workspace import Located, locate

InputT = TypeVar("InputT")
StructT = TypeVar("StructT", bound=msgspec.Struct)

_AT_FIELD: Final = re.compile(r" - at `\$\.?([^`]*)`$")
_NAMED_FIELD: Final = re.compile(r"field `([^`]+)`")


class PermissionMode(enum.Enum):
    """How much a session's agent may do without asking."""

    EXPLORE = "explore"
    """Read-only tools only; every other call is denied with a message."""
    PLAN = "plan"
    """Read everything; write only inside the session's plans folder (then `SubmitPlan`)."""
    ASK = "ask"
    """Read-only tools run; every other call runs only if the pipeline's `ask` callback approves it."""
    EXECUTE = "execute"
    """Every tool runs (rules still apply)."""


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool returns: the text for the model, and whether the call failed."""

    content: str
    is_error: bool = False
    ends_turn: bool = False
    """The turn ends after this call's batch (a submitted plan waits for the user)."""
    images: tuple[NamedBytes, ...] = ()
    """Images for the model, as the tool received them (an MCP server's image content): the pipeline
    stores them in the session's attachment store and the result refers to them."""
    read: ReadStamp | None = None
    """What a Read showed (file, hash, window), logged on the result for later Reads of the same file."""


PlanSink: TypeAlias = Callable[[str, str, str], str]
"""Records a submitted plan (title, path, text) and returns its id; raises `UsageError` if it cannot."""


class ToolInputError(UsageError):
    """A tool's input does not fit its schema; the model gets the message as an error result."""

    def __init__(self, field: str | None, reason: str) -> None:
        self.field = field
        """The offending field (`offset`, `edits[0].path`), or None when the input as a whole is wrong."""
        self.reason = reason
        super().__init__(f"{field}: {reason}" if field else reason)


@dataclass(frozen=True, slots=True)
class ToolContext:
    """The session a tool call runs in: where it works, what it may touch and who approves.

    Paths are made absolute and resolved (symlinks followed) when the context is built: this is the
    only disk access in this module.
    """

    cwd: Path
    """The session's working directory: relative paths in tool input start here, and Bash runs here."""
    data_dir: Path
    """The session's data folder; offloaded results go to its `tool-results/` folder. Readable by
    read-only tools, not writable through them."""
    allowed_roots: tuple[Path, ...] = ()
    """Folders every tool's paths must stay inside; empty means just `cwd` (filled in at construction, so
    `dataclasses.replace(ctx, cwd=...)` keeps the old roots unless they are replaced too)."""
    mode: PermissionMode = PermissionMode.ASK
    plans_dir: Path | None = None
    """The session's plans folder: readable, writable in every mode that writes, the only folder plan mode writes."""
    submit_plan: PlanSink | None = None
    """Where `SubmitPlan` hands a plan to the session; None: plans cannot be submitted here."""
    request_results: Callable[[], Iterable[ToolResult]] | None = None
    """The tool results the next request holds (the provider view's context window, prunes applied), for
    Read to point at a result still there instead of sending it again; None: Read always sends the file."""
    offload: OffloadPolicy = field(default_factory=OffloadPolicy)
    estimator: TokenEstimator = DEFAULT_ESTIMATOR
    attachments: AttachmentStore | None = None
    """The session's attachment store, where images a tool returns are kept; None: they are refused with a note."""
    progress: Callable[[str], None] | None = None
    """Where a running call reports: the pipeline calls it with `""` when the tool starts (after any
    approval), and a tool that streams (Bash) with its output as it comes. None: nobody listens."""
    files: SessionFiles | None = None
    """The session's files: offloaded results and plans are put there, and a path shown as one of them
    (`lamina:/session/…` with a database store) resolves to its local copy, fetched on demand. None:
    the folders above are plain local folders."""
    checked_paths: tuple[Path, ...] = ()
    """The paths the pipeline checked for this call, resolved, in the order `Tool.paths` gives them: a
    tool opening one refuses when it now resolves elsewhere (a link re-pointed since). Empty: unchecked."""
    hidden: Callable[[Path], bool] | None = None
    """Whether a file a call meets on its way (a Grep match, a Glob result) is left out of its output: a
    rule's `hides` (a deny rule on reading it). The pipeline sets it for each call; None hides nothing."""

    def __post_init__(self) -> None:
        cwd = Path(self.cwd).resolve()
        roots = tuple(Path(root).resolve() for root in self.allowed_roots) or (cwd,)
        object.__setattr__(self, "cwd", cwd)
        object.__setattr__(self, "data_dir", Path(self.data_dir).resolve())
        object.__setattr__(self, "allowed_roots", roots)
        if self.plans_dir is not None:
            object.__setattr__(self, "plans_dir", Path(self.plans_dir).resolve())

    @property
    def readable_roots(self) -> tuple[Path, ...]:
        """Where read-only tools may look: the allowed roots, the data folder and the plans folder."""
        plans = () if self.plans_dir is None else (self.plans_dir,)
        return (*self.allowed_roots, self.data_dir, *plans)

    @property
    def writable_roots(self) -> tuple[Path, ...]:
        """Where other tools may write: the allowed roots and the plans folder; in plan mode only the plans folder."""
        plans = () if self.plans_dir is None else (self.plans_dir,)
        if self.mode is PermissionMode.PLAN:
            return plans
        return (*self.allowed_roots, *plans)

    def hides(self, path: Path) -> bool:
        """Whether `path`, a file met on the way (a Grep match, a Glob result), is left out (`hidden`)."""
        return self.hidden is not None and self.hidden(path)

    def _shown_session_file(self, path: Path) -> str | None:
        assert self.files is not None
        return _session_file_shown(self.files, self.data_dir.parent, path)

    def path(self, raw: str | os.PathLike[str]) -> Path:
        """`raw` made absolute against `cwd` (not resolved: the OS follows links when the tool opens it).

        A session file's shown path (`lamina:/session/data/…`) is its local copy, fetched if needed.
        """
        if self.files is not None and str(raw).startswith(VIRTUAL_ROOT):
            name = self.files.file_name(str(raw))
            if name is not None:
                try:
                    return self.files.local_file(name)
                except (OSError, LaminaError):  # not fetched: the tool finds no file at the local path
                    return self.data_dir.parent / name
        return self.cwd / raw

    def display(self, path: Path) -> str:
        """How a path is shown to the model: relative to `cwd` when under it, else absolute.

        A session file's local copy is shown as the session shows the file (`lamina:/session/…`).
        """
        normal = os.path.normpath(path)
        if self.files is not None and (shown := self._shown_session_file(Path(normal))) is not None:
            return shown
        relative = os.path.relpath(normal, self.cwd)
        if relative == os.curdir or not (relative == os.pardir or relative.startswith(os.pardir + os.sep)):
            return Path(relative).as_posix()
        return normal


def located(
    ctx: ToolContext,
    path: Path,
    *,
    write: bool = False,
    index: int = 0,
    folder: bool = False,
    make_folders: bool = False,
) -> Located:
    """`path` resolved by descriptor inside the roots the call may use (`lamina.workspace.locate`).

    Args:
        ctx: The call's context: its roots, and the path the pipeline checked (`checked_paths[index]`).
        path: The absolute path (`ctx.path` of the input).
        write: Inside the writable roots; else the readable ones.
        index: Which of the call's checked paths `path` is.
        folder: The path names a folder, held open itself.
        make_folders: Create missing folders on the way (for a write).

    Raises:
        PathEscapeError: The path leads outside the roots, or elsewhere than where it was checked.
        OSError: It cannot be resolved (a name missing, not permitted, a link loop).
    """
    roots = ctx.writable_roots if write else ctx.readable_roots
    expect = ctx.checked_paths[index] if index < len(ctx.checked_paths) else None
    return locate(path, roots, expect=expect, folder=folder, make_folders=make_folders)


def _session_file_shown(files: SessionFiles, root: Path, path: Path) -> str | None:
    if not path.is_relative_to(root) or path == root:
        return None
    try:
        shown = files.shown_path(path.relative_to(root).as_posix())
    except UsageError:
        return None
    return shown if shown.startswith(VIRTUAL_ROOT) else None


def within(path: Path, roots: tuple[Path, ...]) -> bool:
    """Whether the resolved absolute `path` is one of `roots` or lies below one."""
    return any(path == root or path.is_relative_to(root) for root in roots)


class Tool(Protocol[InputT]):
    """A tool the model can call."""

    @property
    def spec(self) -> ToolSpec:
        """Name, description and input schema, as sent to the provider."""
        ...

    @property
    def read_only(self) -> bool:
        """True if the tool never changes anything (explore mode runs only these)."""
        ...

    def validate(self, raw: Mapping[str, Any]) -> InputT:
        """The typed input for `raw`.

        Raises:
            ToolInputError: `raw` does not fit the schema; the message names the field.
        """
        ...

    def paths(self, input: InputT) -> tuple[Path, ...]:
        """The paths a call touches, as given (relative to the session's cwd or absolute)."""
        ...

    async def run(self, input: InputT, ctx: ToolContext) -> ToolOutput:
        """Carry out the call; problems the model can act on come back as `is_error` outputs."""
        ...


class StructTool(Generic[StructT]):
    """Base for tools whose input is a msgspec `Struct`: spec and validation come from `input_type`.

    Subclasses set `name`, `description`, `read_only` and `input_type`, and implement `run` (and
    `paths` if the call touches paths).
    """

    name: str
    description: str
    read_only: bool = False
    input_type: type[StructT]

    @property
    def spec(self) -> ToolSpec:
        # A fresh schema each time (copied from a cache): a caller that edits one cannot change the next.
        # a built-in tool's description is Lamina's own text
        description = trusted(self.description)
        return ToolSpec(name=self.name, description=description, input_schema=struct_schema(self.input_type))

    def validate(self, raw: Mapping[str, Any]) -> StructT:
        return convert_input(raw, self.input_type)

    def paths(self, input: StructT) -> tuple[Path, ...]:
        return ()

    async def run(self, input: StructT, ctx: ToolContext) -> ToolOutput:
        raise NotImplementedError


def convert_input(raw: object, input_type: type[StructT]) -> StructT:
    """`raw` converted to `input_type` (lax: `"5"` is accepted for an integer).

    Raises:
        ToolInputError: The input is not an object, lacks a field, has an unknown one or a bad value.
    """
    if not isinstance(raw, Mapping):
        raise ToolInputError(None, f"the input must be a JSON object, got {type(raw).__name__}")
    try:
        return msgspec.convert(raw, input_type, strict=False)
    except msgspec.ValidationError as exc:
        raise _input_error(str(exc), input_type) from None


def _input_error(message: str, input_type: type[msgspec.Struct]) -> ToolInputError:
    # msgspec says "Expected `int` >= 1 - at `$.offset`", "Object missing required field `path`"
    # or "Object contains unknown field `x`".
    at = _AT_FIELD.search(message)
    if at is not None:
        return ToolInputError(at.group(1) or None, message[: at.start()])
    named = _NAMED_FIELD.search(message)
    if named is None:
        return ToolInputError(None, message)
    if "unknown field" in message:
        fields = ", ".join(input_type.__struct_fields__)
        return ToolInputError(named.group(1), f"unknown field (the fields are: {fields})")
    if "missing required field" in message:
        return ToolInputError(named.group(1), "required field missing")
    return ToolInputError(named.group(1), message)


def struct_schema(input_type: type[msgspec.Struct]) -> dict[str, Any]:
    """The JSON schema of a flat input struct, inlined, with nullable fields shown as optional."""
    return copy.deepcopy(_struct_schema(input_type))


@functools.cache
def _struct_schema(input_type: type[msgspec.Struct]) -> dict[str, Any]:
    _, components = msgspec.json.schema_components((input_type,), ref_template="#/$defs/{name}")
    schema = dict(components[input_type.__name__])
    schema.pop("title", None)
    schema.pop("description", None)  # the tool's description says it once
    properties: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        # `int | None = None` comes out as anyOf [int, null]: show the field as an optional int.
        options = prop.get("anyOf")
        if options is not None and len(options) == 2 and {"type": "null"} in options:
            (inner,) = (option for option in options if option != {"type": "null"})
            prop = {**inner, **{k: v for k, v in prop.items() if k not in ("anyOf", "default")}}
        properties[name] = prop
    schema["properties"] = properties
    if "$ref" in str(schema):
        raise UsageError(f"{input_type.__name__}: tool inputs must be flat structs (no nested definitions)")
    return schema
