"""What every source tool shares: its name, its short description and its input check (pure).

A source tool is named `<slug>__<tool>` and described in one short sentence that points at the
source's guide: the endpoint or server documentation stays in `sources/<slug>/guide.md`, read on
demand, so tool specs stay small and stable and editing a guide changes no tool definition.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

import msgspec

from lamina.context import SafeText, ToolSpec
from lamina.defang import contains_reserved_marker, neutralise
from lamina.errors import MissingExtraError, ToolDefinitionError
from lamina.sources._source_config import GUIDE_FILE, SOURCES_DIR
from lamina.tools import ToolContext, ToolInputError, ToolOutput

MAX_DESCRIPTION: Final = 160
"""The longest description a source tool gets, guide pointer included."""
MAX_TOOL_NAME: Final = 64
"""Anthropic's and OpenAI's limit; names must also match `[A-Za-z0-9_-]`."""
SEPARATOR: Final = "__"
MAX_SCHEMA_BYTES: Final = 16_384
"""The largest input schema a source tool may have, as JSON; a larger one is refused."""
MAX_SCHEMA_DEPTH: Final = 20
"""The deepest JSON nesting (objects and arrays) an input schema may have, about ten nested object
properties; a deeper one is refused."""
MAX_SCHEMA_TEXT: Final = 400
"""The longest `description` or `title` inside a schema; a longer one is cut."""

_TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SCHEMA_TEXT_KEYS: Final = frozenset({"description", "title"})

_NOT_NAME: Final = re.compile(r"[^A-Za-z0-9_-]")
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s")


def tool_name(slug: str, tool: str) -> str:
    """`<slug>__<tool>`, made to fit the providers' rule `^[a-zA-Z0-9_-]{1,64}$`.

    Characters outside the rule become `_`; a name that is still too long is cut and given a short
    hash of the original, so two long names stay distinct.
    """
    name = f"{slug}{SEPARATOR}{_NOT_NAME.sub('_', tool)}"
    if len(name) <= MAX_TOOL_NAME and _NOT_NAME.sub("_", tool) == tool:
        return name
    digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
    return f"{name[: MAX_TOOL_NAME - 9]}_{digest}"


def guide_pointer(slug: str) -> str:
    """The sentence every source tool description ends with."""
    return f"Read {SOURCES_DIR}/{slug}/{GUIDE_FILE} before first use."


def short_description(text: str | None, slug: str) -> str:
    """The first sentence of `text` (cut to fit) followed by the guide pointer: at most `MAX_DESCRIPTION` characters."""
    pointer = guide_pointer(slug)
    first = " ".join((text or "").strip().split("\n\n")[0].split())
    first = _SENTENCE_END.split(first, maxsplit=1)[0] if first else ""
    room = MAX_DESCRIPTION - len(pointer) - 1
    if len(first) > room:
        first = first[: room - 1].rstrip() + "…"
    return f"{first} {pointer}" if first else pointer


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_Found = TypeVar("_Found", bound=_Named)
_Tool = TypeVar("_Tool")


def make_tools(
    enabled: Collection[str] | None, found: Iterable[_Found], make: Callable[[_Found], _Tool]
) -> tuple[list[_Tool], list[ToolDefinitionError]]:
    """The tools of a source: one made of each endpoint or server tool its `enabled_tools` names.

    Args:
        enabled: The source's `enabled_tools` (None: every one).
        found: The endpoints, or the tools the server lists.
        make: Makes the tool of one; a `ToolDefinitionError` refuses it (see `checked_definition`).

    Returns:
        The tools, in the order found, and the refusals.
    """
    tools: list[_Tool] = []
    refused: list[ToolDefinitionError] = []
    for item in found:
        if enabled is None or item.name in enabled:
            try:
                tools.append(make(item))
            except ToolDefinitionError as exc:
                refused.append(exc)
    return tools, refused


def _depth(value: object) -> int:
    if isinstance(value, Mapping):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list | tuple):
        return 1 + max(map(_depth, value), default=0)
    return 0


def _neutral_schema(value: Any, source: str, tool: str, key: str | None = None) -> Any:
    """`value` with every description and title neutralised and bounded; a key that reads as a marker is refused."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for name, item in value.items():
            if not isinstance(name, str) or contains_reserved_marker(name):
                raise ToolDefinitionError(source, tool, f"its input schema has the key {str(name)[:80]!r}")
            out[name] = _neutral_schema(item, source, tool, name)
        return out
    if isinstance(value, list | tuple):
        return [_neutral_schema(item, source, tool) for item in value]
    if isinstance(value, str) and key in _SCHEMA_TEXT_KEYS:
        return neutralise(value, max_chars=MAX_SCHEMA_TEXT)
    if isinstance(value, str) and contains_reserved_marker(value):
        raise ToolDefinitionError(source, tool, f"its input schema holds the value {value[:80]!r}")
    return value


