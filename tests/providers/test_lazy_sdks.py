"""The SDKs load on a provider's first request, not when `lamina.providers` is imported or a provider built.

In a fresh process (this one has them all loaded): import, build each SDK-backed provider, check that
no SDK was imported, then send one request through each to the wire server.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.wire.fixtures import API_KEY
from tests.wire.script import Reply
from tests.wire.server import WireServer

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SDKS = ("anthropic", "openai", "httpx", "claude_agent_sdk", "mcp")
CODE = """
import asyncio, json, sys
from lamina.providers import AnthropicProvider, OpenAIChatProvider, OpenAIResponsesProvider, provider_from_spec

url, openai_url, key = sys.argv[1:4]
sdks = {sdks!r}
providers = [
    AnthropicProvider("claude-sonnet-5", api_key=key, base_url=url),
    OpenAIChatProvider("gpt-5", api_key=key, base_url=openai_url),
    OpenAIResponsesProvider("gpt-5", api_key=key, base_url=openai_url),
    provider_from_spec("openai-compat:" + openai_url + "#local-model"),
]
try:
    provider_from_spec("claude-agent:claude-sonnet-5")
except Exception as exc:  # the extra may be missing: then it says so, and still imports nothing
    assert type(exc).__name__ == "MissingExtraError", exc
built = sorted(m for m in sdks if m in sys.modules)
hello = [{{"role": "user", "content": "hello"}}]
bodies = [
    {{"model": "claude-sonnet-5", "max_tokens": 64, "messages": hello}},
    {{"model": "gpt-5", "messages": hello}},
    {{"model": "gpt-5", "input": hello}},
]


async def first_requests():
    texts = []
    for provider, body in zip(providers, bodies):
        events = [event async for event in provider.stream(body)]
        texts.append(events[-1].text)
        await provider.aclose()
    return texts


texts = asyncio.run(first_requests())
used = sorted(m for m in ("anthropic", "openai") if m in sys.modules)
print(json.dumps({{"built": built, "texts": texts, "used": used}}))
"""


def test_building_providers_imports_no_sdk_and_the_first_request_does(wire: WireServer) -> None:
    wire.script(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    code = CODE.format(sdks=SDKS)
    done = subprocess.run(
        [sys.executable, "-c", code, wire.url, wire.openai_url, API_KEY],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["built"] == []
    assert shown["texts"] == ["one", "two", "three"]
    assert shown["used"] == ["anthropic", "openai"]
