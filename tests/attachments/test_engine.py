"""Attachments through the engine: the bodies every target gets, checked against the SDKs' request types."""

from __future__ import annotations

from pathlib import Path

import pytest

from lamina.attachments import MediaSupport, NamedBytes
from lamina.engine import ContextEngine
from lamina.placement import OpenAIChatTarget, OpenAIResponsesTarget, SdkManagedTarget
from lamina.session.entries import UserMessage
from tests.attachments import files
from tests.support.engine import ANTHROPIC, Clock, make_engine
from tests.support.wire_types import validate_anthropic, validate_openai_chat, validate_openai_responses


@pytest.fixture
def engine(tmp_path: Path) -> ContextEngine:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("Run the tests.\n")
    return make_engine(tmp_path, root, Clock())


def test_every_target_gets_a_body_its_sdk_accepts(engine: ContextEngine) -> None:
    attached = [NamedBytes("chart.png", files.image("PNG")), NamedBytes("r.pdf", files.pdf(1))]
    turn = engine.prepare_turn("Summarise", attached)
    anthropic = validate_anthropic(engine.request(turn, ANTHROPIC))
    chat = validate_openai_chat(engine.request(turn, OpenAIChatTarget(model="gpt-5")))
    responses = validate_openai_responses(engine.request(turn, OpenAIResponsesTarget(model="gpt-5")))
    assert [b["type"] for b in anthropic["messages"][-1]["content"]][:3] == ["image", "document", "text"]
    assert [p["type"] for p in chat["messages"][-1]["content"]][:3] == ["image_url", "text", "text"]
    assert responses["input"][1]["content"][0]["type"] == "input_image"  # after the project parts
    prompt = engine.request(turn, SdkManagedTarget()).prompt  # type: ignore[union-attr]
    assert "[attached image chart.png (image/png" in prompt and "cannot see images" in prompt
    assert "--- page 1 of 1 ---" in prompt and prompt.index("Quarterly") < prompt.index("Summarise")
    engine.session.close()


def test_the_model_in_use_decides_and_a_change_renders_history_again(engine: ContextEngine) -> None:
    turn = engine.prepare_turn("Look", [NamedBytes("chart.png", files.image("PNG"))])
    target = OpenAIChatTarget(model="local")
    engine.media = MediaSupport(vision=True)
    assert engine.request(turn, target)["messages"][-1]["content"][0]["type"] == "image_url"  # type: ignore[index]
    engine.media = MediaSupport(vision=False)
    first = engine.request(turn, target)["messages"][-1]["content"][0]  # type: ignore[index]
    assert first["type"] == "text" and "cannot see images" in first["text"]
    engine.session.close()


def test_the_logged_user_message_refers_to_the_stored_files(engine: ContextEngine) -> None:
    turn = engine.prepare_turn("Read this", [NamedBytes("notes.txt", b"remember the milk\n")])
    (user,) = [e for e in engine.session.entries() if isinstance(e, UserMessage)]
    assert user.id == turn.user_entry_id
    (ref,) = user.attachments
    assert (ref.name, ref.kind, ref.media_type, ref.text_chars) == ("notes.txt", "text", "text/plain", 18)
    assert (engine.session.folder / "attachments" / ref.sha256).read_bytes() == b"remember the milk\n"
    assert engine.attachments.text_path(ref).read_text() == "remember the milk\n"
    assert engine.context_tokens() >= ref.tokens
    engine.session.close()
