"""Reading `sources/<slug>/source.toml`: valid configs load, invalid ones are reported with file and field."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from hypothesis import given

from lamina.sources import ApiSource, McpSource, McpStdio, SourceProblem, find_sources
from lamina.sources._source_config import _SourceFile, load_source
from lamina.sources._tool import MAX_DESCRIPTION, short_description, tool_name
from tests.sources.conftest import write_source
from tests.support.toml_text import Toml, toml_document, toml_documents

_API = """
kind = "api"
description = "x"
base_url = "https://example.test"
[[endpoints]]
name = "get"
method = "GET"
path = "/items/{id}"
description = "Get."
params.required = ["id"]
params.properties = { id = { type = "string" } }
"""


def test_valid_sources_load_sorted_by_slug(workspace: Path) -> None:
    write_source(workspace, "zeta", _API)
    write_source(
        workspace, "alpha", 'kind = "mcp"\ndescription = "d"\ncommand = "srv"\nargs = ["-v"]\nenv = { A = "1" }\n'
    )
    scan = find_sources(workspace)
    assert scan.problems == ()
    assert [source.slug for source in scan.sources] == ["alpha", "zeta"]
    alpha = scan.sources[0]
    assert isinstance(alpha, McpSource)
    assert alpha.connection == McpStdio(command="srv", args=("-v",), env={"A": "1"})


def test_no_sources_folder_means_no_sources(workspace: Path) -> None:
    assert find_sources(workspace).sources == ()


@pytest.mark.parametrize(
    ("config", "field", "reason"),
    [
        ('kind = "ftp"\ndescription = "d"\n', "kind", "invalid enum value 'ftp'; allowed: 'api', 'mcp'"),
        ('kind = "mcp"\ncommand = "x"\n', "description", "is required"),
        ('kind = "mcp"\ndescription = "d"\n', "command", 'either "command"'),
        ('kind = "mcp"\ndescription = "d"\ncommand = "x"\nargs = "a"\n', "args", "must be a list of strings"),
        ('kind = "mcp"\ndescription = "d"\ncommand = "x"\ncolour = 1\n', "colour", "unknown field"),
        (_API.replace('"/items/{id}"', '"/items/{key}"'), "endpoints[0].path", "placeholder {key}"),
        (_API.replace('method = "GET"', 'method = "FETCH"'), "endpoints[0].method", "must be one of"),
        (_API.replace('name = "get"', 'name = "a b"'), "endpoints[0].name", "must match"),
        (_API.replace("https://example.test", "ftp://x"), "base_url", "http:// or https://"),
        ("timeout = -1\n" + _API, "timeout", "positive number"),
        (_API.replace('kind = "api"', 'kind = "api"\nheaders = { X = "${1BAD}" }'), "headers.X", "not a valid"),
    ],
)
def test_invalid_config_is_reported_with_file_and_field(workspace: Path, config: str, field: str, reason: str) -> None:
    write_source(workspace, "good", _API)
    folder = write_source(workspace, "broken", config)
    scan = find_sources(workspace)
    assert [source.slug for source in scan.sources] == ["good"]
    (problem,) = scan.problems
    assert (problem.path, problem.field) == (folder / "source.toml", field)
    assert reason in problem.reason
    assert str(problem).startswith(f"{folder / 'source.toml'}: {field}: ")


def test_invalid_toml_and_missing_guide_are_reported(workspace: Path) -> None:
    bad = write_source(workspace, "bad", "kind = \n")
    unguided = write_source(workspace, "unguided", _API, guide=None)
    problems = {problem.path: problem for problem in find_sources(workspace).problems}
    assert problems[bad / "source.toml"].reason.startswith("not valid TOML")
    assert "missing guide.md" in problems[unguided / "guide.md"].reason


_MCP_FIELDS = "kind, description, enabled_tools, timeout, headers, command, args, env, url, read_only_tools"


@pytest.mark.parametrize(
    ("config", "said"),
    [
        (
            'kind = "mpc"\ndescription = "d"\ncommand = "x"\n',
            "kind: invalid enum value 'mpc' (did you mean 'mcp'?); allowed: 'api', 'mcp'",
        ),
        (
            'kind = "mcp"\ndescripton = "d"\ncommand = "x"\n',
            "descripton: unknown field 'descripton' (did you mean "
            f"'description'?); the fields are {_MCP_FIELDS}, base_url, endpoints",
        ),
        (
            'kind = "mcp"\ndescription = "d"\ncommand = "x"\nbase_url = "https://x.test"\n',
            f"base_url: only for an api source; the fields of an mcp source are {_MCP_FIELDS}",
        ),
        (
            _API.replace('method = "GET"', 'methd = "GET"'),
            "endpoints[0].methd: unknown field 'methd' (did you mean "
            "'method'?); the fields are name, method, path, description, params, read_only",
        ),
        (
            _API.replace('method = "GET"', 'method = "GTE"'),
            "endpoints[0].method: must be one of GET, POST, PUT, PATCH, DELETE, HEAD, not 'GTE' (did you mean 'GET'?)",
        ),
        (
            _API.replace("\nbase_url", '\nenabled_tools = ["gte"]\nbase_url'),
            "enabled_tools[0]: 'gte' is not an endpoint (did you mean 'get'?); the endpoints are get",
        ),
        (
            _API.replace('{ type = "string" }', '"string"'),
            "endpoints[0].params.properties.id: must be a table, not a string",
        ),
        (
            _API.replace("params.required", 'params.type = "array"\nparams.required'),
            "endpoints[0].params.type: invalid enum value 'array'; allowed: 'object'",
        ),
        (_API.replace("\nbase_url", "\nheaders = { X = 1 }\nbase_url"), "headers.X: must be a string, not an integer"),
        ("timeout = true\n" + _API, "timeout: must be a positive number of seconds, not true or false"),
        ("timeout = 0\n" + _API, "timeout: must be a positive number of seconds, not 0"),
        (
            'kind = "mcp"\ndescription = "d"\nargs = "a"\ncommand = "x"\n',
            "args: must be a list of strings, not a string",
        ),
    ],
)
def test_a_problem_names_the_file_the_key_the_allowed_values_and_the_closest_one(
    workspace: Path, config: str, said: str
) -> None:
    folder = write_source(workspace, "broken", config)
    problem = load_source(workspace, "broken")
    assert isinstance(problem, SourceProblem)
    assert str(problem) == f"{folder / 'source.toml'}: {said}"


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="lamina-sources-") as folder:
        yield Path(folder)


_FIELDS = [field.encode_name for field in msgspec.structs.fields(_SourceFile)]
_WORDS = ["mcp", "api", "GET", "post", "/items/{id}", "https://x.test", "${HOME}", "object", "name", "method", "path"]


@given(document=toml_documents(_FIELDS, _WORDS))
def test_any_toml_table_is_a_source_or_a_problem_naming_the_file_and_a_key(
    scratch: Path, document: dict[str, Toml]
) -> None:
    folder = write_source(scratch, "any", toml_document(document))
    loaded = load_source(scratch, "any")  # never raises
    if not isinstance(loaded, SourceProblem):
        assert isinstance(loaded, McpSource | ApiSource) and set(document) <= set(_FIELDS)
        return
    assert loaded.path == folder / "source.toml" and loaded.field is not None
    keys = {*_FIELDS, *document}
    assert loaded.field in keys or loaded.field.startswith(tuple(f"{key}{then}" for key in keys for then in ".["))


@pytest.mark.parametrize("slug", ["..", "../etc", "a/b", "UPPER", "two__parts", ".hidden", "x" * 33, ""])
def test_invalid_slugs_are_refused(workspace: Path, slug: str) -> None:
    problem = load_source(workspace, slug)
    assert not isinstance(problem, McpSource)
    assert getattr(problem, "field", None) == "slug"


def test_a_folder_with_an_invalid_slug_is_skipped(workspace: Path) -> None:
    write_source(workspace, "Not.A.Slug", _API)
    scan = find_sources(workspace)
    assert scan.sources == ()
    assert scan.problems[0].field == "slug"


@pytest.mark.parametrize("tool", ["add", "do.thing/now", "x" * 80, "ünïcode"])
def test_tool_names_fit_the_provider_rule(tool: str) -> None:
    import re

    name = tool_name("some-source", tool)
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name)
    assert name.startswith("some-source__")


def test_long_names_stay_distinct() -> None:
    assert tool_name("s", "x" * 80 + "a") != tool_name("s", "x" * 80 + "b")


@pytest.mark.parametrize(
    "text",
    [None, "", "Short.", "No full stop", "First. Second.", "word " * 200, "Para one\nwrapped.\n\nPara two."],
)
def test_descriptions_are_short_and_point_at_the_guide(text: str | None) -> None:
    slug = "s" * 32
    description = short_description(text, slug)
    assert len(description) <= MAX_DESCRIPTION
    assert description.endswith(f"Read sources/{slug}/guide.md before first use.")
    assert "Second" not in description and "Para two" not in description
