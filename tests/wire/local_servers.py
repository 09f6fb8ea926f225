"""Local servers' recorded shapes, played by the wire server: llama.cpp, llama-cpp-python, vLLM, Ollama, LM Studio.

Set `WireServer.local` (`play(wire, "llama.cpp", n_ctx=1024)`) and the server answers as that server does:
its `/v1/models` entry, its own window endpoint (llama.cpp's `GET /props`, Ollama's `POST /api/show`,
LM Studio's `GET /api/v0/models/{id}`), its chat stream's chunks (who sends the role, `null` content, usage,
`timings`, tool calls whole or in pieces, `stop` after tool calls) and its quirks:

- llama-cpp-python with the model's own template: a message whose content is a list makes the template raise
  (`can only concatenate str (not "list") to str`) and the server answers 200 with a stream of no events;
- a prompt over the window: llama.cpp's 400 `exceed_context_size_error` with `n_ctx` and `n_prompt_tokens`,
  vLLM's and llama-cpp-python's OpenAI wording (`maximum context length is N tokens`), Ollama's silent
  truncation (the prompt is cut to the window, no error);
- no `max_tokens`: the model writes until the context ends (`finish_reason: "length"`).

The shapes are those of llama.cpp's `tools/server` and llama-cpp-python's `llama_cpp/server` as shipped in
llama-cpp-python 0.3.36's source distribution, of vLLM's `entrypoints/openai` and of Ollama's `openai`
middleware; the llama.cpp stream was read from a `llama-server` built from that source (docs/testing.md).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from tests.wire.models_api import openai_model
from tests.wire.script import Reply, WireResponse, arguments_json, json_response, pieces, sse_response, stop_reason

Kind: TypeAlias = Literal["llama.cpp", "llama-cpp-python", "vllm", "ollama", "lm-studio"]
KINDS: tuple[Kind, ...] = ("llama.cpp", "llama-cpp-python", "vllm", "ollama", "lm-studio")

_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length", "refusal": "stop"}
_TEMPLATE_ERROR = 'can only concatenate str (not "list") to str'
"""What llama-cpp-python's Jinja chat template raises on a list content (in the server's log, not the stream)."""
_RUNAWAY = "The model goes on writing " * 8
"""What a small model with no output cap writes until the server's context ends."""


