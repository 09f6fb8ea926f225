"""OpenAI's cache regime of GPT-5.6 and later on the wire: which models have it, the options it refuses (400).

A model of the regime is billed by `OpenAIBreakpointSimulator` and its usage carries
`cache_write_tokens` (with `cache_write_tokens_details` on Responses); an older model refuses
`prompt_cache_options` and `prompt_cache_breakpoint` as an unsupported parameter. The option checks
follow the SDK types: `ttl` `30m` or `12h` on Responses, `30m` only on Chat Completions, `prewarm`
on Responses only, `prompt_cache_retention` `24h` only on these models.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from tests.wire.script import WireResponse, json_response

_BREAKPOINT_MODEL: Final = re.compile(r"^gpt-(5\.([6-9]|\d{2,})|[6-9]|\d{2,})(\b|[.-])")
_MARKER: Final = "prompt_cache_breakpoint"


def breakpoint_model(model: object) -> bool:
    """Whether `model` caches by the breakpoint regime (GPT-5.6 and later model families)."""
    return isinstance(model, str) and _BREAKPOINT_MODEL.match(model.rsplit("/", 1)[-1]) is not None


def _bad_request(message: str, param: str, code: str) -> WireResponse:
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    return json_response(400, {"error": error})


def _invalid_value(value: object, supported: tuple[str, ...], param: str) -> WireResponse:
    listed = ", ".join(f"'{s}'" for s in supported)
    return _bad_request(f"Invalid value: '{value}'. Supported values are: {listed}.", param, "invalid_value")


def _markers(body: Mapping[str, Any]) -> Iterator[str]:
    """The paths of the content parts that carry `prompt_cache_breakpoint`."""
    name = "messages" if "messages" in body else "input"
    items = body.get(name)
    for i, item in enumerate(items if isinstance(items, list) else ()):
        content = item.get("content") if isinstance(item, Mapping) else None
        for j, part in enumerate(content if isinstance(content, list) else ()):
            if isinstance(part, Mapping) and _MARKER in part:
                yield f"{name}[{i}].content[{j}].{_MARKER}"


def cache_problem(api: str, body: Mapping[str, Any]) -> WireResponse | None:
    """The API's 400 for the cache options of `body` (`api`: `chat` or `responses`), or None."""
    options = body.get("prompt_cache_options")
    if not breakpoint_model(body.get("model")):
        # the regime's own options are refused on older models; a diagnostics comparison is not a cache option
        regime = isinstance(options, Mapping) and any(k != "comparison_response_id" for k in options)
        found = "prompt_cache_options" if regime else next(_markers(body), None)
        if found is None:
            return None
        message = f"Unsupported parameter: '{found}' is not supported with this model."
        return _bad_request(message, found, "unsupported_parameter")
    retention = body.get("prompt_cache_retention")
    if retention is not None and retention != "24h":
        return _invalid_value(retention, ("24h",), "prompt_cache_retention")
    if options is None:
        return None
    if not isinstance(options, Mapping):
        return _bad_request(
            "Invalid type for 'prompt_cache_options': expected an object.", "prompt_cache_options", "invalid_type"
        )
    if options.get("mode", "implicit") not in ("implicit", "explicit"):
        return _invalid_value(options["mode"], ("implicit", "explicit"), "prompt_cache_options.mode")
    supported = ("30m",) if api == "chat" else ("30m", "12h")
    if options.get("ttl", "30m") not in supported:
        return _invalid_value(options["ttl"], supported, "prompt_cache_options.ttl")
    if api == "chat" and "prewarm" in options:
        param = "prompt_cache_options.prewarm"
        return _bad_request(f"Unknown parameter: '{param}'.", param, "unknown_parameter")
    return None


def prewarm(body: Mapping[str, Any]) -> bool:
    """Whether `body` only prepares the cache (`prompt_cache_options.prewarm`): no output is generated."""
    options = body.get("prompt_cache_options")
    return isinstance(options, Mapping) and options.get("prewarm") is True
