"""Converting writes nothing outside the session and opens no connection (a subprocess with its own HOME and TMPDIR)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import lamina
from tests.attachments import files

ROOT = Path(__file__).resolve().parents[2]
SOURCE = Path(lamina.__file__).resolve().parents[1]
"""The `lamina` under test (the child imports the same one)."""

CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    opened = []
    def watch(event, args):
        if event in {"socket.connect", "socket.getaddrinfo", "socket.bind", "urllib.Request"}:
            opened.append(f"{event} {args!r}"[:200])
    sys.addaudithook(watch)

    from lamina.attachments import AttachmentError, AttachmentStore

    inputs, session = Path(sys.argv[1]), Path(sys.argv[2])
    store = AttachmentStore(session / "attachments", session / "data")
    good = sorted(p for p in inputs.iterdir() if not p.name.startswith("bad-"))
    refs = store.add_all(good)
    print("kinds", sorted({r.kind for r in refs}), len(refs))
    for bad in sorted(inputs.glob("bad-*")):
        try:
            store.add_all([bad])
        except AttachmentError as exc:
            print("refused", exc.name)
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in {"magika", "onnxruntime", "markitdown"})
    print("loaded", loaded)
    print("opened", opened)
    """
)


@pytest.mark.slow
def test_every_converter_writes_nothing_to_home_or_the_temporary_folder(tmp_path: Path) -> None:
    inputs, session, home, temporary = (tmp_path / n for n in ("in", "session", "home", "tmp"))
    for folder in (inputs, home, temporary):
        folder.mkdir()
    for name, data in {
        "plan.docx": files.docx(),
        "sales.xlsx": files.xlsx(),
        "deck.pptx": files.pptx(),
        "page.html": b"<!DOCTYPE html><html><body><h1>Hello</h1></body></html>",
        "report.pdf": files.pdf(2),
        "mail.eml": files.eml(),
        "invite.ics": files.ics(),
        "photo.jpg": files.noisy_jpeg((3_000, 2_000)),
        "picture.png": files.image("PNG"),
        "moving.gif": files.animated_gif(),
        "notes.md": b"# Notes\n",
        "wide.txt": "café\n".encode("utf-16"),
        "bad-broken.docx": files.docx()[:-200],
        "bad-bomb.docx": files.zip_bomb_docx(),
    }.items():
        (inputs / name).write_bytes(data)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    environ |= {"HOME": str(home), "TMPDIR": str(temporary), "PYTHONPATH": str(SOURCE)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(inputs), str(session)],
        env=environ,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "kinds ['document', 'image', 'pdf', 'text'] 12"
    assert lines[1:3] == ["refused bad-bomb.docx", "refused bad-broken.docx"]
    assert lines[3:] == ["loaded []", "opened []"]  # markitdown's package (and so magika, onnxruntime) never imported
    assert sorted(home.rglob("*")) == [] and sorted(temporary.rglob("*")) == []
