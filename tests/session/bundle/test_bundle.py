"""Transfer bundles (F13): export and import round trip on another store, and hostile bundles refused."""

from __future__ import annotations

import hashlib
import io
import json
import re
import stat
import struct
import warnings
import zipfile
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec
import pytest

from lamina.agent import open_agent
from lamina.errors import BundleError, UsageError
from lamina.session import (
    AssistantMessage,
    BundleLimits,
    JsonlSession,
    LocalSessionStore,
    OutboxRecord,
    ToolResult,
    UserMessage,
    export_session,
    import_session,
)
from lamina.session._bundle import check_bundle
from lamina.session._bundle._bundle_manifest import BundleManifest
from tests.support.engine import Clock, make_engine
from tests.wire.fixtures import anthropic_provider
from tests.wire.script import Reply
from tests.wire.server import WireServer


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("Run the tests before you finish.\n")
    (root / "notes.txt").write_text("Meeting notes: ship the parser on Friday.\n")
    return root


def _session(tmp_path: Path, workspace: Path) -> tuple[LocalSessionStore, str]:
    """A session with an attachment, an offloaded tool output, a plan and two turns."""
    engine = make_engine(tmp_path, workspace, Clock(), on_disk=True)  # exported from disk
    assert isinstance(engine.session, JsonlSession)
    folder = engine.session.folder
    turn = engine.prepare_turn("Read my notes and the big log", [workspace / "notes.txt"])
    engine.commit(turn)
    engine.record(AssistantMessage(text="Reading the log."))
    (folder / "data" / "tool-output").mkdir()
    big = folder / "data" / "tool-output" / "bash-1.txt"
    big.write_text("line\n" * 1000)
    engine.record(ToolResult(call_id="c1", name="Bash", content=f"see {big}", full_output_path=str(big)))
    engine.record(AssistantMessage(text=f"The log is in {big}; the workspace is {workspace}."))
    (folder / "plans" / "plan.md").write_text("# Plan\n1. parser\n")
    second = engine.prepare_turn("Now the second step")
    engine.commit(second)
    engine.record(AssistantMessage(text="Second answer"))
    engine.session.close()
    return LocalSessionStore(tmp_path / "store"), engine.session.id


