"""Source configurations: `sources/<slug>/source.toml` read and checked (I/O: reads the workspace).

A source is an MCP server or an HTTP API the agent reaches through tools, in its own folder of
the workspace next to its `guide.md`. `find_sources(root)` reads every source folder under
`root/sources/`; an invalid one is skipped and reported as a `SourceProblem` naming the file and
the field, so one broken source never hides the others (`docs/sources.md`).
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

from lamina.workspace import WorkspaceTrust, outside_roots

SOURCES_DIR: Final = "sources"
CONFIG_FILE: Final = "source.toml"
GUIDE_FILE: Final = "guide.md"

MAX_SLUG: Final = 32
_SLUG: Final = re.compile(r"^[a-z0-9](?:[a-z0-9-]|_(?!_))*$")
"""Lower-case letters, digits, `-` and single `_` (a double `_` separates slug and tool in tool names)."""
_TOOL_PART: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_PLACEHOLDER: Final = re.compile(r"\{([^{}]*)\}")
_ENV_REF: Final = re.compile(r"\$\{([^}]*)\}")
_ENV_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_METHODS: Final = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
_DEFAULT_TIMEOUT: Final = 60.0
UNTRUSTED_REASON: Final = "not started: the workspace is not trusted (`lamina trust` trusts it)"
"""Why a source of an untrusted workspace provides no tools (`SourceConnections.problems`)."""


@dataclass(frozen=True, slots=True)
class SourceProblem:
    """Why a source folder was skipped: the file, the field (when one is to blame) and the reason."""

    path: Path
    field: str | None
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.field}: {self.reason}" if self.field else f"{self.path}: {self.reason}"


@dataclass(frozen=True, slots=True)
class McpStdio:
    """An MCP server started as a subprocess and spoken to over stdin/stdout."""

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment variables for the server; values may reference `${NAME}` of Lamina's environment."""
    kind: Literal["stdio"] = "stdio"


