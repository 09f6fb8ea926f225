"""`.lamina/project.toml`: the project's description and important paths as their own stable part."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from lamina.cli import app
from lamina.context import Authority, Stability, Tier
from lamina.defang import contains_reserved_marker
from lamina.tools import default_tool_specs
from lamina.workspace import Preferences, ProjectFileError, WorkspaceContext
from lamina.workspace._preferences import PREFERENCES_ENV_VAR
from lamina.workspace._project import parse_project, project_part
from tests.support.toml_text import Toml, toml_document, toml_documents

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
        ('descripton = "x"\n', "project file {path}: descripton: unknown field 'descripton' (did you mean"),
        ("description = 3\n", "project file {path}: description: must be a string, not an integer"),
        ('paths = "src/"\n', "project file {path}: paths: must be a list of paths or a table of paths to notes"),
        ('paths = ["src/", 4]\n', "project file {path}: paths[1]: must be a path (a string), not an integer"),
        ('paths = ["../secrets"]\n', "project file {path}: paths[0]: '../secrets' must be relative to the workspace"),
        ('[paths]\n"/etc" = "x"\n', "project file {path}: paths./etc: '/etc' must be relative to the workspace"),
        ('[paths]\n"src" = 1\n', "project file {path}: paths.src: must be a note (a string), not an integer"),
        ("", "project file {path}: empty: give a description, paths or both"),
        ('description = " "\n[paths]\n', "project file {path}: empty: give a description, paths or both"),
    ],
)
def test_a_bad_manifest_is_skipped_with_a_problem_naming_the_file_and_the_field(
    ws: Path, text: str, message: str
) -> None:
    path = ws / ".lamina" / "project.toml"
    path.write_text(text)
    with pytest.raises(ProjectFileError) as caught:
        parse_project(text, path=path)  # the parser itself still refuses the file
    assert str(caught.value).startswith(message.format(path=path))
    context = _context(ws)
    snapshot = context.snapshot()  # the session's stable context skips it, like a bad SKILL.md
    assert snapshot.project is None
    assert str(snapshot.project_problem) == str(caught.value)
    keys = [p.key for p in snapshot.parts]
    assert "project.manifest" not in keys and "context.root" in keys  # the rest of the context is there
    path.write_text(MANIFEST)  # mended: read again and shown
    mended = context.snapshot()
    assert mended.project_problem is None and "project.manifest" in [p.key for p in mended.parts]


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        (
            '[path]\n"src" = "x"\n',
            "path",
            "unknown field 'path' (did you mean 'paths'?); the fields are description, paths",
        ),
        ('[paths]\n"src/" = "code"\n"docs/" = 2\n', "paths.docs/", "must be a note (a string), not an integer"),
        ('[paths]\nsrc = { note = "x" }\n', "paths.src", "must be a note (a string), not a table"),
        ('[paths]\n"a.b" = []\n', "paths.a.b", "must be a note (a string), not a list"),
        ("paths = [[]]\n", "paths[0]", "must be a path (a string), not a list"),
        ("paths = 1\n", "paths", "must be a list of paths or a table of paths to notes, not an integer"),
    ],
)
def test_a_problem_names_the_file_the_table_and_the_key_inside_it(text: str, field: str, problem: str) -> None:
    path = Path("ws/.lamina/project.toml")
    with pytest.raises(ProjectFileError) as caught:
        parse_project(text, path=path)
    assert (caught.value.path, caught.value.field, caught.value.problem) == (str(path), field, problem)
    assert str(caught.value) == f"project file {path}: {field}: {problem}"


@given(document=toml_documents(["description", "paths"], ["src/", "../up", "/abs", ""]))
def test_any_toml_table_is_a_manifest_or_a_project_file_error_naming_a_key_it_has(document: dict[str, Toml]) -> None:
    try:
        manifest = parse_project(toml_document(document), path=Path("project.toml"))
    except ProjectFileError as exc:  # the only error
        assert exc.field is None or any(exc.field == k or exc.field.startswith((f"{k}[", f"{k}.")) for k in document)
        return
    assert set(document) <= {"description", "paths"} and (manifest.description or manifest.paths)


@pytest.mark.slow
def test_lamina_context_shows_the_manifest_and_a_bad_one_skipped_with_its_reason(ws: Path) -> None:
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
    path = ws / ".lamina" / "project.toml"
    path.write_text('paths = ["ok", ""]\n')
    bad = runner.invoke(app, ["context", str(ws)])
    assert bad.exit_code == 0, bad.output  # skipped with its reason, the report goes on
    assert f"Project manifest: .lamina/project.toml skipped: project file {path}: paths[1]: an empty path" in bad.stdout
    assert "Parts" in bad.stdout and "project.manifest" not in bad.stdout
    bad_json = json.loads(runner.invoke(app, ["context", str(ws), "--json"]).stdout)
    skipped = {"status": "skipped", "file": str(path), "field": "paths[1]", "reason": "an empty path"}
    assert bad_json["project"] == skipped
    assert "project.manifest" not in [p["key"] for p in bad_json["parts"]]


def test_a_manifest_linked_out_of_the_workspace_is_refused(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.toml"
    outside.write_text('description = "secret"\n')
    (ws / ".lamina" / "project.toml").symlink_to(outside)
    snapshot = _context(ws).snapshot()
    assert "resolves outside the working directory" in str(snapshot.project_problem)
    assert not any("secret" in p.text for p in snapshot.parts)


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


# --- malformed manifests, generated: never a crash, always a problem naming the file and the field ------------

_documents = toml_documents(["description", "paths"])


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="lamina-project-") as folder:
        root = Path(folder)
        (root / ".lamina").mkdir()
        (root / "AGENTS.md").write_text("Run the tests.\n")
        yield root


def _snapshot_of(root: Path, content: bytes) -> tuple[Path, WorkspaceContext]:
    path = root / ".lamina" / "project.toml"
    path.write_bytes(content)
    return path, WorkspaceContext(root, tools=default_tool_specs(), preferences=Preferences())


@pytest.mark.slow
@given(document=_documents)
def test_a_malformed_manifest_never_stops_the_context_and_its_problem_names_the_file_and_the_field(
    scratch: Path, document: dict[str, Toml]
) -> None:
    path, context = _snapshot_of(scratch, toml_document(document).encode())
    snapshot = context.snapshot()  # never raises
    problem = snapshot.project_problem
    keys = [p.key for p in snapshot.parts]
    assert "context.root" in keys
    if problem is None:  # a usable manifest: only known fields, each of its type
        assert snapshot.project is not None and "project.manifest" in keys
        assert set(document) <= {"description", "paths"}
        return
    assert snapshot.project is None and "project.manifest" not in keys
    assert problem.path == str(path) and str(problem).startswith(f"project file {path}: ")
    if problem.field is None:  # the file as a whole: only when it says nothing at all
        assert problem.problem.startswith("empty") and set(document) <= {"description", "paths"}
    else:  # the field named is one the file has
        assert any(problem.field == k or problem.field.startswith((f"{k}[", f"{k}.")) for k in document)
        assert f": {problem.field}: " in str(problem)


@given(content=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_bytes_as_a_manifest_never_stop_the_context(scratch: Path, content: bytes) -> None:
    path, context = _snapshot_of(scratch, content)
    snapshot = context.snapshot()
    assert (snapshot.project is None) != (snapshot.project_problem is None)
    if snapshot.project_problem is not None:
        assert str(snapshot.project_problem).startswith(f"project file {path}")


def test_agent_start_reports_a_skipped_manifest_and_the_session_goes_on(ws: Path, tmp_path: Path) -> None:
    from lamina.agent import AgentEvent, AgentOptions, SkillWarning, open_agent
    from lamina.providers import ScriptedProvider, ScriptedResponse
    from lamina.session import LocalSessionStore

    path = ws / ".lamina" / "project.toml"
    path.write_text('description = "A shop."\nowner = "me"\n')
    events: list[AgentEvent] = []
    provider = ScriptedProvider([ScriptedResponse(text="Hello.")])
    agent = open_agent(
        LocalSessionStore(tmp_path / "store"), provider, workspace=ws, options=AgentOptions(on_event=events.append)
    )
    try:
        warnings = [e for e in events if isinstance(e, SkillWarning)]
        assert [w.name for w in warnings] == [".lamina/project.toml"]
        assert warnings[0].message.startswith(f"project file {path}: owner: unknown field 'owner'")
        outcome = agent.run_turn_sync("Hi")
        assert outcome.text == "Hello."
        assert "project.manifest" not in [p.key for p in outcome.turn.parts()]
    finally:
        agent.engine.session.close()
