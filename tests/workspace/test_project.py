"""`.lamina/project.toml`: the project's description and important paths as their own stable part."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from lamina.cli import app
from lamina.defang import contains_reserved_marker
from lamina.parts import Authority, Stability, Tier
from lamina.tools import default_tool_specs
from lamina.workspace import PREFERENCES_ENV_VAR, ProjectFileError, WorkspaceContext, parse_project, project_part

MANIFEST = """\
description = "A shop: an API and a web front end."

[paths]
"packages/api/" = "the HTTP API; the only way to the database"
"docs/adr/" = "architecture decisions"
"""


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "ws"
    (root / ".lamina").mkdir(parents=True)
    (root / "AGENTS.md").write_text("Run the tests.\n")
    monkeypatch.delenv(PREFERENCES_ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return root


def _context(root: Path) -> WorkspaceContext:
    return WorkspaceContext(root, tools=default_tool_specs())


def test_the_manifest_is_its_own_stable_part_between_the_sections_and_the_context_file(ws: Path) -> None:
    (ws / ".lamina" / "project.toml").write_text(MANIFEST)
    parts = _context(ws)()
    keys = [p.key for p in parts]
    assert keys.index("system.context_files") < keys.index("project.manifest") < keys.index("context.root")
    part = parts[keys.index("project.manifest")]
    assert (part.stability, part.authority, part.tier) == (Stability.STABLE, Authority.PROJECT_FILE, Tier.CATALOGUE)
    assert part.provenance == ".lamina/project.toml"
    assert "A shop: an API and a web front end." in part.text
    assert (
        "- packages/api/: the HTTP API; the only way to the database\n- docs/adr/: architecture decisions" in part.text
    )
    assert '<untrusted source=".lamina/project.toml" authority="project_file">' in part.text


def test_no_manifest_no_part_and_an_edit_is_seen(ws: Path) -> None:
    context = _context(ws)
    assert "project.manifest" not in [p.key for p in context()]
    (ws / ".lamina" / "project.toml").write_text('paths = ["src/"]\n')
    assert "- src/" in next(p.text for p in context() if p.key == "project.manifest")
    (ws / ".lamina" / "project.toml").write_text('paths = ["lib/"]\n')
    text = next(p.text for p in context() if p.key == "project.manifest")
    assert "- lib/" in text and "- src/" not in text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("description = ", "project file {path}: not valid TOML"),
        ('descripton = "x"\n', "project file {path}: descripton: unknown field (did you mean 'description'?)"),
        ("description = 3\n", "project file {path}: description: must be a string, not int"),
        ('paths = "src/"\n', "project file {path}: paths: must be a list of paths or a table of paths to notes"),
        ('paths = ["src/", 4]\n', "project file {path}: paths[1]: must be a path (a string), not int"),
        ('paths = ["../secrets"]\n', "project file {path}: paths[0]: '../secrets' must be relative to the workspace"),
        ('[paths]\n"/etc" = "x"\n', "project file {path}: paths./etc: '/etc' must be relative to the workspace"),
        ('[paths]\n"src" = 1\n', "project file {path}: paths.src: must be a note (a string), not int"),
        ("", "project file {path}: empty: give a description, paths or both"),
        ('description = " "\n[paths]\n', "project file {path}: empty: give a description, paths or both"),
    ],
)
def test_a_bad_manifest_is_an_error_naming_the_file_and_the_key(ws: Path, text: str, message: str) -> None:
    path = ws / ".lamina" / "project.toml"
    path.write_text(text)
    with pytest.raises(ProjectFileError) as caught:
        _context(ws)()
    assert str(caught.value).startswith(message.format(path=path))


def test_lamina_context_shows_the_manifest_and_a_bad_one_is_one_error_line(ws: Path) -> None:
    (ws / ".lamina" / "project.toml").write_text(MANIFEST)
    runner = CliRunner()
    result = runner.invoke(app, ["context", str(ws), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["project"]["description"] == "A shop: an API and a web front end."
    assert [p["path"] for p in data["project"]["paths"]] == ["packages/api/", "docs/adr/"]
    part = next(p for p in data["parts"] if p["key"] == "project.manifest")
    assert part["stability"] == "stable" and part["tokens"] > 10
    human = runner.invoke(app, ["context", str(ws)])
    assert "Project manifest: .lamina/project.toml, a description and 2 important paths" in human.stdout
    (ws / ".lamina" / "project.toml").write_text('paths = ["ok", ""]\n')
    bad = runner.invoke(app, ["context", str(ws)])
    assert bad.exit_code == 2
    assert f"error: project file {ws / '.lamina' / 'project.toml'}: paths[1]: an empty path" in bad.stderr


def test_a_manifest_linked_out_of_the_workspace_is_refused(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.toml"
    outside.write_text('description = "secret"\n')
    (ws / ".lamina" / "project.toml").symlink_to(outside)
    with pytest.raises(ProjectFileError, match="resolves outside the working directory"):
        _context(ws)()


@given(st.text(max_size=200), st.lists(st.text(max_size=40), max_size=5))
def test_any_description_and_notes_stay_inside_their_block(description: str, notes: list[str]) -> None:
    paths = {f"p{i}": note for i, note in enumerate(notes)}
    body = f"description = {json.dumps(description)}\n[paths]\n" + "".join(
        f"{key} = {json.dumps(note)}\n" for key, note in paths.items()
    )
    try:
        manifest = parse_project(body, path=Path("project.toml"))
    except ProjectFileError:
        return  # e.g. a description that is only whitespace and no paths, or an over-long note
    text = project_part(manifest).text
    inner = text.split('authority="project_file">\n', 1)[1].rsplit("\n</untrusted>", 1)[0]
    assert not contains_reserved_marker(inner)
