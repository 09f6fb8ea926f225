"""The inspector's request page: the model's thinking folded (`<details>`), escaped, and counted in the composition."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from starlette.testclient import TestClient

from lamina.agent import AgentOptions, open_agent
from lamina.cachesim import AnthropicCacheSimulator
from lamina.placement import AnthropicTarget
from lamina.pricing import cost_of
from lamina.providers import ScriptedProvider, ScriptedResponse, ScriptedToolCall
from lamina.serve import create_app
from lamina.serve._layers import _reasoning_of
from lamina.session import LocalSessionStore, Reasoning

THOUGHT = "Read app.py before <script>alert('x')</script> answering. THOUGHT-END"
REDACTED = Reasoning(provider="anthropic", kind="redacted_thinking", data="opaque-data")


@pytest.fixture(scope="module")
def thinking_session(tmp_path_factory: pytest.TempPathFactory) -> tuple[TestClient, str]:
    root = tmp_path_factory.mktemp("thinking")
    workspace = root / "ws"
    workspace.mkdir()
    (workspace / "app.py").write_text("def total(xs):\n    return sum(xs)\n")
    store = LocalSessionStore(root / "store")
    read = ScriptedToolCall(name="Read", input={"path": "app.py"})
    provider = ScriptedProvider(
        [
            ScriptedResponse(reasoning=THOUGHT, text="Reading.", tool_calls=(read,)),
            ScriptedResponse(reasoning=(REDACTED,), text="It sums."),
            ScriptedResponse(text="Yes."),
        ],
        target=AnthropicTarget(model="claude-sonnet-5"),
        simulator=AnthropicCacheSimulator(),
    )

    async def run() -> str:
        async with open_agent(store, provider, workspace=workspace, options=AgentOptions(mode="explore")) as agent:
            await agent.run_turn("What does total do?")
            await agent.run_turn("Sure?")
            return agent.engine.session.id

    session_id = asyncio.run(run())
    return TestClient(create_app(store, prices=cost_of), base_url="http://127.0.0.1:8765"), session_id


def _details(html: str, kind: str) -> list[str]:
    return re.findall(rf'<details class="thinking" data-reasoning="{kind}">.*?</details>', html, re.DOTALL)


def test_thinking_in_the_tool_loop_is_folded_escaped_and_counted(thinking_session: tuple[TestClient, str]) -> None:
    client, session_id = thinking_session
    page = client.get(f"/sessions/{session_id}/requests/1")  # the call after the Read: the loop's thinking goes back
    assert page.status_code == 200
    (folded,) = _details(page.text, "thinking")
    assert '<details class="thinking" data-reasoning="thinking" open' not in page.text  # folded until opened
    assert "∴ thinking" in folded and "characters signed, sent back unchanged" in folded
    assert "&lt;script&gt;alert(" in folded and "THOUGHT-END" in folded and "<script>alert" not in page.text
    assert re.search(r'<tr data-kind="reasoning"><td>reasoning</td><td class="path">model reasoning</td>', page.text)
    data: Any = client.get(f"/api/sessions/{session_id}/requests/1").json()
    parts = [p for layer in data["layers"] for p in layer["parts"] if p["reasoning"]]
    assert [(p["reasoning"], p["text"], p["role"]) for p in parts] == [("thinking", THOUGHT, "assistant")]
    assert parts[0]["sealed"] > 0 and parts[0]["tokens"] > 0
    assert {c["kind"]: c["tokens"] for c in data["composition"]}["reasoning"] > 0


def test_redacted_thinking_is_folded_with_nothing_to_read(thinking_session: tuple[TestClient, str]) -> None:
    client, session_id = thinking_session
    page = client.get(f"/sessions/{session_id}/requests/2").text  # the next turn: both calls' reasoning in history
    (redacted,) = _details(page, "redacted_thinking")
    assert "nothing to read" in redacted and "redacted by the provider" in redacted
    assert "11 characters encrypted" in redacted and "opaque-data" not in page
    assert len(_details(page, "thinking")) == 1


def test_every_wire_form_of_reasoning_is_recognised() -> None:
    item = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Plan."}],
        "encrypted_content": "abc",
    }
    assert _reasoning_of(item) == ("reasoning", "Plan.", 3)
    assert _reasoning_of({"tool_calls": [], "reasoning_content": "Think."}) == ("reasoning_content", "Think.", 0)
    assert _reasoning_of({"reasoning": "vLLM's field."}) == ("reasoning_content", "vLLM's field.", 0)
    assert _reasoning_of({"type": "text", "text": "hi"}) is None and _reasoning_of("text") is None
