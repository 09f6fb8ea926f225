"""markitdown is loaded by its private module paths: a release that moves them fails here, and the pin keeps it out."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import tomllib
from pathlib import Path

from lamina.attachments._markitdown import _CONVERTERS, _modules

ROOT = Path(__file__).resolve().parents[2]


def test_every_private_converter_lamina_loads_is_where_it_is_looked_for() -> None:
    spec = importlib.util.find_spec("markitdown")
    assert spec is not None and spec.submodule_search_locations
    folder = Path(next(iter(spec.submodule_search_locations)))
    for module, _ in _CONVERTERS.values():
        assert (folder / "converters" / f"{module}.py").is_file(), module
    assert (folder / "_stream_info.py").is_file()
    converters, stream_info = _modules()
    assert sorted(converters) == sorted(_CONVERTERS)
    for converter in converters.values():
        assert callable(getattr(converter, "convert", None)), converter
    assert {"mimetype", "extension", "filename", "charset"} <= set(stream_info.__dataclass_fields__)


def _pin() -> tuple[str, str]:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    (line,) = [dep for dep in extras["documents"] if dep.startswith("markitdown")]
    found = re.search(r">=([\d.]+),<([\d.]+)", line)
    assert found, f"markitdown has no upper bound in the documents extra: {line}"
    return found.group(1), found.group(2)


def test_markitdown_is_pinned_below_its_next_minor_and_the_installed_one_is_inside() -> None:
    low, high = _pin()
    installed = tuple(int(part) for part in importlib.metadata.version("markitdown").split(".")[:2])
    upper = tuple(int(part) for part in high.split("."))
    assert len(upper) == 2 and upper[1] == tuple(int(p) for p in low.split("."))[1] + 1, "one minor above the floor"
    assert installed < upper
