"""Every python block of README.md and docs/ runs, page by page, offline; and the collector that runs them.

Each page's blocks run in order in one namespace, in a fresh working directory, with
`LAMINA_STORE`, `HOME` and the XDG folders in a temporary folder and no provider reachable: the
API keys are unset and the SDKs' base URLs point at a closed local port. A block marked
`<!-- test: wire anthropic -->` (or `openai`) gets the local wire server instead (tests/wire).
"""

from __future__ import annotations

import socket
import traceback
from collections.abc import Callable
from pathlib import Path
from textwrap import dedent
from typing import TypeVar

import pytest

from tests.support.docs_examples import WIRE_ANSWER, DocsExampleError, Page, find_pages, read_page, run_page

ROOT = Path(__file__).resolve().parents[1]
PAGES = find_pages(ROOT)

# nothing listens on the discard port: a block that reaches for a provider unmarked fails at once
_NOWHERE = "http://127.0.0.1:9"
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
_UNSET = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "LAMINA_PREFERENCES", "LAMINA_SKILLS_DIR")


@pytest.fixture
def docs_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh working directory and an environment that keeps the blocks offline and on this test's folders."""
    for name in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "OPENAI_API_KEY",
        "LAMINA_PREFERENCES",
        "LAMINA_SKILLS_DIR",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(socket, "getaddrinfo", _local_only(socket.getaddrinfo))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", _NOWHERE)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{_NOWHERE}/v1")
    monkeypatch.setenv("LAMINA_STORE", str(tmp_path / "store"))
    for name, folder in (("HOME", "home"), ("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data")):
        (tmp_path / folder).mkdir()
        monkeypatch.setenv(name, str(tmp_path / folder))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def _slow_if_wired(page: Page) -> list[pytest.MarkDecorator]:
    return [pytest.mark.slow] if any(block.wire for block in page.blocks) else []


_Found = TypeVar("_Found")


def _local_only(getaddrinfo: Callable[..., _Found]) -> Callable[..., _Found]:
    """`socket.getaddrinfo` for this machine's loopback names only: an example that looks up another host fails."""

    def resolve(host: object, *args: object, **kwargs: object) -> _Found:
        name = host.decode() if isinstance(host, bytes) else host
        if name is not None and name not in _LOCAL_HOSTS:
            raise socket.gaierror(socket.EAI_NONAME, f"the docs examples run offline: {name!r} is not looked up")
        return getaddrinfo(host, *args, **kwargs)

    return resolve