def _digests(folder: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for top in ("attachments", "data", "plans"):
        for path in sorted((folder / top).rglob("*")):
            if path.is_file():
                out[path.relative_to(folder).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


async def test_export_import_round_trip_on_another_store(tmp_path: Path, workspace: Path, wire: WireServer) -> None:
    source, session_id = _session(tmp_path, workspace)
    bundle = tmp_path / "moved.zip"
    exported = export_session(source, session_id, bundle)
    assert exported.files >= 6 and not exported.provider_transcript
    manifest = check_bundle(bundle)
    assert manifest.session_id == session_id and manifest.cwd == str(workspace)

    target = LocalSessionStore(tmp_path / "elsewhere" / "store")
    new_ws = tmp_path / "elsewhere" / "project"
    new_ws.mkdir(parents=True)
    (new_ws / "AGENTS.md").write_text("Run the tests before you finish.\n")
    result = import_session(target, bundle, cwd=new_ws)
    assert result.session_id != session_id and result.source_session_id == session_id
    assert result.transfer_summary_id is not None
    old_folder, new_folder = source.folder_of(session_id), target.folder_of(result.session_id)
    assert _digests(new_folder) == _digests(old_folder)  # every file, byte for byte

    with source.open(session_id, writable=False) as a, target.open(result.session_id, writable=False) as b:
        assert b.meta.cwd == str(new_ws) and b.report.clean
        old, new = a.entries(), b.entries()
        summary = new[-1]
        assert isinstance(summary, OutboxRecord) and summary.hidden and summary.kind == "transfer_summary"
        assert [e.id for e in new[:-1]] == [e.id for e in old] and b.leaf_id == summary.id
        # most recent first: the second request before the first
        assert summary.text.index("Now the second step") < summary.text.index("Read my notes")
        result_entry = next(e for e in new if isinstance(e, ToolResult))
        assert result_entry.full_output_path == str(new_folder / "data" / "tool-output" / "bash-1.txt")
        remapped = next(e for e in new if isinstance(e, AssistantMessage) and "workspace" in e.text)
        assert str(new_ws) in remapped.text and str(workspace) not in remapped.text
        assert str(old_folder) not in remapped.text

    # the first turn on the target carries the summary once; the next one never again
    wire.script(Reply(text="Continuing here."), Reply(text="And again."))
    async with anthropic_provider(wire) as provider:
        agent = open_agent(target, provider, workspace=new_ws, session_id=result.session_id)
        await agent.run_turn("Go on")
        await agent.run_turn("Once more")
        agent.engine.session.close()
    first, second = (json.dumps(r.body) for r in wire.requests)
    assert first.count("moved here from another machine") == 1
    assert second.count("moved here from another machine") == 1  # in history, not in a new tail
    assert "moved here" not in json.dumps(wire.requests[1].body["messages"][-1])


def test_keep_id_and_an_id_taken_here(tmp_path: Path, workspace: Path) -> None:
    source, session_id = _session(tmp_path, workspace)
    bundle = tmp_path / "moved.zip"
    export_session(source, session_id, bundle)
    target = LocalSessionStore(tmp_path / "other")
    kept = import_session(target, bundle, keep_id=True)
    assert kept.session_id == session_id and kept.cwd == str(workspace)
    before = sorted(p.name for p in target.root.iterdir())
    with pytest.raises(UsageError, match="already exists"):
        import_session(target, bundle, keep_id=True)
    assert sorted(p.name for p in target.root.iterdir()) == before
    again = import_session(target, bundle)  # a new id is always free
    assert again.session_id != session_id


def test_a_bundle_with_a_provider_transcript_gets_no_transfer_summary(tmp_path: Path, workspace: Path) -> None:
    source, session_id = _session(tmp_path, workspace)
    provider = source.folder_of(session_id) / "provider"
    provider.mkdir()
    (provider / "transcript.jsonl").write_text('{"type":"user"}\n')
    bundle = tmp_path / "moved.zip"
    assert export_session(source, session_id, bundle).provider_transcript
    result = import_session(LocalSessionStore(tmp_path / "other"), bundle)
    assert result.transfer_summary_id is None
    folder = LocalSessionStore(tmp_path / "other").folder_of(result.session_id)
    assert (folder / "provider" / "transcript.jsonl").read_text() == '{"type":"user"}\n'


# -- hostile bundles --------------------------------------------------------------------------


def _members(bundle: Path) -> tuple[BundleManifest, dict[str, bytes]]:
    with zipfile.ZipFile(bundle) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    manifest = msgspec.json.decode(members.pop("manifest.json"), type=BundleManifest)
    return manifest, members


def _listed(name: str, data: bytes) -> dict[str, object]:
    return {"path": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _write(
    path: Path,
    manifest: BundleManifest,
    members: dict[str, bytes],
    *,
    extra: Sequence[tuple[zipfile.ZipInfo | str, bytes]] = (),
    listed_extra: bool = True,
    raw_manifest: bytes | None = None,
) -> Path:
    files = [_listed(n, d) for n, d in members.items()]
    if listed_extra:
        files += [_listed(i if isinstance(i, str) else i.filename, d) for i, d in extra]
    doc = msgspec.to_builtins(manifest)
    doc["files"] = files
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about duplicate names: that is the point
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for name, data in members.items():
                zf.writestr(name, data)
            for info, data in extra:
                zf.writestr(info, data)
            zf.writestr("manifest.json", raw_manifest if raw_manifest is not None else json.dumps(doc))
    return path


def _symlink(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


def _bad_checksum(path: Path, manifest: BundleManifest, members: dict[str, bytes]) -> Path:
    name = next(n for n in members if n.startswith("session/attachments/"))
    tampered = dict(members)
    tampered[name] = members[name][:-1] + b"!"
    files = [_listed(n, d) for n, d in members.items()]  # the manifest keeps the true checksums
    doc = msgspec.to_builtins(manifest)
    doc["files"] = files
    return _write(path, manifest, tampered, raw_manifest=json.dumps(doc).encode())


def _wrong_size(path: Path, manifest: BundleManifest, members: dict[str, bytes]) -> Path:
    files = [_listed(n, d) for n, d in members.items()]
    for f in files:
        if f["path"] == "session/log.jsonl":
            f["size"] = int(str(f["size"])) - 10  # the member is larger than declared
    doc = msgspec.to_builtins(manifest)
    doc["files"] = files
    return _write(path, manifest, members, raw_manifest=json.dumps(doc).encode())


def _not_a_zip(path: Path, manifest: BundleManifest, members: dict[str, bytes]) -> Path:
    path.write_bytes(b"PK\x03\x04 this is not really a zip archive")
    return path


def _damaged_log(path: Path, manifest: BundleManifest, members: dict[str, bytes]) -> Path:
    broken = dict(members)
    broken["session/log.jsonl"] = members["session/log.jsonl"] + b'{"type":"user","id":\n'
    return _write(path, manifest, broken)


def _no_manifest(path: Path, manifest: BundleManifest, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


HOSTILE: dict[str, tuple[Callable[[Path, BundleManifest, dict[str, bytes]], Path], str]] = {
    "traversal": (
        lambda p, m, s: _write(p, m, s, extra=[("session/data/../../../evil.txt", b"x")]),
        "path traversal",
    ),
    "absolute": (lambda p, m, s: _write(p, m, s, extra=[("/tmp/evil.txt", b"x")]), "absolute"),
    "backslash": (lambda p, m, s: _write(p, m, s, extra=[("session\\data\\x.txt", b"x")]), "absolute or malformed"),
    "outside the layout": (lambda p, m, s: _write(p, m, s, extra=[("session/.lock", b"x")]), "outside the session"),
    "symlink": (
        lambda p, m, s: _write(p, m, s, extra=[(_symlink("session/data/link"), b"/etc/passwd")]),
        "symbolic link",
    ),
    "duplicate": (
        lambda p, m, s: _write(p, m, s, extra=[("session/plans/plan.md", b"second copy")], listed_extra=False),
        "duplicate member",
    ),
    "case duplicate": (
        lambda p, m, s: _write(p, m, s, extra=[("session/plans/PLAN.md", b"other")]),
        "duplicate member",
    ),
    "zip bomb": (
        lambda p, m, s: _write(p, m, s, extra=[("session/data/zeros.bin", bytes(8 * 1024 * 1024))]),
        "zip bomb",
    ),
    "bad checksum": (_bad_checksum, "sha256 does not match"),
    "larger than declared": (_wrong_size, "larger than declared"),
    "unlisted member": (
        lambda p, m, s: _write(p, m, s, extra=[("session/data/extra.txt", b"x")], listed_extra=False),
        "not listed in the manifest",
    ),
    "bad manifest": (lambda p, m, s: _write(p, m, s, raw_manifest=b'{"format": "zip"}'), "invalid manifest"),
    "no manifest": (_no_manifest, "no manifest.json"),
    "not a zip": (_not_a_zip, "not a zip archive"),
    "damaged log": (_damaged_log, "session log is damaged"),
}


@pytest.fixture(scope="module")
def good_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("good")
    workspace = tmp / "ws"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text("rules\n")
    (workspace / "notes.txt").write_text("notes\n")
    store, session_id = _session(tmp, workspace)
    return export_session(store, session_id, tmp / "good.zip").path


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_bundle_is_refused_and_nothing_is_written(tmp_path: Path, good_bundle: Path, case: str) -> None:
    make, message = HOSTILE[case]
    manifest, members = _members(good_bundle)
    bundle = make(tmp_path / "hostile.zip", manifest, members)
    store = LocalSessionStore(tmp_path / "store")
    with pytest.raises(BundleError, match=message) as caught:
        import_session(store, bundle, limits=BundleLimits(max_ratio=100))
    assert str(bundle) in str(caught.value)
    assert not store.root.exists()  # nothing written, not even the store folder
    with pytest.raises(BundleError, match=message):
        import_session(store, bundle, keep_id=True, limits=BundleLimits(max_ratio=100))
    assert not store.root.exists()


def test_declared_total_size_limit(tmp_path: Path, good_bundle: Path) -> None:
    store = LocalSessionStore(tmp_path / "store")
    with pytest.raises(BundleError, match="declare more than 1000 bytes"):
        import_session(store, good_bundle, limits=BundleLimits(max_total_bytes=1000))
    assert not store.root.exists()


def test_a_user_message_is_unchanged_by_a_path_that_only_starts_like_the_workspace(
    tmp_path: Path, workspace: Path
) -> None:
    engine = make_engine(tmp_path, workspace, Clock(), on_disk=True)  # exported from disk
    engine.record(UserMessage(text=f"compare {workspace}2/x with {workspace}/x"))
    engine.session.close()
    store = LocalSessionStore(tmp_path / "store")
    bundle = export_session(store, engine.session.id, tmp_path / "b.zip").path
    result = import_session(LocalSessionStore(tmp_path / "other"), bundle, cwd="/new/place")
    with LocalSessionStore(tmp_path / "other").open(result.session_id, writable=False) as session:
        text = next(e for e in session.entries() if isinstance(e, UserMessage)).text
    assert text == f"compare {workspace}2/x with /new/place/x"


def test_export_of_a_missing_session_and_import_of_a_missing_file(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path / "store")
    with pytest.raises(Exception, match="no session"):
        export_session(store, "20260101-000000-abcdef", tmp_path / "x.zip")
    assert not (tmp_path / "x.zip").exists()
    with pytest.raises(UsageError, match="no bundle at"):
        import_session(store, tmp_path / "missing.zip")
    assert list(tmp_path.iterdir()) == []


def test_manifest_is_readable_json(tmp_path: Path, good_bundle: Path) -> None:
    with zipfile.ZipFile(good_bundle) as zf:
        doc = json.load(io.BytesIO(zf.read("manifest.json")))
    assert doc["format"] == "lamina-session-bundle" and doc["version"] == 1
    assert {f["path"] for f in doc["files"]} >= {"session/log.jsonl", "session/meta.json", "transfer_summary.txt"}


def test_a_workspace_at_the_root_is_not_remapped_in_every_text(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path / "store")
    with store.create(cwd="/") as session:
        session.append(UserMessage(text="a / b and /etc/hosts"))
    bundle = export_session(store, session.id, tmp_path / "b.zip").path
    result = import_session(LocalSessionStore(tmp_path / "other"), bundle, cwd="/new/place")
    with LocalSessionStore(tmp_path / "other").open(result.session_id, writable=False) as imported:
        assert next(e for e in imported.entries() if isinstance(e, UserMessage)).text == "a / b and /etc/hosts"
        assert imported.meta.cwd == "/new/place"


# -- member names as the archive stores them (raw bytes: zipfile cuts `filename` at a NUL) -----------

_UTF8_NAME: int = 1 << 11


def _raw_zip(members: Sequence[tuple[bytes, bytes, bytes]]) -> bytes:
    """A stored (uncompressed) zip written byte by byte: (central directory name, local header name, data).

    zipfile cannot write these names: it cuts a name at its first NUL, and writes one name for both headers.
    """
    local = io.BytesIO()
    central = io.BytesIO()
    for name, local_name, data in members:
        flags = _UTF8_NAME if any(b >= 0x80 for b in name) else 0
        crc, offset = zlib.crc32(data), local.tell()
        fixed = (20, flags, 0, 0, 0x21, crc, len(data), len(data))  # version, flags, stored, 00:00 1980-01-01
        local.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, *fixed, len(local_name), 0) + local_name + data)
        central.write(
            struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, *fixed, len(name), 0, 0, 0, 0, 0, offset) + name
        )
    directory = central.getvalue()
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(directory), local.tell(), 0)
    return local.getvalue() + directory + end


def _bundle_with_member(good_bundle: Path, stored: bytes, *, local_name: bytes | None = None) -> bytes:
    """The good bundle's members, plus one stored under the raw name `stored`, listed as zipfile reads it."""
    manifest, members = _members(good_bundle)
    data = b"looks harmless\n"
    read_as = zipfile.ZipInfo(stored.decode("utf-8" if any(b >= 0x80 for b in stored) else "cp437")).filename
    doc = msgspec.to_builtins(manifest)
    doc["files"] = [_listed(n, d) for n, d in members.items()]
    if not read_as.endswith("/"):
        doc["files"].append(_listed(read_as, data))
    raw = [(n.encode(), n.encode(), d) for n, d in members.items()]
    raw.append((stored, stored if local_name is None else local_name, b"" if read_as.endswith("/") else data))
    raw.append((b"manifest.json", b"manifest.json", json.dumps(doc).encode()))
    return _raw_zip(raw)


def _tree(root: Path) -> dict[str, bytes | None]:
    return {p.relative_to(root).as_posix(): p.read_bytes() if p.is_file() else None for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize(
    ("stored", "local_name", "refused"),
    [
        (b"session/data/ok.txt\x00../../../x", None, "U+0000"),
        (b"session/data/a\x1b[31mred.txt", None, "U+001B"),
        (b"session/data/del\x7f.txt", None, "U+007F"),
        ("session/data/nel\u0085.txt".encode(), None, "U+0085"),
        ("session/data/invoice\u202etxt.exe".encode(), None, "U+202E"),
        ("session/data/line\u2028break.txt".encode(), None, "U+2028"),
        (b"session/data/folder\x01/", None, "U+0001"),
        (b"session/data/ok.txt", b"session/data/ok.txt\x00../../../x", "File name in directory"),
    ],
    ids=["NUL", "ESC", "DEL", "C1 NEL", "bidi override", "line separator", "folder entry", "local header NUL"],
)
def test_a_member_name_with_a_control_character_in_its_stored_bytes_is_refused_and_the_store_is_untouched(
    tmp_path: Path, good_bundle: Path, stored: bytes, local_name: bytes | None, refused: str
) -> None:
    store = LocalSessionStore(tmp_path / "store")
    import_session(store, good_bundle)  # a store with a session in it already
    before = _tree(store.root)
    bundle = tmp_path / "hostile.zip"
    bundle.write_bytes(_bundle_with_member(good_bundle, stored, local_name=local_name))
    whole = stored.decode("utf-8" if any(b >= 0x80 for b in stored) else "cp437")
    with zipfile.ZipFile(bundle) as zf:  # the archive opens; zipfile's `filename` stops at a NUL
        info = zf.infolist()[-2]
        assert info.orig_filename == whole and info.filename == whole.split("\0")[0]
    for keep_id in (False, True):
        with pytest.raises(BundleError, match=re.escape(refused)) as caught:
            import_session(store, bundle, keep_id=keep_id)
        assert caught.value.member == whole and repr(whole) in str(caught.value)  # the member named whole
        assert _tree(store.root) == before  # nothing written, nothing changed
    with pytest.raises(BundleError, match=re.escape(refused)):
        check_bundle(bundle)
