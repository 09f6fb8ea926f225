"""Attachments stored once per session, content-addressed (I/O: disk).

`AttachmentStore.add_all` reads each file (or takes its bytes), checks and converts all of them
first, and only then writes: the original and each provider's image rendition as
`attachments/<sha256>`, the extracted text as `data/attachments/<sha256>.txt` (a file the model
can Read). Every file is written to a temporary name, fsynced and renamed, and the folder is
fsynced, before the caller logs the user message that refers to it. One bad file fails the whole
call with an `AttachmentError` naming it, and nothing is written. `add_images` takes the images a
tool returned each on its own: a bad one is refused and the others are kept.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeAlias

from lamina._atomic import atomic_write
from lamina.errors import AttachmentError, MissingExtraError
from lamina.session import AttachmentRef, SessionFiles
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator

MAX_ATTACHMENT_BYTES: Final = 100 * 1024 * 1024
"""Largest file accepted as an attachment."""
TEXT_FOLDER: Final = "attachments"
"""Folder under the session's data folder that holds extracted texts."""
INLINE_TEXT_CHARS: Final = 20_000
"""Converted text up to this long is sent whole; a longer one is sent as a preview and a path to Read."""
PREVIEW_CHARS: Final = 4_000
PDF_PAGE_TOKENS: Final = 1_600
"""Estimated tokens of one PDF page sent as a document (its text and its image)."""


@dataclass(frozen=True, slots=True)
class NamedBytes:
    """An attachment given as bytes, with the name the model sees."""

    name: str
    data: bytes


AttachmentInput: TypeAlias = "str | os.PathLike[str] | NamedBytes | bytes"
"""A file to attach: a path (relative to the workspace), or its bytes (named or not)."""


@dataclass(frozen=True, slots=True)
class _Prepared:
    ref: AttachmentRef
    files: tuple[tuple[Path, bytes], ...]


def _write_atomic(path: Path, data: bytes) -> bool:
    """Write `data` to `path` durably; False when an identical file is already there (content-addressed)."""
    if path.is_file() and path.stat().st_size == len(data):
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data)
    return True


def _text_name(ref: AttachmentRef) -> str:
    return "data/" + ref.text.removeprefix("data/")


