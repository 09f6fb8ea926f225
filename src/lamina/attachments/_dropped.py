"""Files dragged onto a terminal prompt: the paths the terminal pasted, taken as attachments (reads the disk).

A terminal pastes a dragged file as its absolute path, quoted or with backslash-escaped spaces,
or as a `file://` URL. Only such paths to existing files of a type Lamina attaches count; a
relative name in a sentence ("see notes.pdf") stays text, since the model can Read the workspace.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final
from urllib.parse import unquote, urlparse

DROPPABLE_SUFFIXES: Final = frozenset(
    {".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".tif", ".tiff", ".pdf", ".docx", ".xlsx", ".pptx"}
    | {".eml", ".ics", ".html", ".htm"}
)
_TOKEN: Final = re.compile(r"'[^'\n]+'|\"[^\"\n]+\"|(?:\\.|[^\s\\'\"])+")
_ESCAPE: Final = re.compile(r"\\(.)")


def _as_path(token: str) -> Path | None:
    quoted = token[:1] in "'\"" and token[-1:] == token[:1]
    token = token[1:-1] if quoted else _ESCAPE.sub(r"\1", token)
    if token.startswith("file://"):
        token = unquote(urlparse(token).path)
    if not token.startswith(("/", "~")):
        return None
    path = Path(token).expanduser()
    return path if path.suffix.lower() in DROPPABLE_SUFFIXES and path.is_file() else None


def dropped_files(text: str) -> tuple[str, tuple[Path, ...]]:
    """`text` with each dragged-in file path replaced by `[attached: NAME]`, and those files in order."""
    found: list[Path] = []

    def replace(match: re.Match[str]) -> str:
        path = _as_path(match.group(0))
        if path is None:
            return match.group(0)
        found.append(path)
        return f"[attached: {path.name}]"

    return _TOKEN.sub(replace, text), tuple(found)
