"""OpenAI's cache regime of GPT-5.6 and later through the official SDK against the wire server.

Breakpoints and cache options as placement sends them, the billed writes as the adapters read them,
the TTL the cost model chose on the wire, and the API's refusals of what it does not take.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

from lamina.agent import AgentOptions, open_agent
from lamina.engine import ContextEngine
from lamina.placement import render
from lamina.pricing import CachePrices
from lamina.providers import Capabilities, Provider, RetryPolicy
from lamina.session import CostDecision, TurnRecord
from tests.providers.support import collect, completed, long_workspace, new_engine, record_reply
from tests.support.engine import TOOLS, Clock, memory_store, workspace_source
from tests.wire.fixtures import API_KEY, openai_chat_provider, openai_responses_provider
from tests.wire.script import Reply
from tests.wire.server import WireServer

BREAKPOINTS = Capabilities(cache_regime="openai-breakpoints")
_MARK_30M = {"mode": "explicit", "ttl": "30m"}


def _engine(tmp_path: Path, provider: Provider) -> ContextEngine:
    """An engine whose cost model decides with `provider`'s cache prices, as an agent's does."""
    clock = Clock()
    session = memory_store(tmp_path, clock).create(cwd=str(tmp_path))
    prices = CachePrices.for_target(provider.target)
    source = workspace_source(long_workspace(tmp_path))
    return ContextEngine(session, stable_source=source, tools=TOOLS, clock=clock, prices=lambda: prices)


def _marked(items: list[Any]) -> list[int]:
    """The indexes of the items (or messages) whose content carries a breakpoint."""
    return [
        i
        for i, item in enumerate(items)
        if isinstance(item.get("content"), list) and any("prompt_cache_breakpoint" in p for p in item["content"])
    ]


async def test_responses_sends_breakpoints_and_reads_the_billed_writes(wire: WireServer, tmp_path: Path) -> None:
    async with openai_responses_provider(wire, "gpt-5.6", capabilities=BREAKPOINTS) as provider:
        assert CachePrices.for_target(provider.target) == CachePrices.openai_breakpoints()
        engine = _engine(tmp_path, provider)
        dones = []
        for n in range(2):
            wire.script(Reply(text=f"answer {n}"))
            body: Any = render(engine.prepare_turn(f"question {n}"), provider.target)
            done = completed(await collect(provider.stream(body)))
            record_reply(engine, done)
            dones.append(done)
    first, second = (r.body for r in wire.requests)
    assert first["prompt_cache_options"] == {"mode": "implicit", "ttl": "30m"}
    assert first["prompt_cache_key"] == engine.session.id and "prompt_cache_retention" not in first
    assert _marked(first["input"]) == [0, 2]  # the stable context, the end of the turn's message (its tail)
    assert first["input"][2]["content"][-1]["prompt_cache_breakpoint"] == _MARK_30M
    assert _marked(second["input"]) == [0, len(second["input"]) - 1]  # the earlier turn's mark is gone
    for done, received in zip(dones, wire.requests, strict=True):
        usage = received.usage
        assert usage is not None
        assert (done.usage.cache_read, done.usage.cache_write, done.usage.input) == (
            usage.read,
            usage.write,
            usage.uncached,
        )
    assert dones[0].usage.cache_write > 1024 and dones[0].usage.cache_read == 0
    assert dones[1].usage.cache_read >= dones[0].usage.cache_write  # the whole first request is read back


async def test_chat_marks_the_stable_prefix_and_the_turn_with_30_minutes(wire: WireServer, tmp_path: Path) -> None:
    async with openai_chat_provider(wire, "gpt-5.6", capabilities=BREAKPOINTS) as provider:
        engine = _engine(tmp_path, provider)
        assert not CachePrices.for_target(provider.target).choose_ttl  # Chat Completions: 30 minutes only
        for n in range(2):
            wire.script(Reply(text=f"answer {n}"))
            body: Any = render(engine.prepare_turn(f"question {n}"), provider.target)
            done = completed(await collect(provider.stream(body)))
            record_reply(engine, done)
    sent = wire.requests[-1].body
    assert sent["prompt_cache_options"] == {"mode": "implicit", "ttl": "30m"}
    assert _marked(sent["messages"]) == [1, len(sent["messages"]) - 1]  # the context message, the turn's
    assert all(
        p["prompt_cache_breakpoint"] == {"mode": "explicit"}
        for m in sent["messages"]
        for p in (m["content"] if isinstance(m["content"], list) else ())
        if "prompt_cache_breakpoint" in p
    )
    assert done.usage.cache_read > 1024 and done.usage.cache_write > 0


async def test_an_older_model_keeps_the_automatic_regime(wire: WireServer, tmp_path: Path) -> None:
    engine = new_engine(tmp_path)
    wire.script(Reply(text="ok"))
    async with openai_responses_provider(wire, "gpt-5") as provider:
        body: Any = render(engine.prepare_turn("hello"), provider.target)
        done = completed(await collect(provider.stream(body)))
    sent = wire.requests[0].body
    assert "prompt_cache_options" not in sent and not _marked(sent["input"])
    assert done.usage.cache_write == 0


async def test_a_12_hour_turn_breakpoint_asks_for_24_hour_retention_and_is_billed_as_such(
    wire: WireServer, tmp_path: Path
) -> None:
    engine = new_engine(tmp_path)
    wire.script(Reply(text="ok"))
    async with openai_responses_provider(wire, "gpt-5.6", capabilities=BREAKPOINTS) as provider:
        target = provider.target.__class__(**{**_fields(provider.target), "openai_cache_ttl": "12h"})
        body: Any = render(engine.prepare_turn("hello"), target)
        await collect(provider.stream(body))
    sent, usage = wire.requests[0].body, wire.requests[0].usage
    assert sent["prompt_cache_retention"] == "24h"
    assert sent["input"][0]["content"][-1]["prompt_cache_breakpoint"] == {"mode": "explicit", "ttl": "12h"}
    assert usage is not None and usage.write_12h > 1024 and usage.write_30m == 0


def _fields(target: Any) -> dict[str, Any]:
    return {name: getattr(target, name) for name in target.__dataclass_fields__}


def _client(wire: WireServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key=API_KEY, base_url=wire.openai_url, max_retries=0)


_LONG = "stable rules " * 600


async def test_the_usage_fields_of_the_sdk_types(wire: WireServer) -> None:
    wire.script(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    async with _client(wire) as client:
        content: Any = [{"type": "input_text", "text": _LONG, "prompt_cache_breakpoint": {"mode": "explicit"}}]
        item: Any = {"role": "user", "content": content}
        options: Any = {"ttl": "12h"}
        made = await client.responses.create(model="gpt-5.6", input=[item], prompt_cache_options=options)
        assert made.usage is not None
        details = made.usage.input_tokens_details
        assert details.cache_write_tokens == made.usage.input_tokens and details.cached_tokens == 0
        assert details.cache_write_tokens_details is not None
        assert details.cache_write_tokens_details.ttl_12h_tokens == made.usage.input_tokens
        again = await client.responses.create(model="gpt-5.6", input=[item])
        assert again.usage is not None and again.usage.input_tokens_details.cached_tokens == made.usage.input_tokens
        chat_content: Any = [{"type": "text", "text": _LONG, "prompt_cache_breakpoint": {"mode": "explicit"}}]
        chat = await client.chat.completions.create(
            model="gpt-5.6", messages=[{"role": "user", "content": chat_content}]
        )
        assert chat.usage is not None and chat.usage.prompt_tokens_details is not None
        assert chat.usage.prompt_tokens_details.cache_write_tokens == chat.usage.prompt_tokens


async def test_prewarm_prepares_the_cache_and_generates_nothing(wire: WireServer) -> None:
    wire.script(Reply(text="never said"), Reply(text="said"))
    async with _client(wire) as client:
        item: Any = {"role": "user", "content": _LONG}
        options: Any = {"prewarm": True}
        warm = await client.responses.create(model="gpt-5.6", input=[item], prompt_cache_options=options)
        assert warm.output == [] and warm.usage is not None and warm.usage.output_tokens == 0
        assert warm.usage.input_tokens_details.cache_write_tokens == warm.usage.input_tokens
        answered = await client.responses.create(model="gpt-5.6", input=[item])
        assert answered.output_text == "said" and answered.usage is not None
        assert answered.usage.input_tokens_details.cached_tokens == warm.usage.input_tokens


@pytest.mark.parametrize(
    ("api", "model", "extra", "message", "param"),
    [
        (
            "chat",
            "gpt-5.6",
            {"prompt_cache_options": {"ttl": "12h"}},
            "Invalid value: '12h'. Supported values are: '30m'.",
            "prompt_cache_options.ttl",
        ),
        (
            "responses",
            "gpt-5.6",
            {"prompt_cache_options": {"ttl": "1h"}},
            "Invalid value: '1h'. Supported values are: '30m', '12h'.",
            "prompt_cache_options.ttl",
        ),
        (
            "responses",
            "gpt-5.6",
            {"prompt_cache_retention": "in_memory"},
            "Invalid value: 'in_memory'. Supported values are: '24h'.",
            "prompt_cache_retention",
        ),
        (
            "chat",
            "gpt-5.6",
            {"prompt_cache_options": {"prewarm": True}},
            "Unknown parameter: 'prompt_cache_options.prewarm'.",
            "prompt_cache_options.prewarm",
        ),
        (
            "responses",
            "gpt-5",
            {"prompt_cache_options": {"ttl": "30m"}},
            "Unsupported parameter: 'prompt_cache_options' is not supported with this model.",
            "prompt_cache_options",
        ),
    ],
)
async def test_the_api_refuses_what_it_does_not_take(
    wire: WireServer, api: str, model: str, extra: dict[str, Any], message: str, param: str
) -> None:
    async with _client(wire) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            if api == "chat":
                await client.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": "hi"}], extra_body=extra
                )
            else:
                await client.responses.create(model=model, input="hi", extra_body=extra)
    body: Any = caught.value.body
    assert (body["message"], body["param"]) == (message, param)
    assert wire.requests[0].status == 400 and wire.pending == 0


@pytest.mark.slow
async def test_the_agent_chooses_the_12_hour_ttl_for_a_session_with_long_gaps(tmp_path: Path) -> None:
    clock = Clock()
    with WireServer(clock=clock) as wire:
        async with openai_responses_provider(wire, "gpt-5.6", capabilities=BREAKPOINTS) as provider:
            store = memory_store(tmp_path, clock)
            options = AgentOptions(retry=RetryPolicy(), clock=clock, mode="execute")
            agent = open_agent(store, provider, workspace=long_workspace(tmp_path), options=options)
            assert agent.engine.compactor.cache_prices == CachePrices.openai_breakpoints()
            for n in range(6):
                wire.script(Reply(text=f"Answer {n}: " + "detail " * 200))
                await agent.run_turn(f"Question {n}: " + "context " * 300)
                clock.advance(90)  # an hour and a half: past 30 minutes, inside 12 hours
            records = [e for e in agent.session.entries() if isinstance(e, TurnRecord)]
            decisions = [e.decision for e in records if isinstance(e.decision, CostDecision)]
            assert decisions and decisions[-1].action == "ttl_12h"
            last = wire.requests[-1]
            assert last.body["prompt_cache_retention"] == "24h"
            assert last.usage is not None and last.usage.read > 1024  # the 12-hour turn breakpoint held after 90 min
            agent.close()
