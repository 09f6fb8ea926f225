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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypeAlias

import msgspec

from lamina._typed_toml import TomlProblem, convert_table, did_you_mean, read_toml
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
        text = config.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return SourceProblem(config, None, f"cannot read: {exc}")
    try:
        return dataclasses.replace(_parse(directory.name, directory, read_toml(text, _SourceFile)), trust=trust)
    except TomlProblem as exc:
        return SourceProblem(config, exc.key, exc.problem)


_TOOL_NAMES: TypeAlias = Annotated[
    list[Annotated[str, msgspec.Meta(min_length=1, description="a tool name")]],
    msgspec.Meta(description="a list of tool names"),
]
_STRINGS: TypeAlias = Annotated[list[str], msgspec.Meta(description="a list of strings")]
_STRING_TABLE: TypeAlias = Annotated[dict[str, str], msgspec.Meta(description="a table of strings")]


class _Params(msgspec.Struct, kw_only=True):
    """What Lamina reads of an endpoint's `params` (a JSON schema: its other keys are kept as given)."""

    type: Literal["object"] = "object"
    properties: dict[str, dict[str, object]] = msgspec.field(default_factory=dict)
    required: list[str] = msgspec.field(default_factory=list)


class _EndpointFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """One `[[endpoints]]` table as written."""

    name: str
    method: str
    path: str
    description: str
    params: dict[str, object] = msgspec.field(default_factory=lambda: {"type": "object", "properties": {}})
    read_only: bool | None = None


class _SourceFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """`source.toml` as written: both kinds' fields; `_parse` checks which kind may have which."""

    kind: Literal["mcp", "api"]
    description: str
    enabled_tools: _TOOL_NAMES | None = None
    timeout: Annotated[float, msgspec.Meta(gt=0, description="a positive number of seconds")] = _DEFAULT_TIMEOUT
    headers: _STRING_TABLE | None = None
    command: str | None = None
    args: _STRINGS | None = None
    env: _STRING_TABLE | None = None
    url: str | None = None
    read_only_tools: _TOOL_NAMES | None = None
    base_url: str | None = None
    endpoints: list[_EndpointFile] | None = None


_ONLY: Final = {"mcp": ("command", "args", "env", "url", "read_only_tools"), "api": ("base_url", "endpoints")}
"""The fields of one kind only; the rest are both kinds'."""


def _parse(slug: str, directory: Path, data: _SourceFile) -> Source:
    other = "api" if data.kind == "mcp" else "mcp"
    for name in _ONLY[other]:
        if getattr(data, name) is not None:
            fields = [f for f in msgspec.structs.fields(_SourceFile) if f.name not in _ONLY[other]]
            listed = ", ".join(f.encode_name for f in fields)
            raise TomlProblem(name, f"only for an {other} source; the fields of an {data.kind} source are {listed}")
    description = _text(data.description, "description")
    enabled = tuple(data.enabled_tools) if data.enabled_tools is not None else None
    if data.kind == "mcp":
        return McpSource(
            slug=slug,
            directory=directory,
            description=description,
            connection=_mcp_connection(data),
            enabled_tools=enabled,
            read_only_tools=tuple(data.read_only_tools or ()),
            timeout=data.timeout,
        )
    base_url = _url(data.base_url, "base_url")
    if not data.endpoints:
        raise TomlProblem("endpoints", "an api source needs at least one [[endpoints]] table")
    endpoints = tuple(_endpoint(raw, f"endpoints[{index}]") for index, raw in enumerate(data.endpoints))
    names = [endpoint.name for endpoint in endpoints]
    for index, name in enumerate(names):
        if name in names[:index]:
            raise TomlProblem(f"endpoints[{index}].name", f"duplicate endpoint name {name!r}")
    for index, name in enumerate(enabled or ()):
        if name not in names:
            hint = did_you_mean(name, names)
            raise TomlProblem(
                f"enabled_tools[{index}]", f"{name!r} is not an endpoint{hint}; the endpoints are {', '.join(names)}"
            )
    return ApiSource(
        slug=slug,
        directory=directory,
        description=description,
        base_url=base_url,
        headers=_string_table(data.headers, "headers"),
        endpoints=endpoints,
        enabled_tools=enabled,
        timeout=data.timeout,
    )


def _mcp_connection(data: _SourceFile) -> McpStdio | McpHttp:
    if (data.command is None) == (data.url is None):
        raise TomlProblem(
            "command", 'an mcp source needs either "command" (stdio) or "url" (streamable HTTP), not both'
        )
    if data.url is not None:
        for stdio_only in ("args", "env"):
            if getattr(data, stdio_only) is not None:
                raise TomlProblem(stdio_only, 'only for a stdio server ("command"), not with "url"')
        return McpHttp(url=_url(data.url, "url"), headers=_string_table(data.headers, "headers"))
    if data.headers is not None:
        raise TomlProblem("headers", 'only for a streamable HTTP server ("url"), not with "command"')
    command = _text(data.command or "", "command")
    return McpStdio(command=command, args=tuple(data.args or ()), env=_string_table(data.env, "env"))


def _endpoint(raw: _EndpointFile, where: str) -> ApiEndpoint:
    name = _text(raw.name, f"{where}.name")
    if not _TOOL_PART.match(name) or "__" in name:
        raise TomlProblem(f"{where}.name", f"{name!r} must match [A-Za-z0-9_-]{{1,64}} without '__'")
    method = raw.method.strip().upper()
    if method not in _METHODS:
        hint = did_you_mean(method, _METHODS)
        raise TomlProblem(f"{where}.method", f"must be one of {', '.join(_METHODS)}, not {raw.method!r}{hint}")
    path = _text(raw.path, f"{where}.path")
    if not path.startswith("/"):
        raise TomlProblem(f"{where}.path", f"must start with '/', not {path!r}")
    try:
        params = convert_table(raw.params, _Params)
    except TomlProblem as exc:
        raise TomlProblem(f"{where}.params.{exc.key}" if exc.key else f"{where}.params", exc.problem) from None
    for placeholder in path_params(path):
        if placeholder not in params.properties:
            raise TomlProblem(f"{where}.path", f"placeholder {{{placeholder}}} is not a property of params")
        if placeholder not in params.required:
            raise TomlProblem(f"{where}.params.required", f"must include the path placeholder {placeholder!r}")
    read_only = raw.read_only if raw.read_only is not None else method in ("GET", "HEAD")
    return ApiEndpoint(
        name=name,
        method=method,
        path=path,
        description=_text(raw.description, f"{where}.description"),
        params={"type": "object", **raw.params, "properties": params.properties},
        read_only=read_only,
    )


def _text(value: str, key: str) -> str:
    if not value.strip():
        raise TomlProblem(key, "must not be empty")
    return value.strip()


def _url(value: str | None, key: str) -> str:
    if value is None:
        raise TomlProblem(key, "is required")
    url = _text(value, key)
    if not url.startswith(("http://", "https://", "${")):
        raise TomlProblem(key, f"must be an http:// or https:// URL, not {url!r}")
    return url


def _string_table(value: dict[str, str] | None, key: str) -> dict[str, str]:
    for name, item in (value or {}).items():
        for ref in _ENV_REF.findall(item):
            if not _ENV_NAME.match(ref):
                raise TomlProblem(f"{key}.{name}", f"${{{ref}}} is not a valid environment variable name")
    return dict(value or {})
