"""`pip install lamina` without extras: a small install where the quick start runs and a missing extra is named.

The wheel is built from the checkout and installed into a fresh venv (`benchmarks._core_install`);
every check runs there, without PYTHONPATH, so the wheel and its core dependencies are all there is.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from benchmarks._core_install import CoreVenv, build_wheel, core_venv, uv_available

pytestmark = pytest.mark.slow

MAX_DISTRIBUTIONS = 15
MAX_MEGABYTES = 40
# one module of each extra: none is installed with the core
EXTRA_MODULES = {
    "anthropic": "anthropic",
    "openai": "openai",
    "typer": "cli",
    "prompt_toolkit": "cli",
    "starlette": "serve",
    "uvicorn": "serve",
    "PIL": "documents",
    "pypdf": "documents",
    "markitdown": "documents",
    "charset_normalizer": "documents",
    "mcp": "mcp",
    "httpx": "http",
    "psycopg": "postgres",
    "claude_agent_sdk": "claude",
    "agents": "openai-agents",
    "pydantic_ai": "pydantic-ai",
    "langgraph": "langgraph",
}

QUICK_START = """\
import tempfile
from pathlib import Path

from lamina import LocalSessionStore, ScriptedProvider, open_agent

root = Path(tempfile.mkdtemp())
workspace = root / "project"
workspace.mkdir()
(workspace / "AGENTS.md").write_text("Answer in one sentence.\\n")
provider = ScriptedProvider([{"text": "Hello from the core."}])
with open_agent(LocalSessionStore(root / "store"), provider, workspace=workspace) as agent:
    outcome = agent.run_turn_sync("Say hello.")