@dataclass(frozen=True, slots=True)
class McpHttp:
    """An MCP server reached over streamable HTTP."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    """Sent with every request; values may reference `${NAME}`."""
    kind: Literal["http"] = "http"


@dataclass(frozen=True, slots=True)
class McpSource:
    """A source whose tools come from an MCP server (`kind = "mcp"`)."""

    slug: str
    directory: Path
    description: str
    connection: McpStdio | McpHttp
    enabled_tools: tuple[str, ...] | None = None
    """Only these server tools become Lamina tools; None means all of them."""
    read_only_tools: tuple[str, ...] = ()
    """Server tools the workspace declares read-only (the server's own hints are not trusted)."""
    timeout: float = _DEFAULT_TIMEOUT
    """Seconds a call, or the start-up handshake, may take."""
    trust: WorkspaceTrust = WorkspaceTrust.TRUSTED
    """Whether the user trusts where it came from: `find_sources` gives the workspace's trust; one a
    program builds itself is its own (trusted). An untrusted source never starts or connects."""
    kind: Literal["mcp"] = "mcp"


@dataclass(frozen=True, slots=True)
class ApiEndpoint:
    """One HTTP endpoint of an API source, as a tool."""

    name: str
    method: str
    path: str
    """Relative to the source's `base_url`; `{param}` placeholders are filled from the input."""
    description: str
    params: Mapping[str, Any]
    """JSON schema (an object) of the tool's input. Path placeholders must be properties of it;
    other properties go in the query string (GET, HEAD, DELETE) or the JSON body."""
    read_only: bool
    """GET and HEAD endpoints are read-only unless the config says otherwise."""


@dataclass(frozen=True, slots=True)
class ApiSource:
    """A source whose tools are HTTP endpoints (`kind = "api"`)."""

    slug: str
    directory: Path
    description: str
    base_url: str
    headers: Mapping[str, str]
    """Sent with every request; values may reference `${NAME}` (resolved at call time, never stored)."""
    endpoints: tuple[ApiEndpoint, ...]
    enabled_tools: tuple[str, ...] | None = None
    timeout: float = _DEFAULT_TIMEOUT
    trust: WorkspaceTrust = WorkspaceTrust.TRUSTED
    """As `McpSource.trust`: an untrusted API source is never called, its `${VAR}`s never expanded."""
    kind: Literal["api"] = "api"


Source: TypeAlias = McpSource | ApiSource


@dataclass(frozen=True, slots=True)
class SourceScan:
    """The sources of a workspace that could be read, and the folders that could not."""

    sources: tuple[Source, ...]
    problems: tuple[SourceProblem, ...]


class _Invalid(Exception):
    def __init__(self, field: str | None, reason: str) -> None:
        super().__init__(reason)
        self.field = field
        self.reason = reason


def find_sources(
    root: Path,
    *,
    allowed_roots: Sequence[str | os.PathLike[str]] = (),
    trust: WorkspaceTrust = WorkspaceTrust.UNTRUSTED,
) -> SourceScan:
    """The sources under `root/sources/`, sorted by slug; invalid ones are skipped and reported.

    A missing `sources/` folder means no sources (not a problem). Reading them runs nothing:
    whether they may start is `trust`, which each source carries (`SourceConnections` connects
    only trusted ones).

    Args:
        root: The workspace.
        allowed_roots: Folders besides `root` the sources' files may resolve into. The folder, each
            source folder, its `source.toml` and its `guide.md` must resolve inside `root` or one of
            these: one that a link takes elsewhere is a problem, and the source is skipped.
        trust: Whether the user trusts the workspace (`lamina.workspace.workspace_trust`); untrusted
            unless given, so a cloned repository's sources never start by default.

    Returns:
        The sources found and the problems of those skipped.
    """
    folder = Path(root) / SOURCES_DIR
    if not folder.is_dir():
        return SourceScan((), ())
    roots = (root, *allowed_roots)
    outside = outside_roots(folder, roots)
    if outside is not None:
        return SourceScan((), (SourceProblem(folder, None, outside),))
    sources: list[Source] = []
    problems: list[SourceProblem] = []
    for directory in sorted(folder.iterdir()):
        if not directory.is_dir() or directory.name.startswith("."):
            continue
        loaded = _load(directory, roots, trust)
        if isinstance(loaded, SourceProblem):
            problems.append(loaded)
        else:
            sources.append(loaded)
    return SourceScan(tuple(sources), tuple(problems))


def load_source(
    root: Path,
    slug: str,
    *,
    allowed_roots: Sequence[str | os.PathLike[str]] = (),
    trust: WorkspaceTrust = WorkspaceTrust.UNTRUSTED,
) -> Source | SourceProblem:
    """The source `slug` of the workspace at `root` (with `trust`, as `find_sources`), or why it cannot load."""
    folder = Path(root) / SOURCES_DIR
    problem = slug_problem(slug)
    if problem is not None:
        return SourceProblem(folder, "slug", problem)
    return _load(folder / slug, (root, *allowed_roots), trust)


def slug_problem(slug: str) -> str | None:
    """Why `slug` cannot name a source (a path component, too long, bad characters), or None if it can."""
    if not slug or len(slug) > MAX_SLUG:
        return f"a source slug must have 1 to {MAX_SLUG} characters, got {len(slug)}"
    if not _SLUG.match(slug):
        return (
            f"invalid source slug {slug!r}: use lower-case letters, digits, '-' and single '_' "
            "(no path separators, no leading '.', no '__')"
        )
    return None


def expand_env(value: str, environ: Mapping[str, str]) -> str:
    """`value` with every `${NAME}` replaced from `environ`.

    Raises:
        KeyError: A referenced variable is not set (the key is its name).
    """

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise KeyError(name)
        return environ[name]

    return _ENV_REF.sub(replace, value)


def env_references(source: Source) -> tuple[str, ...]:
    """The `${NAME}`s a source's command, arguments, environment, URL and headers reference, in order, once each."""
    texts: list[str]
    if isinstance(source, ApiSource):
        texts = [source.base_url, *source.headers.values()]
    elif isinstance(source.connection, McpStdio):
        texts = [source.connection.command, *source.connection.args, *source.connection.env.values()]
    else:
        texts = [source.connection.url, *source.connection.headers.values()]
    return tuple(dict.fromkeys(name for text in texts for name in _ENV_REF.findall(text)))


def describe_source(source: Source) -> str:
    """What connecting `source` would do, in one line: the command it runs or the URL it reaches, and its secrets.

    For the question that asks the user to trust a workspace (`lamina chat`) and the line that says
    what an untrusted one was not allowed to do (`lamina run`).
    """
    names = env_references(source)
    sends = f", with {', '.join('${' + name + '}' for name in names)}" if names else ""
    if isinstance(source, ApiSource):
        return f"API source {source.slug}: calls {source.base_url}{sends}"
    if isinstance(source.connection, McpStdio):
        command = " ".join((source.connection.command, *source.connection.args))
        return f"MCP source {source.slug}: runs `{command}` in {source.directory}{sends}"
    return f"MCP source {source.slug}: connects to {source.connection.url}{sends}"


def path_params(path: str) -> tuple[str, ...]:
    """The `{param}` placeholders of an endpoint path, in order."""
    return tuple(_PLACEHOLDER.findall(path))


def _load(directory: Path, roots: Sequence[str | os.PathLike[str]], trust: WorkspaceTrust) -> Source | SourceProblem:
    config = directory / CONFIG_FILE
    problem = slug_problem(directory.name)
    if problem is not None:
        return SourceProblem(directory, "slug", problem)
    if not config.is_file():
        return SourceProblem(config, None, f"missing {CONFIG_FILE}")
    if not (directory / GUIDE_FILE).is_file():
        return SourceProblem(directory / GUIDE_FILE, None, f"missing {GUIDE_FILE}: every source needs a guide")
    for path in (directory, config, directory / GUIDE_FILE):
        outside = outside_roots(path, roots)
        if outside is not None:
            return SourceProblem(path, None, outside)
    try:
        data = tomllib.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return SourceProblem(config, None, f"cannot read: {exc}")
    except tomllib.TOMLDecodeError as exc:
        return SourceProblem(config, None, f"invalid TOML: {exc}")
    try:
        return dataclasses.replace(_parse(directory.name, directory, data), trust=trust)
    except _Invalid as exc:
        return SourceProblem(config, exc.field, exc.reason)


def _parse(slug: str, directory: Path, data: Mapping[str, Any]) -> Source:
    kind = data.get("kind")
    description = _string(data, "description")
    enabled = _names(data, "enabled_tools") if "enabled_tools" in data else None
    timeout = _timeout(data)
    if kind == "mcp":
        known = {"kind", "description", "command", "args", "env", "url", "headers", "enabled_tools"}
        _no_unknown(data, known | {"read_only_tools", "timeout"}, "")
        return McpSource(
            slug=slug,
            directory=directory,
            description=description,
            connection=_mcp_connection(data),
            enabled_tools=enabled,
            read_only_tools=_names(data, "read_only_tools") if "read_only_tools" in data else (),
            timeout=timeout,
        )
    if kind == "api":
        _no_unknown(data, {"kind", "description", "base_url", "headers", "endpoints", "enabled_tools", "timeout"}, "")
        base_url = _string(data, "base_url")
        if not base_url.startswith(("http://", "https://", "${")):
            raise _Invalid("base_url", f"must be an http:// or https:// URL, got {base_url!r}")
        raw_endpoints = data.get("endpoints")
        if not isinstance(raw_endpoints, list) or not raw_endpoints:
            raise _Invalid("endpoints", "an api source needs at least one [[endpoints]] table")
        endpoints = tuple(_endpoint(raw, f"endpoints[{index}]") for index, raw in enumerate(raw_endpoints))
        names = [endpoint.name for endpoint in endpoints]
        for index, name in enumerate(names):
            if name in names[:index]:
                raise _Invalid(f"endpoints[{index}].name", f"duplicate endpoint name {name!r}")
        for name in enabled or ():
            if name not in names:
                raise _Invalid("enabled_tools", f"{name!r} is not an endpoint (endpoints: {', '.join(names)})")
        return ApiSource(
            slug=slug,
            directory=directory,
            description=description,
            base_url=base_url,
            headers=_string_table(data, "headers"),
            endpoints=endpoints,
            enabled_tools=enabled,
            timeout=timeout,
        )
    raise _Invalid("kind", f'must be "mcp" or "api", got {kind!r}')


def _mcp_connection(data: Mapping[str, Any]) -> McpStdio | McpHttp:
    has_command, has_url = "command" in data, "url" in data
    if has_command == has_url:
        raise _Invalid("command", 'an mcp source needs either "command" (stdio) or "url" (streamable HTTP), not both')
    if has_url:
        for stdio_only in ("args", "env"):
            if stdio_only in data:
                raise _Invalid(stdio_only, 'only for a stdio server ("command"), not with "url"')
        url = _string(data, "url")
        if not url.startswith(("http://", "https://", "${")):
            raise _Invalid("url", f"must be an http:// or https:// URL, got {url!r}")
        return McpHttp(url=url, headers=_string_table(data, "headers"))
    if "headers" in data:
        raise _Invalid("headers", 'only for a streamable HTTP server ("url"), not with "command"')
    args = data.get("args", [])
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise _Invalid("args", "must be a list of strings")
    return McpStdio(command=_string(data, "command"), args=tuple(args), env=_string_table(data, "env"))


def _endpoint(raw: object, where: str) -> ApiEndpoint:
    if not isinstance(raw, dict):
        raise _Invalid(where, "must be a table")
    _no_unknown(raw, {"name", "method", "path", "description", "params", "read_only"}, f"{where}.")
    name = _string(raw, "name", where)
    if not _TOOL_PART.match(name) or "__" in name:
        raise _Invalid(f"{where}.name", f"{name!r} must match [A-Za-z0-9_-]{{1,64}} without '__'")
    method = _string(raw, "method", where).upper()
    if method not in _METHODS:
        raise _Invalid(f"{where}.method", f"must be one of {', '.join(_METHODS)}, got {method!r}")
    path = _string(raw, "path", where)
    if not path.startswith("/"):
        raise _Invalid(f"{where}.path", f"must start with '/', got {path!r}")
    params = raw.get("params", {"type": "object", "properties": {}})
    if not isinstance(params, dict) or params.get("type", "object") != "object":
        raise _Invalid(f"{where}.params", 'must be a JSON schema table with type = "object"')
    properties = params.get("properties", {})
    if not isinstance(properties, dict) or not all(isinstance(prop, dict) for prop in properties.values()):
        raise _Invalid(f"{where}.params.properties", "must be a table of JSON schemas")
    required = params.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise _Invalid(f"{where}.params.required", "must be a list of property names")
    for placeholder in path_params(path):
        if placeholder not in properties:
            raise _Invalid(f"{where}.path", f"placeholder {{{placeholder}}} is not a property of params")
        if placeholder not in required:
            raise _Invalid(f"{where}.params.required", f"must include the path placeholder {placeholder!r}")
    read_only = raw.get("read_only", method in ("GET", "HEAD"))
    if not isinstance(read_only, bool):
        raise _Invalid(f"{where}.read_only", "must be true or false")
    schema = {"type": "object", **params, "properties": properties}
    return ApiEndpoint(
        name=name,
        method=method,
        path=path,
        description=_string(raw, "description", where),
        params=schema,
        read_only=read_only,
    )


def _string(data: Mapping[str, Any], key: str, where: str = "") -> str:
    value = data.get(key)
    name = f"{where}.{key}" if where else key
    if not isinstance(value, str) or not value.strip():
        reason = "is required" if value is None else f"must be a non-empty string, got {type(value).__name__}"
        raise _Invalid(name, reason)
    return value.strip()


def _names(data: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = data.get(key)
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise _Invalid(key, "must be a list of tool names")
    return tuple(value)


def _string_table(data: Mapping[str, Any], key: str) -> dict[str, str]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise _Invalid(key, "must be a table of strings")
    for name, item in value.items():
        if not isinstance(item, str):
            raise _Invalid(f"{key}.{name}", f"must be a string, got {type(item).__name__}")
        for ref in _ENV_REF.findall(item):
            if not _ENV_NAME.match(ref):
                raise _Invalid(f"{key}.{name}", f"${{{ref}}} is not a valid environment variable name")
    return dict(value)


def _timeout(data: Mapping[str, Any]) -> float:
    value = data.get("timeout", _DEFAULT_TIMEOUT)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise _Invalid("timeout", f"must be a positive number of seconds, got {value!r}")
    return float(value)


def _no_unknown(data: Mapping[str, Any], known: set[str], where: str) -> None:
    for key in data:
        if key not in known:
            raise _Invalid(f"{where}{key}", f"unknown field (the fields are: {', '.join(sorted(known))})")