# a page that talks to the wire server ends with a full garbage collection (see run_page): over a third of a second
@pytest.mark.parametrize("page", [pytest.param(page, id=page.name, marks=_slow_if_wired(page)) for page in PAGES])
def test_page_examples_run(page: Page, docs_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_page(page, monkeypatch)


def test_readme_and_docs_are_collected() -> None:
    names = [page.name for page in find_pages(ROOT)]
    assert len(names) == len(set(names))
    assert all(name == "README.md" or name.startswith("docs/") for name in names)


# --- the collector ---------------------------------------------------------------------------------


def _page(tmp_path: Path, text: str) -> Page:
    path = tmp_path / "page.md"
    path.write_text(dedent(text).lstrip("\n"), encoding="utf-8")
    return read_page(path, "page.md")


def test_blocks_run_in_order_in_one_namespace_with_top_level_await(
    tmp_path: Path, docs_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = _page(
        tmp_path,
        """
        # A page

        ```python
        import asyncio
        from pathlib import Path
        words = ["one"]
        ```

        ```bash
        exit 1
        ```

        ````markdown
        ```python
        raise RuntimeError("a python block shown inside another block does not run")
        ```
        ````

        1. In a list:

           ```py
           await asyncio.sleep(0)
           words.append("two")
           ```

        ```python title="last.py"
        Path("out.txt").write_text(" ".join(words) + " " + __name__)
        ```
        """,
    )
    assert [block.line for block in page.blocks] == [3, 21, 26]
    run_page(page, monkeypatch)
    assert (docs_env / "out.txt").read_text() == "one two __main__"


def test_a_failing_block_names_its_page_and_line(
    tmp_path: Path, docs_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = _page(
        tmp_path,
        """
        ```python
        total = 1
        ```

        Then:

        - a list item

            ```python
            def check():
                assert total == 3, "the total is off"

            total += 1
            check()
            ```
        """,
    )
    with pytest.raises(
        DocsExampleError, match=r"^page\.md: the python block at line 9 failed: AssertionError: the total is off$"
    ) as err:
        run_page(page, monkeypatch)
    cause = err.value.__cause__
    assert cause is not None
    frames = traceback.extract_tb(cause.__traceback__)
    page_file = str(tmp_path / "page.md")
    assert [(frame.filename, frame.lineno) for frame in frames[-2:]] == [(page_file, 14), (page_file, 11)]
    assert frames[-1].line == 'assert total == 3, "the total is off"'


def test_a_block_that_does_not_compile_names_its_page_and_line(
    tmp_path: Path, docs_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = _page(tmp_path, "Text.\n\n```python\nprint('fine')\ndef broken(:\n```\n")
    with pytest.raises(
        DocsExampleError, match=r"^page\.md: the python block at line 3 does not compile: invalid syntax \(line 5\)$"
    ):
        run_page(page, monkeypatch)


def test_an_unknown_marker_fails_loudly_before_anything_runs(
    tmp_path: Path, docs_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = _page(
        tmp_path,
        """
        ```python
        open("ran.txt", "w").close()
        ```

        <!-- test: wire gemini -->
        ```python
        print("hello")
        ```
        """,
    )
    with pytest.raises(DocsExampleError, match=r"page\.md, line 5: unknown test marker <!-- test: wire gemini -->"):
        run_page(page, monkeypatch)
    assert not (docs_env / "ran.txt").exists()


@pytest.mark.parametrize("marker", ["skip", "wire", "wire anthropic gemini", ""])
def test_every_unknown_marker_is_a_problem(tmp_path: Path, marker: str) -> None:
    page = _page(tmp_path, f"<!-- test: {marker} -->\n```python\npass\n```\n")
    assert page.problems == (
        f"page.md, line 1: unknown test marker <!-- test: {marker} --> (known: wire anthropic, wire openai)",
    )


def test_a_marker_that_precedes_no_python_block_fails(tmp_path: Path) -> None:
    page = _page(
        tmp_path,
        """
        <!-- test: wire anthropic -->
        ```bash
        lamina chat
        ```

        <!-- test: wire openai -->
        Some text.

        ```python
        pass
        ```

        <!-- test: wire anthropic -->
        """,
    )
    assert page.problems == (
        "page.md, line 1: the test marker <!-- test: wire anthropic --> precedes no python block",
        "page.md, line 6: the test marker <!-- test: wire openai --> precedes no python block",
        "page.md, line 13: the test marker <!-- test: wire anthropic --> precedes no python block",
    )
    assert [block.wire for block in page.blocks] == [()]


def test_a_page_without_python_blocks_has_no_test(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# Hi\n\n```bash\nmake run\n```\n")
    (tmp_path / "docs" / "a.md").write_text("```python\npass\n```\n")
    (tmp_path / "docs" / "b.md").write_text("Nothing to run.\n")
    assert [page.name for page in find_pages(tmp_path)] == ["docs/a.md"]


def test_an_unmarked_block_reaches_no_provider(tmp_path: Path, docs_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = _page(
        tmp_path,
        """
        ```python
        import os
        assert "ANTHROPIC_API_KEY" not in os.environ and "OPENAI_API_KEY" not in os.environ
        assert os.environ["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
        assert os.environ["LAMINA_STORE"].endswith("store")
        ```

        ```python
        import socket
        try:
            socket.getaddrinfo("api.anthropic.com", 443)
        except socket.gaierror as exc:
            assert "the docs examples run offline" in str(exc)
        else:
            raise AssertionError("a host outside this machine was looked up")
        assert socket.getaddrinfo("127.0.0.1", 9)
        ```
        """,
    )
    run_page(page, monkeypatch)


@pytest.mark.slow  # the full collection after a wired page
@pytest.mark.parametrize(
    ("api", "spec"),
    [("anthropic", "anthropic:claude-sonnet-4-5"), ("openai", "openai:gpt-5"), ("openai", "openai-responses:gpt-5")],
)
def test_a_wire_block_gets_an_answer_from_the_wire_server(
    tmp_path: Path, docs_env: Path, monkeypatch: pytest.MonkeyPatch, api: str, spec: str
) -> None:
    page = _page(
        tmp_path,
        f"""
        <!-- test: wire {api} -->
        ```python
        from pathlib import Path
        from lamina.agent import open_agent
        from lamina.providers import provider_from_spec
        from lamina.session import LocalSessionStore

        provider = provider_from_spec("{spec}")
        with open_agent(LocalSessionStore(), provider, workspace=Path.cwd()) as agent:
            outcome = await agent.run_turn("Say hello.")
        await provider.aclose()
        ```

        ```python
        assert outcome.text == {WIRE_ANSWER!r}, outcome.text
        ```
        """,
    )
    assert [block.wire for block in page.blocks] == [(api,), ()]
    run_page(page, monkeypatch)


def test_the_wire_server_answers_only_a_marked_block(
    tmp_path: Path, docs_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = _page(
        tmp_path,
        """
        ```python
        from pathlib import Path
        from lamina.agent import open_agent
        from lamina.session import LocalSessionStore

        with open_agent(LocalSessionStore(), "anthropic:claude-sonnet-4-5", workspace=Path.cwd()) as agent:
            agent.run_turn_sync("Say hello.")
        ```
        """,
    )
    with pytest.raises(DocsExampleError, match=r"^page\.md: the python block at line 1 failed: AuthenticationError"):
        run_page(page, monkeypatch)