def _fsync_folder(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _write_all(prepared: Iterable[_Prepared]) -> None:
    """Write every file of `prepared` durably (each once), then fsync the folders written to."""
    written: set[Path] = set()
    for item in prepared:
        for path, data in item.files:
            if path not in written and _write_atomic(path, data):
                written.add(path)
    for folder in {p.parent for p in written}:
        _fsync_folder(folder)


class AttachmentStore:
    """The attachments of one session: originals in its attachments folder, extracted text in its data folder."""

    def __init__(
        self,
        attachments_dir: Path,
        data_dir: Path,
        *,
        time_zone: str = "UTC",
        estimator: TokenEstimator = DEFAULT_ESTIMATOR,
        files: SessionFiles | None = None,
    ) -> None:
        """A store over a session's two folders.

        Args:
            attachments_dir: Where the originals go, named by their SHA-256.
            data_dir: Where the extracted text goes.
            time_zone: The time zone a calendar file's times are shown in.
            estimator: Counts the tokens of extracted text.
            files: The session's files: when given, every file is put and read through them (the
                two folders are then their local copies), and paths are shown as the session shows them.
        """
        self.folder = Path(attachments_dir)
        self.data_folder = Path(data_dir)
        self.time_zone = time_zone
        self.estimator = estimator
        self.files = files

    def path(self, sha256: str) -> Path:
        """The stored file named by `sha256`."""
        return self.folder / sha256

    def text_path(self, ref: AttachmentRef) -> Path:
        """The extracted text of `ref` (a file the model can Read)."""
        return self.data_folder / ref.text.removeprefix("data/")

    def shown_text_path(self, ref: AttachmentRef) -> str:
        """Where the model is told the extracted text of `ref` is (a path Read takes)."""
        if self.files is None:
            return str(self.text_path(ref))
        return self.files.shown_path(_text_name(ref))

    def read(self, sha256: str) -> bytes:
        """The bytes of the stored original with this SHA-256."""
        if self.files is None:
            return self.path(sha256).read_bytes()
        with self.files.open_file(f"attachments/{sha256}") as handle:
            return handle.read()

    def read_text(self, ref: AttachmentRef) -> str:
        """The extracted text of `ref`."""
        if self.files is None:
            return self.text_path(ref).read_text(encoding="utf-8", errors="replace")
        with self.files.open_file(_text_name(ref)) as handle:
            return handle.read().decode("utf-8", errors="replace")

    def _write_all(self, prepared: Iterable[_Prepared]) -> None:
        if self.files is None:
            _write_all(prepared)
            return
        done: set[str] = set()
        for item in prepared:
            for path, data in item.files:
                name = self._name(path)
                if name in done:
                    continue
                found = self.files.stat_file(name)
                if found is None or found.size != len(data) or found.sha256 != hashlib.sha256(data).hexdigest():
                    self.files.put_file(name, data)
                done.add(name)

    def _name(self, path: Path) -> str:
        if path.is_relative_to(self.folder):
            return "attachments/" + path.relative_to(self.folder).as_posix()
        return "data/" + path.relative_to(self.data_folder).as_posix()

    def add_all(self, items: Iterable[AttachmentInput], *, base: Path | None = None) -> tuple[AttachmentRef, ...]:
        """Check, convert and store `items`.

        Args:
            items: The files: paths (relative to `base`), or their bytes, named or not.
            base: The folder relative paths are resolved against (the workspace).

        Returns:
            Their references, in order, once every file is durable.

        Raises:
            AttachmentError: A file is missing, too large, of an unknown type, corrupt, encrypted
                or a bomb; nothing is stored then.
        """
        prepared = [self._prepare(item, base) for item in items]
        self._write_all(prepared)
        return tuple(p.ref for p in prepared)

    def add_images(self, images: Iterable[NamedBytes]) -> tuple[tuple[AttachmentRef, ...], tuple[AttachmentError, ...]]:
        """Check, fit and store images a tool returned, each on its own.

        One bad image never costs the others, nor the tool's result: the caller tells the model what
        was refused.

        Args:
            images: The images, with their names.

        Returns:
            The references of those kept (in order, once durable) and why each other one was refused
            (not an image, corrupt, too large, a bomb).
        """
        kept: list[_Prepared] = []
        refused: list[AttachmentError] = []
        for image in images:
            try:
                kept.append(self._prepare(image, None, images_only=True))
            except AttachmentError as exc:
                refused.append(exc)
        self._write_all(kept)
        return tuple(p.ref for p in kept), tuple(refused)

    def _load(self, item: AttachmentInput, base: Path | None) -> tuple[str, bytes]:
        if isinstance(item, NamedBytes):
            return item.name, item.data
        if isinstance(item, bytes | bytearray):
            return "attachment", bytes(item)
        path = Path(item)
        if not path.is_absolute() and base is not None:
            path = base / path
        name = path.name
        try:
            size = path.stat().st_size
            if size > MAX_ATTACHMENT_BYTES:
                raise AttachmentError(name, f"the file has {size:,} bytes, more than {MAX_ATTACHMENT_BYTES:,}")
            return name, path.read_bytes()
        except IsADirectoryError:
            raise AttachmentError(name, "it is a folder, not a file") from None
        except OSError as exc:
            raise AttachmentError(str(item), f"cannot read the file ({exc.strerror or exc})") from None

    def _prepare(self, item: AttachmentInput, base: Path | None, *, images_only: bool = False) -> _Prepared:
        name, data = self._load(item, base)
        if len(data) > MAX_ATTACHMENT_BYTES:
            raise AttachmentError(name, f"the file has {len(data):,} bytes, more than {MAX_ATTACHMENT_BYTES:,}")
        try:
            return self._converted(name, data, images_only=images_only)
        except MissingExtraError as exc:  # Pillow, pypdf, markitdown or icalendar: the `documents` extra
            raise AttachmentError(name, str(exc)) from None

    def _converted(self, name: str, data: bytes, *, images_only: bool) -> _Prepared:
        # puremagic loads on the first attachment, not with the engine; Pillow, pypdf and markitdown
        # (the `documents` extra) on the first file that needs each
        from lamina.attachments._convert import to_text
        from lamina.attachments._sniff import sniff

        sniffed = sniff(data, name)
        if images_only and sniffed.kind != "image":
            raise AttachmentError(name, f"its content is {sniffed.media_type}, not an image")

        sha = hashlib.sha256(data).hexdigest()
        files: list[tuple[Path, bytes]] = [(self.path(sha), data)]
        notes = [sniffed.mismatch] if sniffed.mismatch else []
        if sniffed.encoding_note:
            notes.append(sniffed.encoding_note)
        if sniffed.kind == "image":
            from lamina.attachments._images import prepare_image

            image = prepare_image(data, name)
            files += [(self.path(r.sha256), b) for r, b in image.renditions if r.sha256 != sha]
            if image.note:
                notes.append(image.note)
            ref = AttachmentRef(
                sha256=sha,
                name=name,
                media_type=sniffed.media_type,
                size=len(data),
                kind="image",
                width=image.width,
                height=image.height,
                renditions=tuple(r for r, _ in image.renditions),
                note="; ".join(notes),
                tokens=max(r.tokens for r, _ in image.renditions),
            )
            return _Prepared(ref, tuple(files))
        converted = to_text(data, sniffed, name, time_zone=self.time_zone)
        text_rel = f"data/{TEXT_FOLDER}/{sha}.txt"
        files.append(
            (self.data_folder / TEXT_FOLDER / f"{sha}.txt", converted.text.encode("utf-8", errors="surrogatepass"))
        )
        shown = converted.text if len(converted.text) <= INLINE_TEXT_CHARS else converted.text[:PREVIEW_CHARS]
        tokens = self.estimator.count(shown) + 40  # the header line and the wrapper
        if sniffed.kind == "pdf":
            tokens = max(tokens, converted.pages * PDF_PAGE_TOKENS)
        ref = AttachmentRef(
            sha256=sha,
            name=name,
            media_type=sniffed.media_type,
            size=len(data),
            kind=sniffed.kind,
            pages=converted.pages,
            text=text_rel,
            text_chars=len(converted.text),
            note="; ".join(notes),
            tokens=tokens,
        )
        return _Prepared(ref, tuple(files))
