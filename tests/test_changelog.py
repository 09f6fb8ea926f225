"""CHANGELOG.md's table of moved import paths holds: each name is importable from where it says it went."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

CHANGELOG = Path(__file__).resolve().parents[1] / "CHANGELOG.md"
_ROW = re.compile(r"^\| `(?P<old>lamina[\w.]*)` \| (?P<new>[^|]+) \| (?P<names>[^|]+) \|$", re.M)
_UNRELEASED = re.compile(r"^## \[Unreleased\]$(?P<body>.*?)^## \[", re.M | re.S)
_NOW_PRIVATE = re.compile(r"^- Removed from the public surface, now private: (?P<names>.*?)(?=^- |^#|\Z)", re.M | re.S)


def _made_private_since() -> set[str]:
    """The names (`lamina.pkg.Name`) the next version makes private, which the 0.2.0 table still shows public."""
    unreleased = _UNRELEASED.search(CHANGELOG.read_text(encoding="utf-8"))
    body = unreleased["body"] if unreleased else ""
    return {name for found in _NOW_PRIVATE.finditer(body) for name in re.findall(r"`(lamina[\w.]*)`", found["names"])}


def test_every_moved_name_is_importable_from_its_new_place() -> None:
    rows = list(_ROW.finditer(CHANGELOG.read_text(encoding="utf-8")))
    assert len(rows) > 100, "the 0.2.0 layout move's table is missing"
    private_since = _made_private_since()
    missing = []
    for row in rows:
        new = row["new"].strip()
        if not new.startswith("`"):
            continue  # private now: nothing to import
        module = importlib.import_module(new.strip("`"))
        for name in re.findall(r"`([^`]+)`", row["names"]):
            if f"{new.strip('`')}.{name}" in private_since:
                continue  # public in 0.2.0, private since (the Unreleased section says so)
            if not hasattr(module, name) or name not in getattr(module, "__all__", ()):
                missing.append(f"{new.strip('`')}.{name} (was {row['old']})")
    assert not missing, missing


def test_the_names_made_private_are_not_public() -> None:
    for dotted in _made_private_since():
        module, _, name = dotted.rpartition(".")
        assert name not in getattr(importlib.import_module(module), "__all__", ()), f"{dotted} is still public"


def test_the_old_paths_are_gone() -> None:
    # the table is of moves: an old module path still importable would mean the row is wrong
    for row in _ROW.finditer(CHANGELOG.read_text(encoding="utf-8")):
        old = row["old"]
        if old == "lamina" or not row["new"].strip().startswith("`"):
            continue
        try:
            module = importlib.import_module(old)
        except ImportError:
            continue
        names = re.findall(r"`([^`]+)`", row["names"])
        assert not set(names) <= set(getattr(module, "__all__", ())), f"{old} still exports {names}"
