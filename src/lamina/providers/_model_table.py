"""The capability table: shipped rows (`models.toml`) and the models endpoint's answers read into `Capabilities`.

`shipped_capabilities` looks a model up in the table shipped with the package (read once);
`from_model_info` reads an Anthropic `GET /v1/models/{id}` answer over a base row, and
`openai_compatible_window` finds the window an OpenAI-compatible server reports in `/v1/models`.
All pure but the one read of the package's own data file.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

import msgspec

from lamina.providers._provider import Capabilities
from lamina.providers._server_windows import reported_window

TableProvider: TypeAlias = Literal["anthropic", "openai"]
"""The table's providers: every Anthropic model, every OpenAI one (Chat and Responses read the same rows)."""

TABLE_PATH: Final = Path(__file__).with_name("models.toml")
SHIPPED: Final = "shipped table"
_DATED: Final = re.compile(r"-\d{4}-?\d{2}-?\d{2}$")
"""A snapshot suffix (`-20250929`, `-2025-08-07`): the dated id has its alias's figures."""
_EDITS: Final = ("clear_tool_uses_20250919", "clear_thinking_20251015")
_ANTHROPIC_COMPACTION: Final = "compact_20260112"
WINDOW_FIELDS: Final = (("meta", "n_ctx"), ("max_model_len",), ("context_length",))
"""Where OpenAI-compatible servers report a model's window in `/v1/models`: llama.cpp, vLLM, others."""


class _Table(msgspec.Struct, frozen=True):
    defaults: dict[str, Any] = {}
    models: dict[str, dict[str, Any]] = {}


@functools.cache
def _tables() -> dict[str, _Table]:
    """The shipped table, read once per process."""
    raw = tomllib.loads(TABLE_PATH.read_text(encoding="utf-8"))
    return msgspec.convert(raw, dict[str, _Table])


def known_models(provider: TableProvider) -> tuple[str, ...]:
    """The model ids the shipped table lists for `provider`, in its order."""
    return tuple(_tables()[provider].models)


def shipped_capabilities(provider: TableProvider, model: str, *, defaults: Capabilities) -> Capabilities:
    """What the shipped table says `model` can do, or `defaults` (its `source` saying why) when it is not listed.

    Args:
        provider: Which table to read.
        model: The model id, or a dated snapshot of a listed one.
        defaults: The provider's own figures for a model it does not know (no `source`).

    Returns:
        The row over the provider's table defaults, `source` `shipped table` (`, unverified` for rows whose
        figures are not from a published page); else `defaults` with a `source` naming the unknown model.
    """
    table = _tables()[provider]
    row = table.models.get(model) or table.models.get(_DATED.sub("", model))
    if row is None:
        return dataclasses.replace(defaults, source=f"defaults: {model} is not in the shipped table")
    fields = {**table.defaults, **row}
    unverified = bool(fields.pop("unverified", False))
    found = msgspec.convert(fields, Capabilities)
    return dataclasses.replace(found, source=f"{SHIPPED}, unverified" if unverified else SHIPPED)


def openai_capabilities(model: str, *, compatible: bool, max_output_tokens: int | None, chat: bool) -> Capabilities:
    """What an OpenAI provider's model can do, from the shipped table or the defaults.

    Args:
        model: The model id.
        compatible: The provider talks to another server (`base_url`): a model the table does not know is
            assumed to have no vision and no known cache regime there.
        max_output_tokens: The provider's output limit, the defaults' figure.
        chat: Chat Completions, which has no server compaction, diagnostics or tool search.

    Returns:
        The capabilities.
    """
    defaults = Capabilities(
        max_output_tokens=max_output_tokens or 8192,
        vision=not compatible,
        cache_regime="none" if compatible else "openai-automatic",
    )
    found = shipped_capabilities("openai", model, defaults=defaults)
    return (
        dataclasses.replace(found, server_compaction=frozenset(), cache_diagnostics=False, tool_search=False)
        if chat
        else found
    )


def _supported(section: object, key: str | None = None) -> bool:
    if not isinstance(section, Mapping):
        return False
    if key is not None:
        return _supported(section.get(key))
    return section.get("supported") is True


def from_model_info(info: Mapping[str, Any], base: Capabilities, *, source: str) -> Capabilities:
    """An Anthropic model's capabilities from its `GET /v1/models/{id}` answer (`BetaModelInfo`, as JSON).

    What the answer reports replaces `base`'s figures: the window (`max_input_tokens`), the output limit
    (`max_tokens`), thinking, images, PDFs, context editing (`capabilities.context_management`) and server
    compaction (its `compact_20260112`, and the beta `capabilities.compaction.summarize`). What it does not
    report (diagnostics, tool search, tool changes, `clear_at`) stays as `base` has it. Missing or null
    fields keep `base`'s value.

    Args:
        info: The answer's JSON.
        base: The shipped row, or the provider's defaults.
        source: The `source` of the result (`models endpoint, DATE`).

    Returns:
        The merged capabilities.
    """
    changes: dict[str, Any] = {"source": source, "cache_regime": "anthropic"}
    window, output = info.get("max_input_tokens"), info.get("max_tokens")
    if isinstance(window, int) and window > 0:
        changes["context_window"] = window
    if isinstance(output, int) and output > 0:
        changes["max_output_tokens"] = output
    reported = info.get("capabilities")
    if isinstance(reported, Mapping):
        changes.update(_reported(reported))
    return dataclasses.replace(base, **changes)


def _reported(reported: Mapping[str, Any]) -> dict[str, Any]:
    """The `Capabilities` fields a model info's `capabilities` object states."""
    found: dict[str, Any] = {}
    for name, field in (("thinking", "thinking"), ("image_input", "vision"), ("pdf_input", "pdf_input")):
        if name in reported:
            found[field] = _supported(reported[name])
    managed = reported.get("context_management")
    if isinstance(managed, Mapping):
        on = managed.get("supported") is True
        found["context_editing"] = frozenset(edit for edit in _EDITS if on and _supported(managed, edit))
        compaction = {_ANTHROPIC_COMPACTION} if on and _supported(managed, _ANTHROPIC_COMPACTION) else set()
        standalone = reported.get("compaction")
        if _supported(standalone) and _supported(standalone, "summarize"):
            compaction.add("summarize")
        found["server_compaction"] = frozenset(compaction)
    return found


def openai_compatible_window(entries: Iterable[Mapping[str, Any]], model: str) -> tuple[int, str] | None:
    """The window an OpenAI-compatible server reports for `model` in its `/v1/models` list, and the field.

    The entry whose `id` is `model` is read; a server listing one model only (llama.cpp serves one, under
    its file name) has that one read whatever its id.

    Args:
        entries: The list's `data` items, as JSON.
        model: The model id the provider sends.

    Returns:
        `(window, field)` (`field` as `meta.n_ctx`, `max_model_len`, `context_length`), or None when the
        server reports none.
    """
    listed = list(entries)
    chosen = next((entry for entry in listed if entry.get("id") == model), None)
    if chosen is None and len(listed) == 1:
        chosen = listed[0]
    if chosen is None:
        return None
    for path in WINDOW_FIELDS:
        value: Any = chosen
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if reported_window(value) is not None:
            return value, ".".join(path)
    return None
