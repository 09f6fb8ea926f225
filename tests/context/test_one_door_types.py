"""One door, by construction: a raw string cannot be placed into a request without a mypy --strict error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

REPO = Path(__file__).parents[2]

SNIPPET = """\
from lamina.defang import neutralise, defang, render_block, trusted
from lamina.context import TextBlock, ToolResultBlock
from lamina.context import Authority, Part, Stability, Tier
from lamina.context import ToolSpec

raw: str = open("AGENTS.md").read()
TextBlock(raw)  # line 7
ToolResultBlock("c", "Read", raw)  # line 8
render_block("pinned", raw)  # line 9
Part("k", raw, "AGENTS.md", Authority.PROJECT_FILE, Stability.STABLE, Tier.RULES)  # line 10
ToolSpec("t", raw, {})  # line 11
TextBlock(neutralise(raw))
ToolResultBlock("c", "Read", neutralise(raw))
render_block("pinned", neutralise(raw))
Part("k", defang(raw, source="AGENTS.md", authority=Authority.PROJECT_FILE), "a", Authority.PROJECT_FILE,
     Stability.STABLE, Tier.RULES)
TextBlock(trusted("Lamina's own sentence."))
"""


@pytest.mark.slow
def test_raw_strings_are_type_errors_and_the_door_is_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MYPYPATH", str(REPO / "src"))  # this checkout's lamina, whatever is installed
    module = tmp_path / "door_check.py"
    module.write_text(SNIPPET)
    stdout, _, _ = mypy_api.run(
        ["--strict", "--no-error-summary", "--cache-dir", str(REPO / ".mypy_cache"), str(module)]
    )
    lines = sorted({int(m.group(1)) for m in re.finditer(r"door_check\.py:(\d+): error", stdout)})
    assert lines == [7, 8, 9, 10, 11], stdout
