"""The wire server's models endpoints: Anthropic's `GET /v1/models[/{id}]` and OpenAI's `GET /v1/models[/{id}]`.

Shapes from the SDKs' types: Anthropic's `BetaModelInfo` (`anthropic/types/beta/beta_model_info.py`; every
capability key present, as the API promises), its list page (`data`, `first_id`, `last_id`, `has_more`), and
OpenAI's `Model` (`openai/types/model.py`) in an `object: "list"` page. OpenAI's own entries carry no window;
a compatible server's may carry `meta.n_ctx` (llama.cpp), `max_model_len` (vLLM) or `context_length`. The
Anthropic SDK sends `anthropic-version` on every request, which tells the two APIs' `/v1/models` apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.wire import anthropic_api, openai_api
from tests.wire.script import WireResponse, json_response

_EDITS = ("clear_tool_uses_20250919", "clear_thinking_20251015", "compact_20260112")


def _support(on: bool) -> dict[str, bool]:
    return {"supported": on}


def anthropic_model(
    model_id: str,
    *,
    max_input_tokens: int | None = 200_000,
    max_tokens: int | None = 64_000,
    thinking: bool = True,
    edits: Iterable[str] = _EDITS,
    summarize: bool = False,
    images: bool = True,
) -> dict[str, Any]:
    """A `BetaModelInfo` as the API sends it: `edits` are the context-management strategies it supports."""
    edits = set(edits)
    return {
        "type": "model",
        "id": model_id,
        "display_name": model_id.replace("-", " ").title(),
        "created_at": "2026-01-01T00:00:00Z",
        "lifecycle": "active",
        "deprecated_at": None,
        "retires_at": None,
        "line": None,
        "max_input_tokens": max_input_tokens,
        "max_tokens": max_tokens,
        "capabilities": {
            "batch": _support(True),
            "citations": _support(True),
            "code_execution": _support(True),
            "context_management": {"supported": bool(edits), **{edit: _support(edit in edits) for edit in _EDITS}},
            "compaction": {"supported": summarize, "summarize": _support(summarize)},
            "effort": {"supported": thinking, **{level: _support(thinking) for level in ("low", "medium", "high")}}
            | {"max": _support(thinking), "xhigh": _support(False)},
            "image_input": _support(images),
            "pdf_input": _support(images),
            "server_tools": {"supported": True, "code_execution": _support(True), "web_search": _support(True)},
            "structured_outputs": _support(True),
            "thinking": {
                "supported": thinking,
                "types": {
                    "adaptive": _support(thinking),
                    "enabled": _support(thinking),
                    "disabled": _support(True),
                    "between_tools": _support(False),
                },
            },
        },
    }


def openai_model(model_id: str, **extra: Any) -> dict[str, Any]:
    """An OpenAI `Model`; `extra` adds a compatible server's own fields (`max_model_len=32768`, `meta={...}`)."""
    return {"id": model_id, "object": "model", "created": 1_760_000_000, "owned_by": "wire", **extra}


@dataclass
class WireModels:
    """What the wire server's models endpoints list (nothing by default: every lookup is a 404)."""

    anthropic: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Anthropic models by id (`anthropic_model(...)`)."""
    openai: list[dict[str, Any]] = field(default_factory=list)
    """OpenAI models, in list order (`openai_model(...)`)."""
    delay: float = 0.0
    """Seconds each models request waits before its answer (a slow or unreachable endpoint)."""
    lookups: list[str] = field(default_factory=list)
    """The paths of the models requests received, in order (kept apart from `WireServer.requests`)."""

    def answer(self, path: str, headers: Mapping[str, str], *, keyed: bool = True) -> WireResponse:
        """The answer to one `GET /v1/models[/{id}]` (`keyed` False: the key is missing or wrong, a 401)."""
        self.lookups.append(path)
        route, _, _query = path.partition("?")
        model_id = route.removeprefix("/v1/models").strip("/")
        anthropic = "anthropic-version" in headers
        if not keyed:
            if anthropic:
                return anthropic_api.error(401, "authentication_error", "invalid x-api-key", len(self.lookups))
            return openai_api.error(401, "invalid_request_error", "Incorrect API key provided", code="invalid_api_key")
        if anthropic:
            if not model_id:
                models = list(self.anthropic.values())
                first, last = (models[0]["id"], models[-1]["id"]) if models else (None, None)
                return json_response(200, {"data": models, "first_id": first, "last_id": last, "has_more": False})
            found = self.anthropic.get(model_id)
            if found is None:
                return anthropic_api.error(404, "not_found_error", f"model: {model_id}", len(self.lookups))
            return json_response(200, found)
        if not model_id:
            return json_response(200, {"object": "list", "data": self.openai})
        chosen = next((entry for entry in self.openai if entry["id"] == model_id), None)
        if chosen is None:
            message = f"The model `{model_id}` does not exist or you do not have access to it."
            return openai_api.error(404, "invalid_request_error", message, code="model_not_found")
        return json_response(200, chosen)
