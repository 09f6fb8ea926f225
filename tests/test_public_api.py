"""The public surface is small, sorted and importable (changes to it are deliberate)."""

from __future__ import annotations

import subprocess
import sys

import lamina


def test_all_is_sorted_and_every_name_resolves() -> None:
    names = list(lamina.__all__)
    assert names == sorted(names, key=lambda n: (n[0].islower(), n))
    assert 30 <= len(names) <= 60
    for name in names:
        assert getattr(lamina, name) is not None


def test_importing_lamina_does_not_import_the_provider_sdks() -> None:
    code = "import sys, lamina; print(any(m in sys.modules for m in ('anthropic', 'openai', 'claude_agent_sdk')))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
