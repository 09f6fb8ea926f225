"""The shipped capability table and the reading of a models-endpoint answer (pure, no network)."""

from __future__ import annotations

import dataclasses
import tomllib
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lamina.providers import AnthropicProvider, Capabilities, OpenAIChatProvider, OpenAIResponsesProvider
from lamina.providers._model_table import (
    TABLE_PATH,
    TableProvider,
    from_model_info,
    known_models,
    openai_compatible_window,
    shipped_capabilities,
)
from tests.wire.models_api import anthropic_model, openai_model

_FIELDS = {field.name for field in dataclasses.fields(Capabilities)} - {"source"}
_EDITS = {"clear_tool_uses_20250919", "clear_thinking_20251015"}
_COMPACTIONS = {"compact_20260112", "summarize", "responses_compact", "responses_inline"}


def test_every_row_names_only_capability_fields_and_known_features() -> None:
    raw = tomllib.loads(TABLE_PATH.read_text(encoding="utf-8"))
    assert set(raw) == {"anthropic", "openai"}
    provider: TableProvider
    for provider in ("anthropic", "openai"):
        table = raw[provider]
        for model, row in {"defaults": table["defaults"], **table["models"]}.items():
            assert set(row) - {"unverified"} <= _FIELDS, (provider, model)
        for model in table["models"]:
            found = shipped_capabilities(provider, model, defaults=Capabilities())
            assert found.source.startswith("shipped table"), model
            assert found.context_editing <= _EDITS and found.server_compaction <= _COMPACTIONS, model
            assert found.max_output_tokens > 0 and found.context_window > 0, model


def test_the_openai_cache_regime_turns_at_gpt_5_6() -> None:
    regimes = {
        model: shipped_capabilities("openai", model, defaults=Capabilities()).cache_regime
        for model in known_models("openai")
    }
    assert regimes["gpt-5.6"] == "openai-breakpoints"
    assert {regimes[model] for model in ("gpt-5", "gpt-5.1", "gpt-5.2", "gpt-5.5", "o3", "o4-mini")} == {
        "openai-automatic"
    }


def test_a_dated_snapshot_has_its_alias_row_and_an_unknown_model_keeps_the_defaults() -> None:
    assert (
        AnthropicProvider("claude-opus-4-5-20251101").capabilities == AnthropicProvider("claude-opus-4-5").capabilities
    )
    assert OpenAIChatProvider("gpt-5-2025-08-07").capabilities.context_window == 272_000
    unknown = AnthropicProvider("claude-next", max_tokens=4096).capabilities
    assert unknown.source == "defaults: claude-next is not in the shipped table"
    assert (unknown.context_window, unknown.max_output_tokens, unknown.cache_regime) == (200_000, 4096, "anthropic")


def test_chat_completions_has_no_responses_only_feature() -> None:
    responses = OpenAIResponsesProvider("gpt-5.6").capabilities
    chat = OpenAIChatProvider("gpt-5.6").capabilities
    assert responses.server_compaction and responses.cache_diagnostics and responses.tool_search
    assert not (chat.server_compaction or chat.cache_diagnostics or chat.tool_search)
    assert chat.context_window == responses.context_window and chat.cache_regime == "openai-breakpoints"


def test_a_compatible_server_model_the_table_does_not_know_has_no_vision_and_no_cache_regime() -> None:
    found = OpenAIChatProvider("qwen3-coder", base_url="http://127.0.0.1:1/v1").capabilities
    assert (found.vision, found.cache_regime, found.context_window) == (False, "none", 200_000)
    assert "not in the shipped table" in found.source


def test_given_capabilities_are_kept_as_given() -> None:
    given_ = Capabilities(context_window=12_345)
    assert AnthropicProvider("claude-opus-5", capabilities=given_).capabilities is given_


def test_a_model_info_replaces_what_it_reports_and_keeps_the_rest() -> None:
    base = shipped_capabilities("anthropic", "claude-opus-4-8", defaults=Capabilities())
    info = anthropic_model(
        "claude-opus-4-8",
        max_input_tokens=700_000,
        max_tokens=90_000,
        edits={"clear_tool_uses_20250919"},
        summarize=True,
    )
    found = from_model_info(info, base, source="models endpoint, 2026-12-07")
    assert (found.context_window, found.max_output_tokens) == (700_000, 90_000)
    assert found.context_editing == {"clear_tool_uses_20250919"}
    assert found.server_compaction == {"summarize"}  # compact_20260112 not supported by this answer
    # not in the answer: diagnostics, tool search, clear_at stay as the shipped row has them
    assert (found.cache_diagnostics, found.tool_search, found.system_clear_at) == (True, True, True)
    assert found.source == "models endpoint, 2026-12-07"


def test_a_model_info_without_figures_keeps_the_base_figures() -> None:
    base = Capabilities(context_window=150_000, max_output_tokens=9_000)
    info = {**anthropic_model("x"), "max_input_tokens": None, "max_tokens": None, "capabilities": None}
    found = from_model_info(info, base, source="s")
    assert (found.context_window, found.max_output_tokens, found.context_editing) == (150_000, 9_000, frozenset())


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**7) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


@given(
    st.dictionaries(
        st.sampled_from(["max_input_tokens", "max_tokens", "capabilities", "id"]) | st.text(max_size=6),
        _JSON,
        max_size=5,
    )
)
def test_any_answer_reads_without_error_and_keeps_a_positive_window(info: dict[str, Any]) -> None:
    found = from_model_info(info, Capabilities(), source="s")
    assert found.context_window > 0 and found.max_output_tokens > 0
    assert found.context_editing <= _EDITS and found.server_compaction <= {"compact_20260112", "summarize"}


def test_a_compatible_server_window_is_read_from_its_own_field() -> None:
    vllm = [openai_model("other", max_model_len=8_192), openai_model("qwen", max_model_len=32_768)]
    assert openai_compatible_window(vllm, "qwen") == (32_768, "max_model_len")
    # llama.cpp serves one model under its file name, whatever the client calls it
    llama = [openai_model("models/qwen.gguf", meta={"n_ctx": 16_384, "n_ctx_train": 131_072})]
    assert openai_compatible_window(llama, "local") == (16_384, "meta.n_ctx")
    assert openai_compatible_window([openai_model("a", context_length=65_536)], "a") == (65_536, "context_length")
    assert openai_compatible_window([openai_model("gpt-5")], "gpt-5") is None  # OpenAI reports no window
    assert openai_compatible_window([openai_model("a", max_model_len=1), openai_model("b")], "c") is None
    assert openai_compatible_window([openai_model("a", max_model_len=True)], "a") is None
