"""An MCP server's image content reaches the model through the attachment pipeline (SPEC F10), on the three
wire formats, through a resume: stored once, logged as references, a note where the model has no vision,
a note for each image refused, never a failed turn."""

from __future__ import annotations

import base64
import hashlib
import io
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from PIL import Image

from lamina.agent import Agent, AgentOptions, open_agent
from lamina.providers import Capabilities, Provider
from lamina.session import LocalSessionStore, ToolResult
from lamina.sources import SourceConnections, find_sources
from lamina.workspace import WorkspaceTrust
from tests.sources.conftest import stdio_config, write_source
from tests.support.wire_types import validate_anthropic, validate_openai_chat, validate_openai_responses
from tests.wire.fixtures import anthropic_provider, openai_chat_provider, openai_responses_provider
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

SERVER = Path(__file__).with_name("mcp_image_server.py")
GUIDE = ToolUse("Read", {"path": "sources/imgs/guide.md"})

# every test here starts an MCP server process
# one worker runs the module (`make test` runs pytest-xdist with --dist loadgroup): its server starts once
pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.xdist_group("mcp-images"),
]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def imgs(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Path, SourceConnections]]:
    """The image server as source `imgs`, connected once for the module."""
    workspace = tmp_path_factory.mktemp("imgs")
    write_source(workspace, "imgs", stdio_config(str(SERVER)))
    async with SourceConnections(find_sources(workspace, trust=WorkspaceTrust.TRUSTED).sources) as sources:
        yield workspace, sources


Images = Callable[[dict[str, Any]], list[tuple[str, bytes]]]
"""The (media type, bytes) of every image a request's tool results carry, in its provider's shape."""


def _anthropic_images(body: dict[str, Any]) -> list[tuple[str, bytes]]:
    out = []
    for message in body["messages"]:
        for block in message["content"]:
            if block["type"] == "tool_result" and isinstance(block["content"], list):
                for inner in block["content"]:
                    if inner["type"] == "image":
                        out.append((inner["source"]["media_type"], base64.b64decode(inner["source"]["data"])))
            assert block["type"] != "image"  # never beside the results: inside them
    return out


def _data(url: str) -> tuple[str, bytes]:
    head, data = url.removeprefix("data:").split(";base64,", 1)
    return head, base64.b64decode(data)


def _chat_images(body: dict[str, Any]) -> list[tuple[str, bytes]]:
    out = []
    messages = body["messages"]
    for index, message in enumerate(messages):
        if message["role"] == "tool":
            assert isinstance(message["content"], str)  # a tool message is text only
        elif message["role"] == "user" and index and messages[index - 1]["role"] == "tool":
            out += [_data(p["image_url"]["url"]) for p in message["content"] if p["type"] == "image_url"]
    return out


def _responses_images(body: dict[str, Any]) -> list[tuple[str, bytes]]:
    out = []
    for item in body["input"]:
        if item.get("type") == "function_call_output" and isinstance(item["output"], list):
            out += [_data(p["image_url"]) for p in item["output"] if p["type"] == "input_image"]
    return out


PROVIDERS: dict[str, tuple[Callable[..., Any], Images, Callable[[Any], Any]]] = {
    "anthropic": (anthropic_provider, _anthropic_images, validate_anthropic),
    "openai_chat": (openai_chat_provider, _chat_images, validate_openai_chat),
    "openai_responses": (openai_responses_provider, _responses_images, validate_openai_responses),
}


def _agent(
    store: LocalSessionStore,
    provider: Provider,
    workspace: Path,
    sources: SourceConnections,
    session_id: str | None = None,
) -> Agent:
    options = AgentOptions(sources=sources, mode="execute")
    return open_agent(store, provider, workspace=workspace, session_id=session_id, options=options)


@pytest.mark.slow
@pytest.mark.parametrize("name", PROVIDERS)
async def test_an_mcp_image_is_sent_as_the_providers_image_block_stored_once_and_logged_as_a_reference(
    imgs: tuple[Path, SourceConnections], tmp_path: Path, name: str
) -> None:
    workspace, sources = imgs
    make, images_of, validate = PROVIDERS[name]
    store = LocalSessionStore(tmp_path / "store")
    with WireServer() as wire:
        wire.script(
            Reply(text="Reading the guide.", tool_calls=[GUIDE]),
            Reply(text="Drawing.", tool_calls=[ToolUse("imgs__chart", {"kind": "png"})]),
            Reply(text="A gradient."),
            Reply(text="Reading the guide again.", tool_calls=[GUIDE]),  # a resumed session asks for it again
            Reply(text="Drawing again.", tool_calls=[ToolUse("imgs__chart", {"kind": "png"})]),
            Reply(text="The same gradient."),
        )
        async with make(wire, capabilities=Capabilities(vision=True)) as provider:
            agent = _agent(store, provider, workspace, sources)
            assert (await agent.run_turn("Draw the chart.")).text == "A gradient."
            session_id = agent.engine.session.id
            agent.engine.session.close()
            resumed = _agent(store, provider, workspace, sources, session_id=session_id)
            assert (await resumed.run_turn("Once more.")).text == "The same gradient."
            folder = resumed.engine.attachments.folder
            log = resumed.engine.session.log_path.read_bytes()  # type: ignore[attr-defined]
            entries = resumed.engine.session.entries()
            resumed.engine.session.close()
    bodies = [r.body for r in wire.requests]
    assert [r.status for r in wire.requests] == [200] * 6
    for body in bodies:
        validate({k: v for k, v in body.items() if k not in ("stream", "stream_options")})  # sent streaming
    first = images_of(bodies[2])
    assert len(first) == 1
    media, data = first[0]
    assert media == "image/png" and data.startswith(b"\x89PNG")
    # the later request after the reopen sends the same bytes for the old result, and the new one's
    assert images_of(bodies[3]) == first and images_of(bodies[5]) == first * 2
    # stored once, content-addressed; the log holds the reference, never the bytes
    results = [e for e in entries if isinstance(e, ToolResult) and e.name == "imgs__chart"]
    assert len(results) == 2 and results[0].attachments == results[1].attachments
    (ref,) = results[0].attachments
    assert (ref.kind, ref.media_type, ref.width, ref.height) == ("image", "image/png", 64, 48)
    assert ref.sha256 == hashlib.sha256(data).hexdigest() and (folder / ref.sha256).read_bytes() == data
    assert [p.name for p in folder.iterdir()] == [ref.sha256]
    assert base64.b64encode(data) not in log and base64.b64encode(data)[:40] not in log
    assert results[0].content == "The chart:\n[image: imgs__chart image 1.png (image/png)]"


