"""Session files in the PostgreSQL store beside the JSONL store's folders, and a handover between hosts with files.

- `pg_file_put_mb_per_s` / `pg_file_read_mb_per_s`: a 20 MB attachment put from a local file
  (hashed, then streamed in 1 MiB chunks in one transaction; new bytes every run, so nothing is
  deduplicated) and read back through `open_file` (one chunk in memory at a time).
- `jsonl_file_put_mb_per_s` / `jsonl_file_read_mb_per_s`: the same through the JSONL store (a
  temporary file, fsynced and renamed, its folder fsynced).
- `pg_takeover_s_with_files`: another host process (a file folder of its own) ends a turn that
  attached 20 MB and offloaded a result; then seconds for this process (another folder) to take
  the session's lease and have every file of the session in its local cache.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import Figure
from lamina.session import LocalSessionStore, SessionLog, SessionStore
from lamina.session.postgres import PostgresSessionStore

SIZE = 20 * 1024 * 1024
ROOT = Path(__file__).resolve().parents[1]


def _rates(store: SessionStore, folder: Path, runs: int) -> tuple[float, float]:
    """(put MB/s, read MB/s), medians of `runs` puts and reads of a new 20 MB file each."""
    puts: list[float] = []
    reads: list[float] = []
    with store.create() as session:
        for run in range(runs):
            source = folder / f"upload-{run}.bin"
            source.write_bytes(os.urandom(SIZE))
            began = time.perf_counter()
            info = session.put_file(f"attachments/upload-{run}", source)
            puts.append(SIZE / 2**20 / (time.perf_counter() - began))
            source.unlink()
            reads.append(_read_rate(session, info.name))
    return statistics.median(puts), statistics.median(reads)


def _read_rate(session: SessionLog, name: str) -> float:
    began = time.perf_counter()
    size = 0
    with session.open_file(name) as handle:
        while chunk := handle.read(1 << 20):
            size += len(chunk)
    return size / 2**20 / (time.perf_counter() - began)


def _takeover(url: str, folder: Path) -> float:
    """Seconds to take over a session from another host and have all its files here."""
    with PostgresSessionStore(url, files_root=folder / "setup") as setup, setup.create() as session:
        sid = session.id
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + str(ROOT)}
    args = [sys.executable, "-m", "tests.session.postgres._pg_file_host", url, str(folder / "host-a"), sid, "3"]
    host = subprocess.run(args, input="big 0\nexit\n", capture_output=True, text=True, cwd=ROOT, env=env, check=True)
    assert json.loads(host.stdout.splitlines()[-1])["wrote"], host.stdout
    with PostgresSessionStore(url, files_root=folder / "host-b") as here:
        began = time.perf_counter()
        with here.open(sid, wait=10.0) as session:
            for info in session.list_files():
                session.local_file(info.name)
        return time.perf_counter() - began


def file_figures(url: str, folder: Path, *, quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    """The figures above, against the PostgreSQL store at `url` (a schema of the run's own)."""
    runs = 3 if quick else 5
    progress(f"session files: a 20 MB attachment put and read x{runs}, PostgreSQL and JSONL")
    with PostgresSessionStore(url, files_root=folder / "pg-files") as store:
        pg_put, pg_read = _rates(store, folder, runs)
    jsonl_put, jsonl_read = _rates(LocalSessionStore(folder / "jsonl-files"), folder, runs)
    progress("session files: a takeover from another host, with its files")
    takeovers = [_takeover(url, folder / f"takeover-{n}") for n in range(2 if quick else 3)]
    return [
        Figure("pg_file_put_mb_per_s", pg_put, "MB/s", note=f"20 MB, 1 MiB chunks, one transaction; median of {runs}"),
        Figure("pg_file_read_mb_per_s", pg_read, "MB/s", note="streamed, one chunk in memory at a time"),
        Figure(
            "jsonl_file_put_mb_per_s", jsonl_put, "MB/s", note=f"fsync + rename; pg/jsonl = {pg_put / jsonl_put:.2f}x"
        ),
        Figure("jsonl_file_read_mb_per_s", jsonl_read, "MB/s", note=f"pg/jsonl = {pg_read / jsonl_read:.2f}x"),
        Figure(
            "pg_takeover_s_with_files",
            statistics.median(takeovers),
            "s",
            note=f"open + every file (20 MB attachment, its text, a result) fetched into an empty cache;"
            f" median of {len(takeovers)}, worst {max(takeovers):.2f} s",
        ),
    ]
