"""Reasoning settings of `lamina chat` and `lamina run`: the `[reasoning]` table, the flags, the logged text.

One table shape for a config file and the command line (`ReasoningTable`), merged key by key in the
order the settings apply (`ReasoningMerge`); `thinking` and `budget_tokens` always come from the same
place. A session records its settings as `reasoning_text` (`thinking=adaptive effort=high`, `default`
for none) and a resumed one reads them back with `parse_reasoning`. Keys: docs/configuration.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Final, Literal

import msgspec

from lamina.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from lamina.placement import ReasoningConfig

EFFORTS: Final = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
"""`lamina.placement.Effort`'s values (a test holds them equal; the placement is not imported for `--help`)."""
SUMMARIES: Final = ("auto", "concise", "detailed")
REASONING_KEYS: Final = ("thinking", "budget_tokens", "display", "effort", "summary", "history")
"""The keys of `[reasoning]`, in the order `lamina config show` and the log give them."""
DEFAULT_REASONING: Final = "default"
"""The logged text of reasoning settings that ask nothing (the model reasons as it does)."""
MIN_BUDGET: Final = 1024


class ReasoningTable(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A file's `[reasoning]` table, or what the command line's flags say (every key optional)."""

    thinking: Literal["enabled", "adaptive", "disabled"] | None = None
    budget_tokens: Annotated[int, msgspec.Meta(ge=MIN_BUDGET)] | None = None
    display: Literal["summarized", "omitted"] | None = None
    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None
    history: Literal["keep", "drop", "priced"] | None = None


def checked(table: ReasoningTable, where: str) -> ReasoningTable:
    """`table` with `thinking` and `budget_tokens` made one setting: a budget alone means thinking `enabled`.

    Args:
        table: As written.
        where: The file (or `the command line`) the error names.

    Returns:
        The table, `thinking` filled in when only a budget is given.

    Raises:
        ConfigError: A budget with thinking other than `enabled`, or `enabled` without a budget.
    """
    if table.budget_tokens is not None and table.thinking is None:
        return msgspec.structs.replace(table, thinking="enabled")
    if table.budget_tokens is not None and table.thinking != "enabled":
        raise ConfigError(
            f'{where}: reasoning.budget_tokens needs reasoning.thinking = "enabled" (not {table.thinking!r})'
        )
    if table.thinking == "enabled" and table.budget_tokens is None:
        raise ConfigError(
            f'{where}: reasoning.thinking = "enabled" needs reasoning.budget_tokens (at least {MIN_BUDGET}),'
            ' or use thinking = "adaptive"'
        )
    return table


def flags_table(thinking: str | None, effort: str | None, summary: str | None) -> ReasoningTable | None:
    """What `--thinking`, `--effort` and `--reasoning-summary` ask (None: none given).

    Args:
        thinking: `off`, `adaptive`, or a budget in tokens (thinking `enabled` with it).
        effort: An effort level.
        summary: `auto`, `concise` or `detailed`.

    Returns:
        The flags as a `[reasoning]` table.

    Raises:
        UsageError: A value none of these.
    """
    if thinking is None and effort is None and summary is None:
        return None
    table = ReasoningTable(
        effort=_one_of("--effort", effort, EFFORTS),  # type: ignore[arg-type]  # one of the literal's values
        summary=_one_of("--reasoning-summary", summary, SUMMARIES),  # type: ignore[arg-type]  # as effort
    )
    if thinking is None:
        return table
    if thinking in ("off", "adaptive"):
        return msgspec.structs.replace(table, thinking="disabled" if thinking == "off" else "adaptive")
    if not thinking.isdigit():
        raise UsageError(f"--thinking {thinking}: use off, adaptive or a budget in tokens (at least {MIN_BUDGET})")
    if int(thinking) < MIN_BUDGET:
        raise UsageError(f"--thinking {thinking}: a thinking budget is at least {MIN_BUDGET} tokens")
    return msgspec.structs.replace(table, thinking="enabled", budget_tokens=int(thinking))


def _one_of(flag: str, value: str | None, allowed: tuple[str, ...]) -> str | None:
    if value is not None and value not in allowed:
        raise UsageError(f"{flag} {value}: use one of {', '.join(allowed)}")
    return value


class ReasoningMerge:
    """The `[reasoning]` tables in the order they apply, each key from the last that sets it."""

    def __init__(self) -> None:
        """Nothing set: the model reasons as it does."""
        self.values: dict[str, object] = {}
        self.origins: dict[str, str] = {}
        """Where each set key came from, keyed `reasoning.KEY` (as `Settings.origins`)."""

    def add(self, table: ReasoningTable, origin: str) -> None:
        """Apply `table` (checked) from `origin`: `thinking` brings its budget along, or clears it."""
        for key in REASONING_KEYS:
            value = getattr(table, key)
            if key == "budget_tokens" and table.thinking is not None:
                self.values.pop(key, None)
                self.origins.pop(f"reasoning.{key}", None)
            if value is not None:
                self.values[key], self.origins[f"reasoning.{key}"] = value, origin

    def config(self) -> ReasoningConfig:
        """The merged settings."""
        from lamina.placement import ReasoningConfig

        return ReasoningConfig(**self.values)  # type: ignore[arg-type]  # the table's keys and types


def reasoning_text(config: ReasoningConfig) -> str:
    """`config` as the log records it: `KEY=VALUE` for what differs from the defaults, by spaces (`default`: none)."""
    defaults = type(config)()
    pairs = [(key, getattr(config, key)) for key in REASONING_KEYS]
    shown = [f"{key}={value}" for key, value in pairs if value is not None and value != getattr(defaults, key)]
    return " ".join(shown) or DEFAULT_REASONING


def parse_reasoning(text: str) -> ReasoningConfig:
    """The settings `reasoning_text` wrote.

    Raises:
        ConfigError: Not text `reasoning_text` writes (a key or value it does not know).
    """
    from lamina.placement import ReasoningConfig

    if text == DEFAULT_REASONING:
        return ReasoningConfig()
    raw: dict[str, str] = {}
    for pair in text.split():
        key, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"recorded reasoning settings {text!r}: {pair!r} is not KEY=VALUE")
        raw[key] = value
    try:
        table = msgspec.convert(raw, ReasoningTable, strict=False)
        return ReasoningConfig(**{key: getattr(table, key) for key in raw})
    except (msgspec.ValidationError, UsageError) as exc:
        raise ConfigError(f"recorded reasoning settings {text!r}: {exc}") from None


def with_effort(config: ReasoningConfig, effort: str) -> ReasoningConfig:
    """`config` with another effort (`default`: left to the model).

    Raises:
        UsageError: `effort` is no effort level.
    """
    import dataclasses

    if effort == DEFAULT_REASONING:
        return dataclasses.replace(config, effort=None)
    return dataclasses.replace(config, effort=_one_of("effort", effort, EFFORTS))  # type: ignore[arg-type]  # one of Effort's values
