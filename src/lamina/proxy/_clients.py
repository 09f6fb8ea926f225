"""The line each agent client needs to send its requests through the proxy (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal, TypeAlias

Client: TypeAlias = Literal["claude", "codex", "pi", "aider", "opencode"]

CLIENTS: Final[tuple[Client, ...]] = ("claude", "codex", "pi", "aider", "opencode")
"""The clients `lamina proxy --print-env` knows, in the order the docs show them."""

_LINES: Final[Mapping[Client, str]] = {
    "claude": "export ANTHROPIC_BASE_URL={url}",
    # Codex takes a provider from its config; `-c` gives it one for the run (the benchmarks' own set-up)
    "codex": (
        'codex -c model_provider=lamina -c \'model_providers.lamina={{name="lamina",base_url="{url}/v1",'
        'wire_api="responses",env_key="OPENAI_API_KEY"}}\''
    ),
    # pi reads its providers' base URLs from ~/.pi/agent/models.json (this line replaces that file)
    "pi": (
        'mkdir -p ~/.pi/agent && echo \'{{"providers": {{"anthropic": {{"baseUrl": "{url}"}}, '
        '"openai": {{"baseUrl": "{url}/v1"}}}}}}\' > ~/.pi/agent/models.json'
    ),
    # aider's requests go through litellm, which reads these two
    "aider": "export ANTHROPIC_BASE_URL={url} OPENAI_API_BASE={url}/v1",
    # opencode's providers take `options.baseURL` (with /v1) from its config, here given inline
    "opencode": (
        'export OPENCODE_CONFIG_CONTENT=\'{{"provider": {{"anthropic": {{"options": {{"baseURL": '
        '"{url}/v1"}}}}, "openai": {{"options": {{"baseURL": "{url}/v1"}}}}}}}}\''
    ),
}


def client_env(client: Client, url: str) -> str:
    """The shell line that points `client` at the proxy listening at `url` (`http://127.0.0.1:PORT`)."""
    return _LINES[client].format(url=url.rstrip("/"))
