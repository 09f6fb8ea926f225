"""Attachments through the engine: the bodies every target gets, checked against the SDKs' request types."""

from __future__ import annotations

from pathlib import Path

import pytest

from lamina.attachments import MediaSupport, NamedBytes
from lamina.attachments._limits import anthropic_tokens, openai_tokens
from lamina.context import Tier
from lamina.engine import ContextEngine
from lamina.placement import OpenAIChatTarget, OpenAIResponsesTarget, RenderTarget, SdkManagedTarget
from lamina.reports import budget_of_turn, cache_layout
from lamina.session import ToolCall, ToolResult, UserMessage
from lamina.tokens import DEFAULT_ESTIMATOR
from tests.attachments import files
from tests.support.engine import ANTHROPIC, Clock, json_body, make_engine, sdk_prompt
from tests.support.wire_types import validate_anthropic, validate_openai_chat, validate_openai_responses


@pytest.fixture
def engine(tmp_path: Path) -> ContextEngine:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("Run the tests.\n")
    return make_engine(tmp_path, root, Clock())


@pytest.mark.slow
def test_every_target_gets_a_body_its_sdk_accepts(engine: ContextEngine) -> None:
    attached = [NamedBytes("chart.png", files.image("PNG")), NamedBytes("r.pdf", files.pdf(1))]
    turn = engine.prepare_turn("Summarise", attached)
    anthropic = validate_anthropic(engine.request(turn, ANTHROPIC))
    chat = validate_openai_chat(engine.request(turn, OpenAIChatTarget(model="gpt-5")))
    responses = validate_openai_responses(engine.request(turn, OpenAIResponsesTarget(model="gpt-5")))
    assert [b["type"] for b in anthropic["messages"][-1]["content"]][:3] == ["image", "document", "text"]
    assert [p["type"] for p in chat["messages"][-1]["content"]][:3] == ["image_url", "text", "text"]
    assert responses["input"][1]["content"][0]["type"] == "input_image"  # after the project parts
    prompt = sdk_prompt(engine.request(turn, SdkManagedTarget()))
    assert "[attached image chart.png (image/png" in prompt and "cannot see images" in prompt
    assert "--- page 1 of 1 ---" in prompt and prompt.index("Quarterly") < prompt.index("Summarise")
    engine.session.close()


def test_the_model_in_use_decides_and_a_change_renders_history_again(tmp_path: Path) -> None:
    model = MediaSupport(vision=True)  # what the engine reads at each request: the model in use
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "AGENTS.md").write_text("Run the tests.\n")
    engine = make_engine(tmp_path, tmp_path / "ws", Clock(), media=lambda: model)
    turn = engine.prepare_turn("Look", [NamedBytes("chart.png", files.image("PNG"))])
    target = OpenAIChatTarget(model="local")
    assert json_body(engine.request(turn, target))["messages"][-1]["content"][0]["type"] == "image_url"
    model = MediaSupport(vision=False)  # a switch of model
    first = json_body(engine.request(turn, target))["messages"][-1]["content"][0]
    assert first["type"] == "text" and "cannot see images" in first["text"]
    engine.session.close()


def test_the_logged_user_message_refers_to_the_stored_files(engine: ContextEngine) -> None:
    turn = engine.prepare_turn("Read this", [NamedBytes("notes.txt", b"remember the milk\n")])
    (user,) = [e for e in engine.session.entries() if isinstance(e, UserMessage)]
    assert user.id == turn.user_entry_id
    (ref,) = user.attachments
    assert (ref.name, ref.kind, ref.media_type, ref.text_chars) == ("notes.txt", "text", "text/plain", 18)
    assert (engine.session.attachments_dir / ref.sha256).read_bytes() == b"remember the milk\n"
    assert engine.attachments.text_path(ref).read_text() == "remember the milk\n"
    assert engine.compactor.context_tokens() >= ref.tokens
    engine.session.close()