@dataclass
class LocalServer:
    """Which local server the wire server plays (None: the hosted APIs only) and its launch settings."""

    kind: Kind | None = None
    n_ctx: int = 8192
    """The window the server was started with (`--ctx-size`, `--max-model-len`, `num_ctx`, ...)."""
    n_ctx_train: int = 8192
    """The model's trained context (what Ollama's `/api/show` reports as `*.context_length`)."""
    model: str = "smollm2"
    num_ctx_set: bool = True
    """Ollama: the model's `parameters` name `num_ctx` (else Ollama serves its default 4,096)."""
    list_content_fails: bool | None = None
    """The chat template fails on list content (None: as the kind does, llama-cpp-python's default template)."""
    template_failures: int = 0
    """How many empty streams the server sent for a failed template (read by the tests)."""
    empty_streams: int = 0
    """The next this many chat requests get a 200 with no events, whatever they hold (a server failing)."""
    meta_n_ctx: bool = True
    """llama.cpp: `/v1/models` reports the slot's `n_ctx` in `meta` (older builds report `n_ctx_train` only)."""

    def models(self) -> list[dict[str, Any]]:
        """The server's `/v1/models` entries."""
        match self.kind:
            case "llama.cpp":
                meta: dict[str, Any] = {"vocab_type": 2, "n_vocab": 49152, "n_ctx_train": self.n_ctx_train}
                if self.meta_n_ctx:
                    meta["n_ctx"] = self.n_ctx
                meta |= {"n_embd": 576, "n_params": 134515008, "size": 98283520, "ftype": "Q4_1"}
                return [
                    openai_model(self.model, aliases=[], tags=[], owned_by="llamacpp", meta=meta),
                ]
            case "llama-cpp-python":
                return [{"id": self.model, "object": "model", "owned_by": "me", "permissions": []}]
            case "vllm":
                return [
                    openai_model(self.model, owned_by="vllm", root=self.model, parent=None, max_model_len=self.n_ctx)
                ]
            case "ollama":
                return [{"id": self.model, "object": "model", "created": 1_760_000_000, "owned_by": "library"}]
            case "lm-studio":
                return [{"id": self.model, "object": "model", "owned_by": "organization_owner"}]
            case _:
                return []

    def get(self, path: str) -> WireResponse | None:
        """A GET the server answers beside `/v1/models` (None: a 404)."""
        route = path.split("?", 1)[0]
        if self.kind == "llama.cpp" and route == "/props":
            generation = {"n_ctx": self.n_ctx, "params": {"n_predict": -1, "temperature": 0.8}}
            return json_response(
                200,
                {
                    "default_generation_settings": generation,
                    "total_slots": 1,
                    "model_alias": self.model,
                    "model_path": f"/models/{self.model}.gguf",
                    "modalities": {"vision": False, "audio": False},
                    "build_info": "b1-0c1e570",
                },
            )
        if self.kind == "lm-studio" and route == f"/api/v0/models/{self.model}":
            return json_response(
                200,
                {
                    "id": self.model,
                    "object": "model",
                    "type": "llm",
                    "publisher": "lmstudio-community",
                    "arch": "llama",
                    "compatibility_type": "gguf",
                    "quantization": "Q4_1",
                    "state": "loaded",
                    "max_context_length": self.n_ctx_train,
                    "loaded_context_length": self.n_ctx,
                },
            )
        return None

    def post(self, path: str, body: Any) -> WireResponse | None:
        """A POST outside the chat endpoint (Ollama's `/api/show`); None: not this server's."""
        if self.kind != "ollama" or path.split("?", 1)[0] != "/api/show":
            return None
        if not isinstance(body, Mapping) or body.get("model") != self.model:
            return json_response(
                404, {"error": f"model '{body.get('model') if isinstance(body, Mapping) else ''}' not found"}
            )
        parameters = f"num_ctx                        {self.n_ctx}\n" if self.num_ctx_set else ""
        parameters += 'stop                           "<|im_end|>"'
        return json_response(
            200,
            {
                "license": "Apache 2.0",
                "modelfile": f"FROM /models/{self.model}.gguf",
                "parameters": parameters,
                "template": "{{ .Prompt }}",
                "details": {
                    "format": "gguf",
                    "family": "llama",
                    "parameter_size": "134.52M",
                    "quantization_level": "Q4_1",
                },
                "model_info": {
                    "general.architecture": "llama",
                    "general.parameter_count": 134515008,
                    "llama.context_length": self.n_ctx_train,
                    "llama.embedding_length": 576,
                },
                "capabilities": ["completion", "tools"],
            },
        )

    def refuse(self, body: Mapping[str, Any], prompt_tokens: int) -> WireResponse | None:
        """The server's answer to a chat request before the script is used (its quirks); None: the script answers."""
        fails = self.list_content_fails if self.list_content_fails is not None else self.kind == "llama-cpp-python"
        messages = body.get("messages") or []
        listed = any(isinstance(m, Mapping) and isinstance(m.get("content"), list) for m in messages)
        if (fails and listed) or self.empty_streams:
            self.template_failures += 1 if fails and listed else 0  # the server logs `_TEMPLATE_ERROR`
            self.empty_streams = max(0, self.empty_streams - 1)
            return WireResponse(200, b"", "text/event-stream", {"cache-control": "no-cache"})
        if prompt_tokens <= self.n_ctx or self.kind == "ollama":  # Ollama cuts the prompt to the window
            return None
        if self.kind == "llama.cpp":
            error = {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": prompt_tokens,
                "n_ctx": self.n_ctx,
            }
            return json_response(400, {"error": error})
        asked = prompt_tokens + int(body.get("max_tokens") or 0)
        message = (
            f"This model's maximum context length is {self.n_ctx} tokens. However, you requested {asked} tokens "
            f"({prompt_tokens} in the messages, {body.get('max_tokens')} in the completion). Please reduce the "
            "length of the messages or completion."
        )
        if self.kind == "vllm":
            return json_response(
                400, {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": 400}
            )
        error = {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
        return json_response(400, {"error": error})

    def chat(self, body: Mapping[str, Any], step: Reply, n: int, prompt_tokens: int, cached: int) -> WireResponse:
        """A scripted reply as this server streams it (stream requests only; a JSON answer otherwise)."""
        uncapped = body.get("max_tokens") is None and body.get("max_completion_tokens") is None
        if uncapped:  # a small model with no cap writes until the server's context is full
            step = Reply(text=_RUNAWAY, stop_reason="max_tokens", model=step.model)
        calls = [(call.id or f"call_{self._id(n, i)}", call) for i, call in enumerate(step.tool_calls)]
        finish = _FINISH[stop_reason(step)]
        output = max(1, len(step.text) // 4) if not uncapped else max(1, self.n_ctx - prompt_tokens)
        usage: dict[str, Any] = {
            "prompt_tokens": min(prompt_tokens, self.n_ctx),
            "completion_tokens": output,
            "total_tokens": min(prompt_tokens, self.n_ctx) + output,
        }
        if self.kind == "llama.cpp":
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        model = step.model or str(body.get("model", ""))
        frames: list[tuple[str | None, object]] = []
        chunk = _Chunks(self.kind, model, n, usage_key=self._usage_key(body))
        frames.append((None, chunk.make({"role": "assistant", "content": None if self.kind == "llama.cpp" else ""})))
        frames += [(None, chunk.make({"content": p})) for p in pieces(step.text)]
        for index, (cid, call) in enumerate(calls):
            whole = self.kind in ("ollama", "llama-cpp-python")  # the whole call in one delta
            head = {"index": index, "id": cid, "type": "function"}
            arguments = arguments_json(call)
            head["function"] = {"name": call.name, "arguments": arguments if whole else ""}
            frames.append((None, chunk.make({"tool_calls": [head]})))
            for piece in () if whole else pieces(arguments, 2):
                frames.append((None, chunk.make({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})))
        if calls and self.kind == "llama-cpp-python":
            finish = "stop"  # it says stop after a call
        frames.append((None, chunk.make({}, finish)))
        if self.kind != "llama-cpp-python" and self._usage_key(body):  # llama-cpp-python sends no usage
            extra = (
                {"timings": {"prompt_n": prompt_tokens - cached, "cache_n": cached}} if self.kind == "llama.cpp" else {}
            )
            frames.append((None, {**chunk.make(None), "usage": usage, **extra}))
        frames.append((None, "[DONE]"))
        return sse_response(frames)

    def _usage_key(self, body: Mapping[str, Any]) -> bool:
        options = body.get("stream_options")
        return isinstance(options, Mapping) and bool(options.get("include_usage"))

    def _id(self, n: int, i: int) -> str:
        return f"{'chatcmpl-tool-' if self.kind == 'vllm' else ''}{n:04d}{i}local"


@dataclass
class _Chunks:
    kind: Kind | None
    model: str
    n: int
    usage_key: bool

    def make(self, delta: Mapping[str, Any] | None, finish: str | None = None) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
        if self.kind in ("vllm", "llama-cpp-python"):
            choice["logprobs"] = None
        chunk: dict[str, Any] = {
            "id": f"chatcmpl-local{self.n:04d}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.model,
            "choices": [] if delta is None else [choice],
        }
        if self.kind == "llama.cpp":
            chunk["system_fingerprint"] = "b1-0c1e570"
        if self.kind == "ollama":
            chunk["system_fingerprint"] = "fp_ollama"
        if self.kind == "vllm" and self.usage_key and delta is not None:
            chunk["usage"] = None
        return chunk


def play(wire: Any, kind: Kind, **settings: Any) -> LocalServer:
    """Have `wire` (a `WireServer`) answer as the local server `kind`, started with `settings`; returns it."""
    local = LocalServer(kind, **settings)
    wire.local = local
    wire.models.openai = local.models()
    return local


__all__ = ["KINDS", "Kind", "LocalServer", "play"]
