"""An agent on an in-memory store whose retries do not wait: for tests that drive a turn through a server."""

from __future__ import annotations

import time
from pathlib import Path

from lamina.agent import Agent, AgentOptions, open_agent
from lamina.providers import Provider, RetryPolicy
from tests.support.engine import memory_store


async def no_sleep(_: float) -> None:
    """A retry policy's sleep that returns at once."""
    return None


def quick_agent(tmp_path: Path, workspace: Path, provider: Provider) -> Agent:
    """An agent over `workspace` on the test folder's in-memory store; retries do not wait."""
    return open_agent(
        memory_store(tmp_path, time.time),
        provider,
        workspace=workspace,
        options=AgentOptions(retry=RetryPolicy(sleep=no_sleep)),
    )