print(outcome.text)
"""


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory) -> CoreVenv:
    if not uv_available():
        pytest.skip("uv is not installed in the project's venv (make installs it)")
    wheel = build_wheel(tmp_path_factory.mktemp("wheel"))
    return core_venv(tmp_path_factory.mktemp("venv") / "core", wheel)


def _python(core: CoreVenv, code: str, cwd: Path) -> str:
    done = core.run(str(core.python), "-c", textwrap.dedent(code), cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_core_is_at_most_15_distributions_and_40_mb(core: CoreVenv) -> None:
    installed = core.distributions()
    assert "lamina" in installed
    assert len(installed) <= MAX_DISTRIBUTIONS, installed
    assert core.megabytes() <= MAX_MEGABYTES


def test_no_module_of_an_extra_is_installed(core: CoreVenv, tmp_path: Path) -> None:
    found = _python(
        core,
        f"""
        import importlib.util
        print(sorted(m for m in {sorted(EXTRA_MODULES)!r} if importlib.util.find_spec(m) is not None))
        """,
        tmp_path,
    )
    assert found.strip() == "[]"


def test_import_lamina_comes_from_the_wheel(core: CoreVenv, tmp_path: Path) -> None:
    where = _python(core, "import lamina, lamina.engine, lamina.agent; print(lamina.__file__)", tmp_path)
    assert Path(where.strip()).is_relative_to(core.site_packages())


def test_the_scripted_quick_start_runs_in_the_core(core: CoreVenv, tmp_path: Path) -> None:
    script = tmp_path / "quick_start.py"
    script.write_text(QUICK_START)
    done = core.run(str(core.python), str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello from the core.\n"


def test_the_lamina_command_without_the_cli_extra_prints_one_line_and_exits_2(core: CoreVenv, tmp_path: Path) -> None:
    for args in ((), ("--help",), ("chat",)):
        done = core.run(str(core.script("lamina")), *args, cwd=tmp_path)
        assert done.returncode == 2
        assert done.stdout == ""
        assert done.stderr == (
            "error: the lamina command needs the 'cli' extra: pip install 'lamina[cli]' (no module named 'typer')\n"
        )


def test_a_provider_spec_without_its_extra_names_the_extra(core: CoreVenv, tmp_path: Path) -> None:
    shown = _python(
        core,
        """
        from lamina.errors import MissingExtraError, UsageError
        from lamina.providers import provider_from_spec

        for spec in ("anthropic:claude-sonnet-5", "openai:gpt-5", "claude-agent:claude-sonnet-5"):
            try:
                provider_from_spec(spec)
            except MissingExtraError as exc:
                assert isinstance(exc, UsageError)
                print(exc.extra, exc)
        """,
        tmp_path,
    )
    assert shown.splitlines() == [
        "anthropic the Anthropic provider needs the 'anthropic' extra: pip install 'lamina[anthropic]'"
        " (no module named 'anthropic')",
        "openai the OpenAI provider needs the 'openai' extra: pip install 'lamina[openai]' (no module named 'openai')",
        "claude the Claude Agent SDK backend needs the 'claude' extra: pip install 'lamina[claude]'"
        " (no module named 'claude_agent_sdk')",
    ]


def test_an_attachment_that_needs_the_documents_extra_says_so_and_text_still_attaches(
    core: CoreVenv, tmp_path: Path
) -> None:
    shown = _python(
        core,
        """
        import tempfile
        from pathlib import Path

        from lamina import AttachmentError, NamedBytes
        from lamina.attachments import AttachmentStore

        folder = Path(tempfile.mkdtemp())
        store = AttachmentStore(folder / "attachments", folder / "data")
        png = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489")
        for name, data in (("report.pdf", b"%PDF-1.4\\n%%EOF\\n"), ("shot.png", png)):
            try:
                store.add_all([NamedBytes(name, data)])
            except AttachmentError as exc:
                print(exc)
        kept, refused = store.add_images([NamedBytes("tool.png", png)])
        print(len(kept), refused[0])
        print(store.add_all([NamedBytes("notes.txt", b"plain text needs no extra")])[0].kind)
        """,
        tmp_path,
    )
    assert shown.splitlines() == [
        "attachment 'report.pdf': a PDF attachment needs the 'documents' extra: pip install 'lamina[documents]'"
        " (no module named 'pypdf')",
        "attachment 'shot.png': an image attachment needs the 'documents' extra: pip install 'lamina[documents]'"
        " (no module named 'PIL')",
        "0 attachment 'tool.png': an image attachment needs the 'documents' extra: pip install 'lamina[documents]'"
        " (no module named 'PIL')",
        "text",
    ]


def test_a_source_without_its_extra_is_a_connection_problem_naming_the_extra(core: CoreVenv, tmp_path: Path) -> None:
    for slug, config in {
        "docs": 'kind = "mcp"\ndescription = "Docs."\ncommand = "server"\n',
        "hub": (
            'kind = "api"\ndescription = "A code host."\nbase_url = "https://example.invalid"\n\n'
            '[[endpoints]]\nname = "ping"\nmethod = "GET"\npath = "/ping"\n'
            'description = "Ping the host. Returns pong."\nparams.type = "object"\n'
        ),
    }.items():
        folder = tmp_path / "sources" / slug
        folder.mkdir(parents=True)
        (folder / "source.toml").write_text(config)
        (folder / "guide.md").write_text("# Guide\n")
    shown = _python(
        core,
        f"""
        import asyncio
        from pathlib import Path

        from lamina.sources import SourceConnections, find_sources
        from lamina.workspace import WorkspaceTrust

        async def main():
            scan = find_sources(Path({str(tmp_path)!r}), trust=WorkspaceTrust.TRUSTED)
            assert not scan.problems, scan.problems
            async with SourceConnections(scan.sources) as connections:
                print(len(connections.tools))
                for problem in connections.problems:
                    print(problem)

        asyncio.run(main())
        """,
        tmp_path,
    )
    assert shown.splitlines() == [
        "0",
        "source docs: an MCP source needs the 'mcp' extra: pip install 'lamina[mcp]' (no module named 'anyio')",
        "source hub: an API source needs the 'http' extra: pip install 'lamina[http]' (no module named 'httpx')",
    ]