def checked_definition(
    source: str, name: str, description: str, schema: Mapping[str, Any]
) -> tuple[str, SafeText, dict[str, Any]]:
    """A source tool's name, description and input schema, fit for a request.

    The name must match the providers' `^[A-Za-z0-9_-]{1,64}$`; the description is neutralised
    and bounded; the schema must be an object at most `MAX_SCHEMA_BYTES` long as JSON and
    `MAX_SCHEMA_DEPTH` deep, its descriptions and titles are neutralised and bounded, and a key or
    other value that reads as a reserved tag or role marker is refused.

    Raises:
        ToolDefinitionError: The name, or the schema, is refused; the message names the source and tool.
    """
    if not _TOOL_NAME.fullmatch(name):
        raise ToolDefinitionError(source, name[:80], "its name must match [A-Za-z0-9_-]{1,64}")
    if not isinstance(schema, Mapping):
        raise ToolDefinitionError(source, name, "its input schema is not a JSON object")
    try:
        size = len(msgspec.json.encode(schema))
    except (TypeError, msgspec.EncodeError) as exc:
        raise ToolDefinitionError(source, name, f"its input schema is not JSON ({exc})") from None
    if size > MAX_SCHEMA_BYTES:
        limit = f"{MAX_SCHEMA_BYTES:,}"
        raise ToolDefinitionError(source, name, f"its input schema is {size:,} bytes (the limit is {limit})")
    if (depth := _depth(schema)) > MAX_SCHEMA_DEPTH:
        limit = str(MAX_SCHEMA_DEPTH)
        raise ToolDefinitionError(source, name, f"its input schema is {depth} levels deep (the limit is {limit})")
    return name, neutralise(description, max_chars=2 * MAX_DESCRIPTION), _neutral_schema(schema, source, name)


def check_input(schema: Mapping[str, Any], raw: object) -> dict[str, Any]:
    """`raw` as a plain dict, checked against the whole of the tool's JSON schema (jsonschema).

    A schema jsonschema cannot use is left to the server or API, whose error comes back as the
    tool result.

    Raises:
        ToolInputError: The input does not fit the schema; the field is the path to the value that
            does not (`items/0/name`), the reason jsonschema's best-matching error.
        MissingExtraError: jsonschema is not installed (the mcp and http extras bring it).
    """
    if not isinstance(raw, Mapping):
        raise ToolInputError(None, f"the input must be a JSON object, got {type(raw).__name__}")
    try:
        import jsonschema
        from referencing.exceptions import Unresolvable
    except ImportError as exc:
        raise MissingExtraError.of(exc, "checking a source tool's input", "mcp") from None
    try:
        validator = _validator(msgspec.json.encode(schema))
        error = jsonschema.exceptions.best_match(validator.iter_errors(dict(raw)))
    except (jsonschema.exceptions.SchemaError, Unresolvable, msgspec.EncodeError, LookupError, TypeError):
        return dict(raw)  # a schema jsonschema cannot use (or a `$ref` it cannot follow): the server checks
    if error is None:
        return dict(raw)
    path = [str(part) for part in error.absolute_path]
    reason = error.message
    if error.validator == "required" and isinstance(error.instance, Mapping):
        missing = [name for name in error.validator_value if name not in error.instance]
        path, reason = path + missing[:1], "required field missing"
    elif error.validator == "type":
        reason = f"expected {' or '.join(_listed(error.validator_value))}, got {type(error.instance).__name__}"
    raise ToolInputError("/".join(path) or None, _clip(reason))


def _listed(value: object) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else [str(value)]


@functools.lru_cache(maxsize=64)
def _validator(encoded: bytes) -> Any:
    """A validator for the schema encoded as `encoded`, of the draft its `$schema` names (2020-12 by default)."""
    import jsonschema

    schema = msgspec.json.decode(encoded)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _clip(message: str) -> str:
    return message if len(message) <= 300 else message[:299] + "…"


class SourceTool(ABC):
    """A Lamina tool backed by a source: spec from the source, calls go to its server or API.

    Satisfies the `lamina.tools.Tool` protocol with a plain-dict input.
    """

    def __init__(
        self, *, source: str, name: str, remote_name: str, description: str, schema: Mapping[str, Any], guide: Path
    ) -> None:
        """A source tool with its spec.

        Args:
            source: The source's slug.
            name: The tool's Lamina name, starting with the slug.
            remote_name: The tool's name on the server, or the endpoint's name.
            description: The short description the model sees.
            schema: The JSON schema of its input.
            guide: The source's guide, read before the tool is called.
        """
        self.source = source
        """The slug of the source this tool belongs to."""
        self.remote_name = remote_name
        """The tool's name on the server, or the endpoint's name."""
        self.guide = guide
        """The source's guide: calls of this tool should wait until the model has read it."""
        self._name, self._description, self._schema = checked_definition(source, name, description, schema)

    @property
    def spec(self) -> ToolSpec:
        """The tool as the model sees it: its name, description and a fresh copy of its schema."""
        # A fresh schema each time: a caller that edits one cannot change the next.
        return ToolSpec(name=self._name, description=self._description, input_schema=copy.deepcopy(self._schema))

    @property
    @abstractmethod
    def read_only(self) -> bool:
        """True if the tool never changes anything (explore mode runs only these)."""

    def validate(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The input as a plain dict, after the checks the model can act on (`check_input`).

        Raises:
            ToolInputError: The input does not fit the schema.
        """
        return check_input(self._schema, raw)

    def paths(self, input: dict[str, Any]) -> tuple[Path, ...]:
        """No paths: a source tool touches no local file."""
        return ()  # a source tool touches no local path

    @abstractmethod
    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """Call the tool on its server or API; a failure comes back as an error result, never raised."""
