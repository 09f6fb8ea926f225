"""markitdown's converters, loaded without markitdown's package (no I/O of their own at import).

`import markitdown` runs the package's `__init__`, which imports magika, which loads onnxruntime:
that writes a device id and a telemetry queue under the user's home and a file in the temporary
folder, for every file converted and even for one then refused. Lamina knows each file's type from
its bytes already (puremagic and its own checks), so it needs no model to guess it: the converter
modules are loaded here from markitdown's folder under a private package name whose `__init__`
files never run (so magika is never imported), and each is called with the type given.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import io
import sys
import types
from pathlib import Path
from typing import Any, Final

from lamina.errors import MissingExtraError

_PACKAGE: Final = "_lamina_markitdown"
"""The private name markitdown's modules are loaded under (the real `markitdown` is left alone)."""

_CONVERTERS: Final = {
    "docx": ("_docx_converter", "DocxConverter"),
    "xlsx": ("_xlsx_converter", "XlsxConverter"),
    "pptx": ("_pptx_converter", "PptxConverter"),
    "html": ("_html_converter", "HtmlConverter"),
}


def _package(name: str, folder: Path) -> None:
    """An empty package `name` whose modules are found in `folder` (its `__init__` is not run)."""
    if name not in sys.modules:
        module = types.ModuleType(name)
        module.__path__ = [str(folder)]
        module.__package__ = name
        sys.modules[name] = module


@functools.cache
def _modules() -> tuple[dict[str, Any], Any]:
    spec = importlib.util.find_spec("markitdown")  # finds the folder; imports nothing
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError("a Word, Excel, PowerPoint or HTML attachment", "documents", "markitdown")
    root = Path(next(iter(spec.submodule_search_locations)))
    _package(_PACKAGE, root)
    _package(f"{_PACKAGE}.converters", root / "converters")
    converters = {
        extension: getattr(importlib.import_module(f"{_PACKAGE}.converters.{module}"), cls)
        for extension, (module, cls) in _CONVERTERS.items()
    }
    return converters, importlib.import_module(f"{_PACKAGE}._stream_info").StreamInfo


def convert(data: bytes, extension: str, media_type: str, name: str) -> str:
    """The Markdown text of a docx, xlsx, pptx or html file.

    Args:
        data: The file's bytes.
        extension: `docx`, `xlsx`, `pptx` or `html`.
        media_type: The file's media type.
        name: The file's name.

    Returns:
        The Markdown text.

    Raises:
        MissingExtraError: markitdown is not installed (the `documents` extra).
        Exception: Whatever the converter's parser raises on a broken file.
    """
    converters, stream_info = _modules()
    info = stream_info(mimetype=media_type, extension=f".{extension}", filename=name, charset="utf-8")
    return str(converters[extension]().convert(io.BytesIO(data), info).markdown)
