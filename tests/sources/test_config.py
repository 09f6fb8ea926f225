"""Reading `sources/<slug>/source.toml`: valid configs load, invalid ones are reported with file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from lamina.sources import McpSource, McpStdio, find_sources
from lamina.sources._source_config import load_source
from lamina.sources._tool import MAX_DESCRIPTION, short_description, tool_name
from tests.sources.conftest import write_source

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
        ('kind = "ftp"\ndescription = "d"\n', "kind", 'must be "mcp" or "api"'),
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
    assert problems[bad / "source.toml"].reason.startswith("invalid TOML")
    assert "missing guide.md" in problems[unguided / "guide.md"].reason


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
