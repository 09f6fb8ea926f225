"""Moving a session between stores: JSONL → PostgreSQL → JSONL through `sessions export` / `import` bundles."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.errors import UsageError
from lamina.session import VIRTUAL_ROOT, LocalSessionStore, LogEntry, OutboxRecord, export_session, import_session
from lamina.session._entries import is_hidden
from lamina.session.postgres import PostgresSessionStore
from tests.session.bundle.test_bundle import _digests, _session
from tests.support.postgres import fresh_schema, schema_url

runner = CliRunner()


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[PostgresSessionStore]:
    with fresh_schema("bundle") as schema:
        store = PostgresSessionStore(schema_url(schema), files_root=tmp_path / "pg-files")
        yield store
        store.close()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("Run the tests before you finish.\n")
    (root / "notes.txt").write_text("Meeting notes: ship the parser on Friday.\n")
    return root


def _visible(entries: list[LogEntry] | tuple[LogEntry, ...]) -> list[LogEntry]:
    """Entries without the hidden transfer-summary bridges an import appends (one per import, by design)."""
    return [e for e in entries if not (isinstance(e, OutboxRecord) and is_hidden(e))]


def _texts(entries: list[LogEntry]) -> list[bytes]:
    from lamina.session._entries import encode_entry

    return [encode_entry(e) for e in entries]


def test_jsonl_to_postgres_to_jsonl_keeps_the_entries_the_view_and_the_files(
    tmp_path: Path, workspace: Path, pg: PostgresSessionStore
) -> None:
    local, session_id = _session(tmp_path, workspace)
    with local.open(session_id, writable=False) as source:
        original, original_view, source_folder = source.entries(), source.view(), source.folder
    first = export_session(local, session_id, tmp_path / "a.zip")
    into_pg = import_session(pg, first.path, keep_id=True)
    assert into_pg.session_id == session_id and into_pg.transfer_summary_id is not None
    with pg.open(session_id, writable=False) as moved:
        pg_entries = moved.entries()
        stored = {f.name: f.sha256 for f in moved.list_files()}
        assert moved.info.cwd == str(workspace)
    assert stored == _digests(source_folder)  # every file in the database, byte for byte
    # the paths into the session folder are now the paths the database store shows on every host
    assert len(_visible(pg_entries)) == len(original)
    assert any(
        f"{VIRTUAL_ROOT}/data/" in e.content for e in pg_entries if hasattr(e, "content") and isinstance(e.content, str)
    )
    assert not any(str(source_folder) in t.decode() for t in _texts(_visible(pg_entries)))
    shutil.rmtree(tmp_path / "pg-files")  # the local cache is no source: the export reads the database

    back = tmp_path / "back"
    export_session(pg, session_id, tmp_path / "b.zip")
    result = import_session(LocalSessionStore(back), tmp_path / "b.zip", keep_id=True)
    with LocalSessionStore(back).open(result.session_id, writable=False) as returned:
        final, final_view, final_folder = returned.entries(), returned.view(), returned.folder
    # same entries (with the session folder's paths remapped back to a folder of the same layout)
    remap = (str(final_folder), str(source_folder))
    assert [t.replace(remap[0].encode(), remap[1].encode()) for t in _texts(_visible(final))] == _texts(original)
    assert [e.id for e in _visible(list(final_view.entries))] == [e.id for e in original_view.entries]
    assert final_view.boundary == original_view.boundary
    assert _digests(final_folder) == _digests(source_folder)


def test_an_import_into_postgres_refuses_a_taken_id(tmp_path: Path, workspace: Path, pg: PostgresSessionStore) -> None:
    local, session_id = _session(tmp_path, workspace)
    bundle = export_session(local, session_id, tmp_path / "a.zip").path
    import_session(pg, bundle, keep_id=True)
    with pytest.raises(UsageError, match="already exists"):
        import_session(pg, bundle, keep_id=True)
    copy = import_session(pg, bundle)  # a new id is always free
    assert copy.session_id != session_id and len(pg.list()) == 2


def test_the_cli_moves_a_session_between_stores(tmp_path: Path, workspace: Path, pg: PostgresSessionStore) -> None:
    local, session_id = _session(tmp_path, workspace)
    url = f"postgresql://postgres@127.0.0.1:5432/test?schema={pg.schema}"
    bundle = tmp_path / "s.zip"
    result = runner.invoke(app, ["--store", str(local.root), "sessions", "export", session_id, "-o", str(bundle)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(
        app, ["--store", url, "sessions", "import", str(bundle), "--keep-id", "--cwd", str(workspace)]
    )
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["--store", url, "sessions", "export", session_id, "-o", str(tmp_path / "t.zip")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "t.zip").stat().st_size > 0


def _file_rows(pg: PostgresSessionStore) -> tuple[int, int, int, int]:
    """(sessions, session_files, file_blobs, file_chunks) rows in the store's schema."""
    import psycopg

    from tests.support.postgres import URL

    with psycopg.connect(URL) as conn:
        counts = [
            conn.execute(f'SELECT count(*) FROM "{pg.schema}".{table}').fetchone()
            for table in ("sessions", "session_files", "file_blobs", "file_chunks")
        ]
    a, b, c, d = (int(row[0]) if row else 0 for row in counts)
    return a, b, c, d


@pytest.mark.slow
def test_an_import_whose_last_file_is_corrupt_leaves_no_names_and_no_blobs(
    tmp_path: Path, pg: PostgresSessionStore
) -> None:
    import zipfile

    import msgspec

    from lamina.errors import BundleError
    from lamina.session import UserMessage
    from lamina.session._bundle._bundle_check import read_member
    from lamina.session._bundle._bundle_manifest import BundleManifest

    shared = os.urandom(3_000_000)  # three chunks, also named by a session already in the store
    with pg.create() as keeper:
        keeper.put_file("attachments/shared", shared)
    before = _file_rows(pg)
    local = LocalSessionStore(tmp_path / "store")
    with local.create() as session:
        session.put_file("attachments/a", os.urandom(2_500_000))
        session.put_file("attachments/shared", shared)
        session.put_file("data/tool-output/b.txt", b"offloaded")
        session.put_file("plans/z.md", b"# the last member\n")
        session.append(UserMessage(text="hi"))
        session.flush()
        sid = session.id
    good = export_session(local, sid, tmp_path / "good.zip").path
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(bad, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            dst.writestr(info, b"# THE LAST MEMBER\n" if info.filename == "session/plans/z.md" else data)
    with pytest.raises(BundleError, match="sha256"):  # refused by the check before anything is written
        import_session(pg, bad)
    assert _file_rows(pg) == before
    # as the import reads it while putting the files (the bundle changed after its check)
    with zipfile.ZipFile(bad) as zf:
        manifest = msgspec.json.decode(zf.read("manifest.json"), type=BundleManifest)
        members = sorted(
            (f for f in manifest.files if f.path.split("/")[:2][-1] in ("attachments", "data", "plans")),
            key=lambda f: f.path,
        )
        files = [(f.path[len("session/") :], read_member(zf, bad, zf.getinfo(f.path), f)) for f in members]
        assert files[-1][0] == "plans/z.md"
        with pytest.raises(BundleError, match="sha256"):
            pg.import_entries([UserMessage(id="e1", text="hi")], session_id="20260101-000000-abcdef", files=files)
    assert _file_rows(pg) == before
    assert not (tmp_path / "pg-files" / "20260101-000000-abcdef").exists()
    with pg.open(keeper.id, writable=False) as again, again.open_file("attachments/shared") as handle:
        assert handle.read() == shared