@pytest.mark.slow
@pytest.mark.parametrize("target", [ANTHROPIC, OpenAIChatTarget(model="gpt-5"), OpenAIResponsesTarget(model="gpt-5")])
def test_reports_count_images_and_pdfs_by_the_providers_formulas_not_their_base64(
    engine: ContextEngine, target: RenderTarget
) -> None:
    photo = files.noisy_jpeg((1200, 900))
    turn = engine.prepare_turn("Look", [NamedBytes("photo.jpg", photo), NamedBytes("r.pdf", files.pdf(3))])
    ref = next(e for e in engine.session.entries() if isinstance(e, UserMessage)).attachments[0]
    layout = cache_layout(engine.request(turn, target), target, turn=turn)
    sizes = sorted(b.tokens for b in layout.blocks)
    assert sizes[-1] < len(photo) // 100  # the base64 text would be about len(photo) / 3 tokens
    # the image as sent to this provider, by the larger formula
    rendition = next(r for r in ref.renditions if r.provider == ("anthropic" if target is ANTHROPIC else "openai"))
    width, height = rendition.width, rendition.height
    assert max(anthropic_tokens(width, height), openai_tokens(width, height)) in sizes
    if target is ANTHROPIC:
        assert 3 * 1_600 in sizes  # the PDF as a document: pages x PDF_PAGE_TOKENS
    # the budget counts the attachments as this target is sent them: each block is a part
    attachments = engine.attachment_blocks(target)
    report = budget_of_turn(turn, attachments=attachments)
    assert report.tiers[list(Tier).index(Tier.ON_DEMAND)].items == ("attachments",)  # the documents tier
    shown = [p for p in turn.parts(attachments=attachments) if p.key.startswith("attachment.")]
    image, document = shown[0], shown[-1]
    assert image.media_tokens == rendition.tokens  # the provider's own formula for the image as sent
    assert image.provenance == f"attachment:photo.jpg sha256:{ref.sha256}"
    if target is ANTHROPIC:
        assert document.media_tokens == 3 * 1_600  # read natively: pages x PDF_PAGE_TOKENS
    else:
        assert document.media_tokens is None and "--- page 1 of 3 ---" in document.text  # as text
    assert report.tokens(Tier.ON_DEMAND) == sum(p.token_count(DEFAULT_ESTIMATOR) for p in shown)
    engine.session.close()


@pytest.mark.slow
@pytest.mark.parametrize("target", [ANTHROPIC, OpenAIChatTarget(model="gpt-5"), OpenAIResponsesTarget(model="gpt-5")])
def test_reports_count_an_image_a_tool_returned_by_the_providers_formulas_not_its_base64(
    engine: ContextEngine, target: RenderTarget
) -> None:
    photo = files.noisy_jpeg((1200, 900))
    turn = engine.prepare_turn("Take a screenshot.")
    (ref,), refused = engine.attachments.add_images([NamedBytes("screen image 1.jpg", photo)])
    assert refused == ()
    engine.record(ToolCall(call_id="s1", name="browser__screenshot", input={}))
    engine.record(ToolResult(call_id="s1", name="browser__screenshot", content="[image]", attachments=(ref,)))
    layout = cache_layout(engine.request(turn, target), target, turn=turn)
    sizes = sorted(b.tokens for b in layout.blocks)
    assert sizes[-1] < len(photo) // 100  # the base64 text would be about len(photo) / 3 tokens
    rendition = next(r for r in ref.renditions if r.provider == ("anthropic" if target is ANTHROPIC else "openai"))
    image_tokens = max(
        anthropic_tokens(rendition.width, rendition.height), openai_tokens(rendition.width, rendition.height)
    )
    assert any(size >= image_tokens for size in sizes)  # the image is counted, inside its result or beside it
    attachments = engine.attachment_blocks(target)
    shown, *note = [p for p in turn.parts(engine.continuation(turn), attachments) if p.key.startswith("attachment.")]
    assert shown.media_tokens == rendition.tokens and shown.tier is Tier.TOOL_RESULTS
    assert all(p.text.startswith("[attached image screen image 1.jpg (image/jpeg") for p in note)  # when resized
    report = budget_of_turn(turn, engine.continuation(turn), attachments=attachments)
    assert report.tokens(Tier.TOOL_RESULTS) >= rendition.tokens
    engine.session.close()
