"""Transfer bundles carry the model's reasoning byte for byte, and refuse a bundle whose reasoning was tampered with."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import msgspec
import pytest

from lamina.errors import BundleError
from lamina.session import (
    AssistantMessage,
    JsonlSession,
    LocalSessionStore,
    Reasoning,
    ToolCall,
    ToolResult,
    export_session,
    import_session,
)
from tests.support.engine import Clock, make_engine


def _reasoned_session(tmp_path: Path, workspace: Path) -> tuple[LocalSessionStore, str, tuple[Reasoning, ...]]:
    """A session whose assistant message carries signed thinking, redacted thinking and an encrypted item,
    the thinking text naming the workspace (a path an import remaps everywhere else)."""
    engine = make_engine(tmp_path, workspace, Clock(), on_disk=True)
    assert isinstance(engine.session, JsonlSession)
    reasoning = (
        Reasoning(
            provider="anthropic",
            kind="thinking",
            text=f"The file is {workspace}/src/parse.py; read it first.",
            signature="EqQBCkgIARAB/+sig==",
        ),
        Reasoning(provider="anthropic", kind="redacted_thinking", data="EmwKAhgBEgy3redacted/+=="),
        Reasoning(
            provider="openai", kind="reasoning", item_id="rs_42", summary=(f"Look in {workspace}.",), data="gAAAAAenc"
        ),
    )
    turn = engine.prepare_turn("Fix the parser")
    engine.commit(turn)
    engine.record(AssistantMessage(text=f"Reading {workspace}/src/parse.py.", reasoning=reasoning))
    engine.record(ToolCall(call_id="c1", name="Read", input={"path": f"{workspace}/src/parse.py"}))
    engine.record(ToolResult(call_id="c1", name="Read", content="def parse(): ..."))
    engine.record(AssistantMessage(text="Fixed."))
    engine.session.close()
    return LocalSessionStore(tmp_path / "store"), engine.session.id, reasoning


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("Run the tests before you finish.\n")
    return root


def test_export_and_import_carry_reasoning_byte_for_byte_and_remap_only_the_rest(
    tmp_path: Path, workspace: Path
) -> None:
    source, session_id, reasoning = _reasoned_session(tmp_path, workspace)
    bundle = export_session(source, session_id, tmp_path / "moved.zip").path
    target = LocalSessionStore(tmp_path / "there" / "store")
    new_ws = tmp_path / "there" / "project"
    new_ws.mkdir(parents=True)
    result = import_session(target, bundle, cwd=new_ws)
    with target.open(result.session_id, writable=False) as moved:
        first = next(e for e in moved.entries() if isinstance(e, AssistantMessage) and e.reasoning)
        assert first.reasoning == reasoning  # the thinking text still names the old workspace: it is signed
        assert msgspec.json.encode(first.reasoning) == msgspec.json.encode(reasoning)
        assert first.text == f"Reading {new_ws}/src/parse.py."  # the rest of the entry is remapped
        call = next(e for e in moved.entries() if isinstance(e, ToolCall))
        assert call.input == {"path": f"{new_ws}/src/parse.py"}
    log = (target.folder_of(result.session_id) / "log.jsonl").read_bytes()
    for block in reasoning:
        for value in (block.signature, block.data):
            if value:
                assert msgspec.json.encode(value) in log


def _rewrite(bundle: Path, out: Path, old: bytes, new: bytes, *, rehash: bool) -> Path:
    """`bundle` with `old` replaced by `new` in its log; the manifest keeps the true checksum unless `rehash`."""
    with zipfile.ZipFile(bundle) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    log = members["session/log.jsonl"]
    assert log.count(old) == 1
    members["session/log.jsonl"] = log.replace(old, new)
    if rehash:
        manifest = json.loads(members["manifest.json"])
        for listed in manifest["files"]:
            data = members[listed["path"]]
            listed["size"], listed["sha256"] = len(data), hashlib.sha256(data).hexdigest()
        members["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return out


@pytest.mark.parametrize(
    ("old", "new", "rehash", "message"),
    [
        pytest.param(b"EqQBCkgIARAB/+sig==", b"EqQBCkgIARAB/+siG==", False, "sha256 does not match", id="signature"),
        pytest.param(b"EmwKAhgBEgy3redacted", b"EmwKAhgBEgy3REDACTED", False, "sha256 does not match", id="redacted"),
        pytest.param(b'"gAAAAAenc"', b'"gAAAAAeNc"', False, "sha256 does not match", id="encrypted"),
        pytest.param(b'"redacted_thinking"', b'"forged_thinking"', True, "session log is damaged", id="kind"),
        pytest.param(b'"signature":"EqQB', b'"signature":7,"x":"', True, "session log is damaged", id="not a str"),
    ],
)
def test_a_bundle_with_tampered_reasoning_is_refused_and_nothing_is_written(
    tmp_path: Path, workspace: Path, old: bytes, new: bytes, rehash: bool, message: str
) -> None:
    source, session_id, _ = _reasoned_session(tmp_path, workspace)
    good = export_session(source, session_id, tmp_path / "good.zip").path
    bundle = _rewrite(good, tmp_path / "tampered.zip", old, new, rehash=rehash)
    store = LocalSessionStore(tmp_path / "other")
    with pytest.raises(BundleError, match=message):
        import_session(store, bundle)
    assert not store.root.exists()
