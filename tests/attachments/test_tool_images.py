"""Images a tool returned, as the log keeps them and the conversation shows them (pure, but for the store)."""

from __future__ import annotations

import base64
from pathlib import Path

import msgspec
import pytest

from lamina.attachments import AttachmentRenderer, AttachmentStore, MediaSupport, NamedBytes
from lamina.compaction import apply_prunes
from lamina.context import ToolResultBlock, to_messages
from lamina.errors import EntryDecodeError
from lamina.session import ToolCall, ToolOutputPruned, ToolResult, decode_entry, encode_entry
from tests.attachments import files


def test_a_tool_result_logged_before_images_decodes_unchanged_and_one_with_them_holds_references(
    tmp_path: Path,
) -> None:
    old = b'{"type":"tool_result","id":"r1","parent_id":"c1","ts":1.0,"v":1,"call_id":"c1","name":"Read","content":"x"}'
    decoded = decode_entry(old)
    assert isinstance(decoded, ToolResult) and decoded.attachments == () and decoded.content == "x"
    store = AttachmentStore(tmp_path / "attachments", tmp_path / "data")
    (ref,), _ = store.add_images([NamedBytes("s image 1.png", files.image("PNG"))])
    line = encode_entry(ToolResult(id="r2", call_id="c2", name="s__shot", content="[image]", attachments=(ref,)))
    assert decode_entry(line) == ToolResult(
        id="r2", call_id="c2", name="s__shot", content="[image]", attachments=(ref,)
    )
    assert len(line) < 1_000 and base64.b64encode(store.read(ref.sha256))[:40] not in line
    forged = msgspec.json.encode(
        {**msgspec.json.decode(line), "attachments": [{**msgspec.to_builtins(ref), "sha256": "../../etc/passwd"}]}
    )
    with pytest.raises(EntryDecodeError):  # a log line can never name a file outside the attachments
        decode_entry(forged)


def test_a_pruned_result_drops_its_images_with_its_text(tmp_path: Path) -> None:
    store = AttachmentStore(tmp_path / "attachments", tmp_path / "data")
    refs, _ = store.add_images([NamedBytes("s image 1.png", files.image("PNG"))])
    call = ToolCall(id="c", call_id="c1", name="s__shot", input={})
    result = ToolResult(id="r", call_id="c1", name="s__shot", content="[image]", attachments=refs)
    pruned = ToolOutputPruned(id="p", call_ids=("c1",))
    (_, shown, _) = apply_prunes([call, result, pruned])
    (_, text_only, _) = apply_prunes([call, msgspec.structs.replace(result, attachments=()), pruned])
    assert isinstance(shown, ToolResult) and shown.attachments == ()
    assert isinstance(text_only, ToolResult) and shown.content == text_only.content != result.content  # the same note
    renderer = AttachmentRenderer(store, "anthropic", MediaSupport(vision=True))
    (message,) = [m for m in to_messages([call, shown], attachments=renderer) if m.role == "user"]
    (block,) = message.blocks
    assert isinstance(block, ToolResultBlock) and block.media == ()
    (message,) = [m for m in to_messages([call, result], attachments=renderer) if m.role == "user"]
    (block,) = message.blocks
    assert isinstance(block, ToolResultBlock) and [type(b).__name__ for b in block.media] == ["ImageBlock"]
