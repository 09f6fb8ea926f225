"""CHANGELOG.md's table of moved import paths holds: each name is importable from where it says it went."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

CHANGELOG = Path(__file__).resolve().parents[1] / "CHANGELOG.md"
_ROW = re.compile(r"^\| `(?P<old>lamina[\w.]*)` \| (?P<new>[^|]+) \| (?P<names>[^|]+) \|$", re.M)


def test_every_moved_name_is_importable_from_its_new_place() -> None:
    rows = list(_ROW.finditer(CHANGELOG.read_text(encoding="utf-8")))
    assert len(rows) > 100, "the 0.2.0 layout move's table is missing"
    missing = []
    for row in rows:
        new = row["new"].strip()
        if not new.startswith("`"):
            continue  # private now: nothing to import
        module = importlib.import_module(new.strip("`"))
        for name in re.findall(r"`([^`]+)`", row["names"]):
            if not hasattr(module, name) or name not in getattr(module, "__all__", ()):
                missing.append(f"{new.strip('`')}.{name} (was {row['old']})")
    assert not missing, missing


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