@pytest.mark.slow
@pytest.mark.parametrize("name", PROVIDERS)
async def test_a_model_without_vision_gets_a_note_for_an_mcp_image(
    imgs: tuple[Path, SourceConnections], tmp_path: Path, name: str
) -> None:
    workspace, sources = imgs
    make, images_of, _ = PROVIDERS[name]
    with WireServer() as wire:
        wire.script(
            Reply(text="Reading the guide.", tool_calls=[GUIDE]),
            Reply(text="Drawing.", tool_calls=[ToolUse("imgs__chart", {"kind": "png"})]),
            Reply(text="I cannot see it."),
        )
        async with make(wire, capabilities=Capabilities(vision=False)) as provider:
            agent = _agent(LocalSessionStore(tmp_path / "store"), provider, workspace, sources)
            assert (await agent.run_turn("Draw the chart.")).text == "I cannot see it."
            agent.engine.session.close()
    body = wire.requests[2].body
    assert images_of(body) == []
    sent = str(body)
    assert "iVBORw0KGgo" not in sent  # no base64 PNG anywhere
    assert "[attached image imgs__chart image 1.png (image/png, " in sent and "cannot see images" in sent


@pytest.mark.slow
async def test_refused_mcp_images_are_notes_and_the_turn_goes_on(
    imgs: tuple[Path, SourceConnections], tmp_path: Path
) -> None:
    workspace, sources = imgs
    with WireServer() as wire:
        wire.script(
            Reply(text="Reading the guide.", tool_calls=[GUIDE]),
            Reply(text="Drawing.", tool_calls=[ToolUse("imgs__chart", {"kind": "mixed"})]),
            Reply(text="One chart came through."),
        )
        async with anthropic_provider(wire) as provider:
            agent = _agent(LocalSessionStore(tmp_path / "store"), provider, workspace, sources)
            assert (await agent.run_turn("Draw the charts.")).text == "One chart came through."
            entries = agent.engine.session.entries()
            folder = agent.engine.attachments.folder
            agent.engine.session.close()
    (result,) = [e for e in entries if isinstance(e, ToolResult) and e.name == "imgs__chart"]
    assert not result.is_error and [r.name for r in result.attachments] == ["imgs__chart image 1.png"]
    assert [p.name for p in folder.iterdir()] == [result.attachments[0].sha256]  # nothing refused was stored
    notes = result.content.splitlines()[-3:]
    assert notes[0].startswith("[image not shown: imgs__chart image 4.png (image/png): its data is not valid base64")
    assert notes[1] == (
        "[image not shown: attachment 'imgs__chart image 2.png': its content is text/plain, not an image]"
    )
    assert notes[2].startswith("[image not shown: attachment 'imgs__chart image 3.jpg': the image has more than")
    (sent,) = _anthropic_images(wire.requests[2].body)
    assert sent[1].startswith(b"\x89PNG")


@pytest.mark.slow
async def test_an_mcp_image_larger_than_the_provider_takes_is_sent_fitted_with_a_note(
    imgs: tuple[Path, SourceConnections], tmp_path: Path
) -> None:
    workspace, sources = imgs
    with WireServer() as wire:
        wire.script(
            Reply(text="Reading the guide.", tool_calls=[GUIDE]),
            Reply(text="Drawing.", tool_calls=[ToolUse("imgs__chart", {"kind": "huge"})]),
            Reply(text="A wide chart."),
        )
        async with anthropic_provider(wire) as provider:
            agent = _agent(LocalSessionStore(tmp_path / "store"), provider, workspace, sources)
            await agent.run_turn("Draw the big chart.")
            agent.engine.session.close()
    blocks = [b for m in wire.requests[2].body["messages"] for b in m["content"]]
    (result,) = [b for b in blocks if b["type"] == "tool_result" and isinstance(b["content"], list)]
    text, image, note = result["content"]
    assert text == {"type": "text", "text": "[image: imgs__chart image 1.png (image/png)]"}
    with Image.open(io.BytesIO(base64.b64decode(image["source"]["data"]))) as sent:
        assert max(sent.size) <= 1568 and sent.size[0] / sent.size[1] == pytest.approx(2600 / 1400, rel=0.01)
    assert note["type"] == "text" and note["text"].startswith("[attached image imgs__chart image 1.png (image/png, ")
    assert f"2600x1400), sent at {sent.size[0]}x{sent.size[1]}]" in note["text"]
