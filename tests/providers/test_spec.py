"""`provider_from_spec` and the package surface."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import lamina.providers as providers
from lamina.errors import UsageError
from lamina.providers import (
    AnthropicProvider,
    OpenAIChatProvider,
    OpenAIResponsesProvider,
    ScriptedProvider,
    provider_from_spec,
)

REPO = Path(__file__).parents[2]


async def test_each_spec_form_builds_its_provider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"responses": []}))
    built = {
        spec: provider_from_spec(spec)
        for spec in (
            "anthropic:claude-sonnet-5",
            "openai:gpt-5",
            "openai-responses:gpt-5-mini",
            "openai-compat:http://localhost:8000/v1#qwen3",
            f"scripted:{script}",
        )
    }
    kinds = [(type(p).__name__, p.name, getattr(p.target, "model", None)) for p in built.values()]
    assert kinds == [
        ("AnthropicProvider", "anthropic", "claude-sonnet-5"),
        ("OpenAIChatProvider", "openai", "gpt-5"),
        ("OpenAIResponsesProvider", "openai-responses", "gpt-5-mini"),
        ("OpenAIChatProvider", "openai-compat", "qwen3"),
        ("ScriptedProvider", "scripted", "scripted"),
    ]
    for provider in built.values():
        assert isinstance(provider, AnthropicProvider | OpenAIChatProvider | OpenAIResponsesProvider | ScriptedProvider)
        await provider.aclose()


@pytest.mark.parametrize(
    "spec",
    ["claude", "mystery:model", "anthropic:", "openai-compat:localhost:8000#m", "openai-compat:http://x/v1", ""],
)
def test_any_other_spec_is_a_usage_error_listing_the_forms(spec: str) -> None:
    with pytest.raises(UsageError, match=r"use one of anthropic:MODEL, openai:MODEL, .*scripted:FILE"):
        provider_from_spec(spec)


def test_all_is_sorted_and_every_name_resolves() -> None:
    assert providers.__all__ == sorted(providers.__all__, key=lambda n: (not n.isupper(), n))
    for name in providers.__all__:
        assert getattr(providers, name) is not None
    with pytest.raises(AttributeError):
        providers.NoSuchProvider  # noqa: B018


@pytest.mark.slow
def test_importing_the_package_does_not_import_the_sdks() -> None:
    code = "import sys, lamina.providers; print(sorted(m for m in ('anthropic', 'openai') if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO, env={"PYTHONPATH": "src"}
    )
    assert out.stdout.strip() == "[]"
