"""The Claude Agent SDK backend end to end: the SDK's bundled Claude Code CLI against the local wire server.

The CLI honours `ANTHROPIC_BASE_URL`, so every test runs the real SDK and the real CLI (one process
per turn) and reads what reached the server. The CLI's own transcripts go to a per-test config
directory.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from lamina.agent import open_agent
from lamina.errors import (
    AuthenticationError,
    ContextOverflowError,
    MissingExtraError,
    OverloadedError,
    ProviderError,
    ProviderSessionLostError,
    RateLimitError,
    TransientServerError,
    UsageError,
)
from lamina.placement import SdkManagedPrompt, SdkManagedTarget, render
from lamina.providers import (
    ClaudeAgentProvider,
    ProviderSessionChanged,
    ReasoningDelta,
    RetryPolicy,
    TextDelta,
    provider_from_spec,
    stream_with_retry,
)
from lamina.providers._claude_agent import map_claude_agent_error
from lamina.session import LocalSessionStore, ProviderSession, Reasoning
from tests.providers.support import collect, completed, long_workspace, new_engine, streamed_text
from tests.wire.fixtures import API_KEY
from tests.wire.script import Fail, FailKind, Reply, ToolUse
from tests.wire.server import WireServer

sdk = pytest.importorskip("claude_agent_sdk", reason="the optional extra 'claude' (claude-agent-sdk) is not installed")

STALE = "5f0c7c1e-0000-4000-8000-000000000000"


def _cli() -> str | None:
    bundled = Path(sdk.__file__).parent / "_bundled" / "claude"  # the wheel ships the CLI here
    return str(bundled) if bundled.is_file() else shutil.which("claude")


needs_cli = pytest.mark.skipif(
    _cli() is None, reason="the Claude Code CLI is missing (not bundled with claude-agent-sdk, not on PATH)"
)


async def _no_sleep(_: float) -> None:
    return None


def _provider(wire: WireServer, tmp_path: Path, **options: Any) -> ClaudeAgentProvider:
    return ClaudeAgentProvider(
        "claude-sonnet-5",
        api_key=API_KEY,
        base_url=wire.url,
        cwd=options.pop("cwd", tmp_path),
        config_dir=tmp_path / "claude-config",
        **options,
    )


def _user_texts(body: Any) -> list[str]:
    """The text of each user message of a request body (a string or its text blocks joined)."""
    texts = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
        else:
            texts.append("".join(b.get("text", "") for b in content if b.get("type") == "text"))
    return texts


@pytest.mark.slow
@needs_cli
async def test_a_turn_streams_its_text_and_reports_usage(wire: WireServer, tmp_path: Path) -> None:
    wire.api_key = API_KEY
    engine = new_engine(tmp_path)
    wire.script(Reply(text="Hello from the wire."))
    provider = _provider(wire, tmp_path)
    request = render(engine.prepare_turn("hello"), provider.target)
    assert isinstance(request, SdkManagedPrompt)
    events = await collect(provider.stream(request))
    done = completed(events)
    assert streamed_text(events) == done.text == "Hello from the wire."
    assert (done.stop_reason, done.model, done.tool_calls) == ("end_turn", "claude-sonnet-5", ())
    assert done.usage.output > 0 and done.usage.input + done.usage.cache_write > 1024  # the stable parts came along
    [sent] = wire.requests
    assert sent.path.startswith("/v1/messages") and sent.status == 200
    assert sent.headers["x-api-key"] == API_KEY
    assert sent.body["model"] == "claude-sonnet-5" and sent.body["tools"] == []
    assert _user_texts(sent.body) == [request.prompt]  # verbatim: the rendered prompt is the user message
    changed = [e for e in events if isinstance(e, ProviderSessionChanged)]
    assert [c.session for c in changed] == [provider.sessions[request.session_id]]  # reported, to be persisted
    assert provider.sessions[request.session_id].session_id == sent.headers["x-claude-code-session-id"]


@pytest.mark.slow
@needs_cli
async def test_the_next_turn_resumes_the_sdk_session(wire: WireServer, tmp_path: Path) -> None:
    workspace = long_workspace(tmp_path)
    wire.script(Reply(text="First answer."), Reply(text="Second answer."))
    provider = _provider(wire, tmp_path, cwd=workspace)
    agent = open_agent(LocalSessionStore(tmp_path / "store"), provider, workspace=workspace)
    try:
        first = await agent.run_turn("What does this project do?")
        second = await agent.run_turn("And how is it tested?")
    finally:
        agent.engine.session.close()
    assert (first.text, second.text) == ("First answer.", "Second answer.")
    one, two = (r.body for r in wire.requests)
    first_prompt = _user_texts(one)[0]
    assert "<stable_context" in first_prompt and first_prompt.startswith("What does this project do?")
    # the SDK holds the transcript: the second request carries the first exchange, the new prompt without
    # the stable parts the backend has already seen, and it reads the cached prefix
    assert _user_texts(two)[0] == first_prompt
    assert [m["content"] for m in two["messages"] if m["role"] == "assistant"] == [
        [{"type": "text", "text": "First answer."}]
    ]
    assert _user_texts(two)[1].startswith("And how is it tested?") and "<stable_context" not in _user_texts(two)[1]
    assert first.usage.cache_write > 0 and second.usage.cache_read >= first.usage.cache_write
    [session] = provider.sessions.values()
    ids = {r.headers["x-claude-code-session-id"] for r in wire.requests}
    assert ids == {session.session_id} and session.resume_at is not None
    assert agent.engine.provider_sessions.get("claude-agent") == session  # persisted in the log


@pytest.mark.slow
@needs_cli
async def test_a_retried_turn_does_not_repeat_its_prompt(wire: WireServer, tmp_path: Path) -> None:
    wire.script(Reply(text="One."), Fail("overloaded"), Reply(text="Two."))
    provider = _provider(wire, tmp_path)
    await collect(provider.stream(SdkManagedPrompt("first", "s1")))
    retry = RetryPolicy(sleep=_no_sleep)
    events = [e async for e in stream_with_retry(provider, SdkManagedPrompt("second", "s1"), retry)]
    assert completed(events).text == "Two."
    assert [r.status for r in wire.requests] == [200, 529, 200]
    # the CLI wrote "second" to its transcript before the 529; resuming at the last completed turn drops it
    assert _user_texts(wire.requests[2].body) == ["first", "second"]


@pytest.mark.slow
@needs_cli
async def test_a_resume_failure_forgets_the_session_and_says_so(wire: WireServer, tmp_path: Path) -> None:
    wire.script(Reply(text="Fresh start."))
    stale = ProviderSession(provider="claude-agent", session_id=STALE)
    provider = _provider(wire, tmp_path, sessions={"s1": stale})
    with pytest.raises(ProviderSessionLostError) as caught:
        await collect(provider.stream(SdkManagedPrompt("go on", "s1")))
    assert caught.value.session_id == STALE and not caught.value.retryable
    assert "s1" not in provider.sessions and wire.requests == []  # the failed resume never reached the API
    done = completed(await collect(provider.stream(SdkManagedPrompt("go on", "s1", resume=stale, new_session=True))))
    assert done.text == "Fresh start." and provider.sessions["s1"].session_id not in (STALE, "")


@pytest.mark.slow
@needs_cli
async def test_a_fork_continues_natively_and_leaves_the_source_alone(wire: WireServer, tmp_path: Path) -> None:
    wire.script(Reply(text="Base."), Reply(text="Branch."), Reply(text="Trunk."))
    provider = _provider(wire, tmp_path)
    await collect(provider.stream(SdkManagedPrompt("base", "trunk")))
    provider.fork("trunk", "branch")
    await collect(provider.stream(SdkManagedPrompt("on the branch", "branch")))
    await collect(provider.stream(SdkManagedPrompt("on the trunk", "trunk")))
    _, branch, trunk = wire.requests
    assert _user_texts(branch.body) == ["base", "on the branch"]
    assert _user_texts(trunk.body) == ["base", "on the trunk"]
    sessions = provider.sessions
    assert branch.headers["x-claude-code-session-id"] == sessions["branch"].session_id
    assert trunk.headers["x-claude-code-session-id"] == sessions["trunk"].session_id
    assert sessions["branch"].session_id != sessions["trunk"].session_id and not sessions["branch"].fork
    with pytest.raises(UsageError, match="'nowhere' has no Claude Agent SDK session"):
        provider.fork("nowhere", "x")


@pytest.mark.slow
@needs_cli
async def test_a_tool_call_is_answered_inside_the_sdk_and_never_reaches_lamina(
    wire: WireServer, tmp_path: Path
) -> None:
    wire.script(Reply("Let me look.", tool_calls=[ToolUse("Read", {"file_path": "/etc/hostname"})]), Reply("Done."))
    provider = _provider(wire, tmp_path)
    events = await collect(provider.stream(SdkManagedPrompt("read it", "s1")))
    done = completed(events)
    assert (done.text, done.tool_calls) == ("Let me look.\n\nDone.", ())
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Let me look.", "\n\n", "Done."]
    result = wire.requests[1].body["messages"][-2]["content"][0]
    assert result["type"] == "tool_result" and result["is_error"] and "No such tool available" in result["content"]
    billed = [r.usage for r in wire.requests if r.usage is not None]
    usage = done.usage  # the SDK totals the turn's two model calls
    assert usage.input + usage.cache_read + usage.cache_write == sum(u.total for u in billed) and len(billed) == 2


@pytest.mark.slow
@needs_cli
async def test_thinking_is_parsed_for_the_log_and_the_sdk_sends_it_back_signed(
    wire: WireServer, tmp_path: Path
) -> None:
    wire.script(
        Reply("", reasoning="Look at the file first.", tool_calls=[ToolUse("Read", {"file_path": "/etc/hostname"})]),
        Reply("Done.", reasoning="No tool here; answer."),
    )
    provider = _provider(wire, tmp_path)
    events = await collect(provider.stream(SdkManagedPrompt("read it", "s1")))
    done = completed(events)
    signer = wire.anthropic_thinking
    assert done.reasoning == tuple(
        Reasoning(
            provider="anthropic",
            kind="thinking",
            text=text,
            signature=signer.block(text, redacted=False, n=n)["signature"],
        )
        for n, text in ((1, "Look at the file first."), (2, "No tool here; answer."))
    )
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == [
        "Look at the file first.",
        "No tool here; answer.",
    ]
    assert done.text == "Done." and [r.status for r in wire.requests] == [200, 200]  # the SDK's transcript kept it
    sent_back = [b for m in wire.requests[1].body["messages"] if m["role"] == "assistant" for b in m["content"]]
    first = done.reasoning[0]
    assert sent_back[0] == {"type": "thinking", "thinking": first.text, "signature": first.signature}


@needs_cli
@pytest.mark.parametrize(
    ("kind", "error", "status"),
    [
        ("auth", AuthenticationError, 401),
        ("overflow", ContextOverflowError, 400),
        ("rate_limit", RateLimitError, 429),
        ("server", TransientServerError, 500),
    ],
)
@pytest.mark.slow
async def test_api_failures_are_typed(
    wire: WireServer, tmp_path: Path, kind: FailKind, error: type[ProviderError], status: int
) -> None:
    wire.script(Fail(kind))
    provider = _provider(wire, tmp_path)
    with pytest.raises(error) as caught:
        await collect(provider.stream(SdkManagedPrompt("hi", "s1")))
    assert type(caught.value) is error and caught.value.status == status
    assert caught.value.args[0].startswith(f"claude-agent (HTTP {status})")
    assert len(wire.requests) == 1  # the CLI does not retry: Lamina's retry policy decides
    assert "s1" not in provider.sessions


# --- without the CLI -------------------------------------------------------------------------


def test_the_spec_builds_the_provider() -> None:
    provider = provider_from_spec("claude-agent:claude-sonnet-5")
    assert isinstance(provider, ClaudeAgentProvider)
    assert (provider.name, provider.target) == ("claude-agent", SdkManagedTarget())
    assert provider.capabilities.native_resume and provider.capabilities.native_fork
    assert not provider.capabilities.vision  # prompts are text


def test_without_the_extra_the_provider_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "claude_agent_sdk", None)  # import fails as if not installed
    with pytest.raises(MissingExtraError, match=r"needs the 'claude' extra: pip install 'lamina\[claude\]'"):
        provider_from_spec("claude-agent:claude-sonnet-5")


async def test_only_an_sdk_managed_prompt_is_accepted(tmp_path: Path) -> None:
    provider = ClaudeAgentProvider("claude-sonnet-5", cwd=tmp_path)
    with pytest.raises(UsageError, match="needs an SdkManagedPrompt, got dict"):
        await collect(provider.stream({"model": "m", "max_tokens": 1, "messages": []}))


def test_results_and_sdk_exceptions_map_to_provider_errors() -> None:
    def result(**fields: Any) -> Any:
        base: dict[str, Any] = {"subtype": "success", "duration_ms": 1, "duration_api_ms": 1, "is_error": True}
        return sdk.ResultMessage(**{**base, "num_turns": 1, "session_id": "x", **fields})

    overloaded = map_claude_agent_error(result(api_error_status=529, result="API Error: 529 Overloaded."))
    assert isinstance(overloaded, OverloadedError) and overloaded.retryable
    offline = map_claude_agent_error(result(result="API Error: Connection refused"), assistant_error="server_error")
    assert isinstance(offline, TransientServerError) and offline.status is None
    no_key = map_claude_agent_error(result(result="Not logged in"), assistant_error="authentication_failed")
    assert isinstance(no_key, AuthenticationError) and "ANTHROPIC_API_KEY" in str(no_key)
    turns = map_claude_agent_error(result(subtype="error_max_turns", errors=["Reached maximum number of turns (1)"]))
    assert type(turns) is ProviderError and "maximum number of turns" in str(turns)
    crash = map_claude_agent_error(sdk.ProcessError("boom", exit_code=2, stderr="segfault"))
    assert type(crash) is ProviderError and "exit code 2" in str(crash) and crash.body == "segfault"
    assert map_claude_agent_error(ValueError("not ours")) is None
