"""Settings of `lamina chat` and `lamina run` from TOML files, and `lamina config show` (I/O).

Three files, all optional, all with the same keys: the user's (`config.toml` in the user config
directory), the workspace's (`.lamina/config.toml`, the team's) and the personal one beside it
(`.lamina/config.local.toml`, kept out of git), each winning over the one before; a command-line
option wins over all. Their `[permissions]` rules add up (`lamina.cli._permissions`). An untrusted workspace's
file only narrows: its model, allow rules, custom preset and a mode above the user's are withheld.
The keys and an example file: docs/configuration.md; trust: docs/security.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final, Literal

import msgspec
import platformdirs
import typer

from lamina._atomic import atomic_write
from lamina._typed_toml import read_config_file
from lamina.cli._console import JsonOption, abort, out, print_json, safe
from lamina.cli._permissions import PermissionRule, Permissions, read_rules
from lamina.cli._reasoning_settings import REASONING_KEYS, ReasoningMerge, ReasoningTable, checked
from lamina.cli._toml_edit import with_appended
from lamina.errors import ConfigError
from lamina.workspace import WorkspaceTrust

if TYPE_CHECKING:
    from lamina.agent import PrewarmSetting
    from lamina.compaction import BackendSetting
    from lamina.placement import ReasoningConfig
    from lamina.pricing import ContextEditing
    from lamina.tools import SandboxSettings

DEFAULT_MODEL: Final = "anthropic:claude-sonnet-5"
DEFAULT_MODE: Final = "ask"
WORKSPACE_CONFIG: Final = Path(".lamina") / "config.toml"
LOCAL_CONFIG: Final = Path(".lamina") / "config.local.toml"
"""The workspace's personal file (rules saved with `s`, kept out of git), read after the team's `WORKSPACE_CONFIG`."""

Mode = Literal["explore", "plan", "ask", "execute"]
_MODE_RANK: Final = {"explore": 0, "plan": 1, "ask": 2, "execute": 3}
"""How much each mode lets run without asking: an untrusted workspace may only lower it."""


class _Rules(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A file's `[permissions]` table: rules as written (`Bash(git status:*)`)."""

    allow: list[str] = []
    deny: list[str] = []


class _Sandbox(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A file's `[sandbox]` table (`lamina.tools.SandboxSettings`)."""

    enabled: bool | None = None
    network: bool | None = None
    writable: list[str] | None = None


class _Compaction(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A file's `[compaction]` table: who writes a compaction's summary, who clears old tool output."""

    backend: Literal["auto", "server", "lamina"] | None = None
    context_editing: Literal["priced", "server", "lamina", "off"] | None = None
    prewarm: Literal["priced", "always", "off"] | None = None


class _File(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """One config file as written (every key optional)."""

    model: str | None = None
    mode: Mode | None = None
    preset: Literal["default", "mini", "custom"] | None = None
    preset_file: str | None = None
    context_window: Annotated[int, msgspec.Meta(gt=0)] | None = None
    max_output_tokens: Annotated[int, msgspec.Meta(gt=0)] | None = None
    compaction_reserve: Annotated[int, msgspec.Meta(ge=0)] | None = None
    prune: bool | None = None
    permissions: _Rules | None = None
    sandbox: _Sandbox | None = None
    reasoning: ReasoningTable | None = None
    compaction: _Compaction | None = None


@dataclass(frozen=True, slots=True)
class Withheld:
    """A workspace setting not applied because the workspace is not trusted."""

    key: str
    """`model`, `mode`, `preset`, `preset_file` or `permissions.allow`."""
    value: str
    """As written (a mode, an allow rule's text), a preset file resolved."""

    def __str__(self) -> str:
        return f"allow {self.value}" if self.key == "permissions.allow" else f"{self.key} = {self.value}"


@dataclass(frozen=True, slots=True)
class Settings:
    """The effective settings and where each came from (`default`, a file path, or `command line`)."""

    model: str = DEFAULT_MODEL
    mode: str = DEFAULT_MODE
    preset: str = "default"
    preset_file: Path | None = None
    context_window: int | None = None
    """None: the provider's own figure."""
    max_output_tokens: int | None = None
    """The output cap every request is sent (`--max-output-tokens`); None: the provider's own (`provider_from_spec`)."""
    compaction_reserve: int | None = None
    """None: the agent's default."""
    prune: bool = True
    """Whether old tool output is pruned before a turn (`lamina.compaction.PrunePolicy`'s defaults)."""
    permissions: Permissions = field(default_factory=Permissions)
    """The allow and deny rules of both files (the user's first)."""
    sandbox: SandboxSettings = field(default_factory=lambda: _SandboxMerge().settings())
    """The Bash sandbox: the user's file sets it; the workspace's can only tighten it."""
    reasoning: ReasoningConfig = field(default_factory=lambda: ReasoningMerge().config())
    """How the model reasons (`[reasoning]`, the reasoning flags; a resumed session's recorded ones)."""
    compaction_backend: BackendSetting = "lamina"
    """Who writes compaction summaries (`[compaction] backend`): `lamina` (the default), `server` or `auto`."""
    context_editing: ContextEditing | None = None
    """Who clears old tool output on models with context editing (`[compaction] context_editing`): None, the
    provider's own setting (`priced`: the cost model weighs Lamina's prune against the server's clearing)."""
    prewarm: PrewarmSetting = "priced"
    """When a pre-warm writes the compacted prefix between turns (`[compaction] prewarm`): `priced`, `always`, `off`."""
    sandbox_ignored: tuple[str, ...] = ()
    """What the workspace's file asked of the sandbox that would loosen it (not applied; said at start)."""
    origins: dict[str, str] = field(default_factory=dict)
    trust: WorkspaceTrust = WorkspaceTrust.UNTRUSTED
    """Whether the workspace is trusted: its sources start and its whole config file applies."""
    withheld: tuple[Withheld, ...] = ()
    """What the workspace's file sets that was not applied because it is not trusted."""

    def origin(self, key: str) -> str:
        return self.origins.get(key, "default")


KEYS: Final = (
    "model",
    "mode",
    "preset",
    "preset_file",
    "context_window",
    "max_output_tokens",
    "compaction_reserve",
    "prune",
)


def user_config_path() -> Path:
    """The user's config file (it may not exist)."""
    return platformdirs.user_config_path("lamina") / "config.toml"


def _config_files(workspace: Path, trust: WorkspaceTrust) -> list[tuple[Path, bool]]:
    """The config files in the order they apply, each with whether it is trusted: the user's, the team's, yours."""
    return [
        (user_config_path(), True),
        *((workspace / name, trust.trusted) for name in (WORKSPACE_CONFIG, LOCAL_CONFIG)),
    ]


def load_settings(
    workspace: Path, *, trust: WorkspaceTrust, reasoning: ReasoningTable | None = None, **overrides: object
) -> Settings:
    """Defaults, then the user's file, then the workspace's, then `overrides` that are not None.

    `reasoning` is what the command line's reasoning flags say (`flags_table`), applied over the files'.

    An untrusted workspace's file only narrows: its deny rules, a mode no higher than the one
    before it, the built-in presets and the compaction keys apply; its model, allow rules, custom
    preset (system-role text) and a higher mode are `Settings.withheld` instead.

    Raises:
        ConfigError: A file is not valid TOML, has an unknown key or a value of the wrong type, or
            reasoning settings that do not go together.
    """
    values: dict[str, object] = {}
    origins: dict[str, str] = {}
    rules: list[tuple[str, list[str], list[str]]] = []
    sandbox = _SandboxMerge()
    thinking = ReasoningMerge()
    withheld: list[Withheld] = []
    for path, trusted in _config_files(workspace, trust):
        data = _read(path)
        if data is None:
            continue
        if not trusted:
            data, held = _narrowed(data, path, mode_before=str(values.get("mode", DEFAULT_MODE)))
            withheld.extend(held)
        if data.permissions is not None:
            rules.append((str(path), data.permissions.allow, data.permissions.deny))
        if data.sandbox is not None:
            sandbox.add(path, data.sandbox, loosen=path == user_config_path())
        if data.reasoning is not None:
            thinking.add(checked(data.reasoning, str(path)), str(path))
        if data.compaction is not None and data.compaction.backend is not None:
            values["compaction_backend"], origins["compaction.backend"] = data.compaction.backend, str(path)
        if data.compaction is not None and data.compaction.prewarm is not None:
            values["prewarm"], origins["compaction.prewarm"] = data.compaction.prewarm, str(path)
        if data.compaction is not None and data.compaction.context_editing is not None:
            values["context_editing"] = data.compaction.context_editing
            origins["compaction.context_editing"] = str(path)
        for key in KEYS:
            value = getattr(data, key)
            if value is None:
                continue
            if key == "preset_file":
                value = (path.parent / os.path.expanduser(str(value))).resolve()
            values[key] = value
            origins[key] = str(path)
    for key, value in overrides.items():
        if value is not None:
            values[key] = Path(str(value)).resolve() if key == "preset_file" else value
            origins[key] = "command line"
    if reasoning is not None:
        thinking.add(checked(reasoning, "the command line"), "command line")
    permissions = read_rules(rules)
    origins.update(sandbox.origins)
    origins.update(thinking.origins)
    return Settings(
        **values,  # type: ignore[arg-type]  # keys and types checked above
        permissions=permissions,
        sandbox=sandbox.settings(),
        sandbox_ignored=tuple(sandbox.ignored),
        reasoning=thinking.config(),
        origins=origins,
        trust=trust,
        withheld=tuple(withheld),
    )


class _SandboxMerge:
    """The `[sandbox]` tables of the files in order: the user's sets anything, the workspace's only tightens."""

    def __init__(self) -> None:
        self.enabled, self.network = True, False
        self.writable: list[Path] = []
        self.origins: dict[str, str] = {}
        self.ignored: list[str] = []

    def add(self, path: Path, table: _Sandbox, *, loosen: bool) -> None:
        """Take `table` (from `path`); `loosen`: it may turn the sandbox off, allow the network, add folders.

        Raises:
            ConfigError: A writable folder is neither absolute nor under `~`.
        """
        if table.enabled is not None and (loosen or table.enabled):
            self.enabled, self.origins["sandbox.enabled"] = table.enabled, str(path)
        elif table.enabled is not None:
            self._ignore(path, "enabled = false")
        if table.network is not None and (loosen or not table.network):
            self.network, self.origins["sandbox.network"] = table.network, str(path)
        elif table.network is not None:
            self._ignore(path, "network = true")
        if table.writable and not loosen:
            self._ignore(path, f"writable = {json.dumps(table.writable)}")
        elif table.writable is not None:
            for raw in table.writable:
                folder = Path(os.path.expanduser(raw))
                if not folder.is_absolute():
                    raise ConfigError(f"{path}: sandbox.writable: {raw!r} is not an absolute path (nor under ~)")
                self.writable.append(folder)
            self.origins["sandbox.writable"] = str(path)

    def _ignore(self, path: Path, setting: str) -> None:
        self.ignored.append(f"{path} sets {setting} under [sandbox]: ignored (only your own config file loosens it)")

    def settings(self) -> SandboxSettings:
        from lamina.tools import SandboxSettings  # imported when settings are read: not for `lamina --help`

        return SandboxSettings(enabled=self.enabled, network=self.network, writable=tuple(self.writable))


def _narrowed(data: _File, path: Path, *, mode_before: str) -> tuple[_File, list[Withheld]]:
    """An untrusted workspace's file (at `path`) without what only trust allows, and what was taken out."""
    held: list[Withheld] = []
    changes: dict[str, object] = {}
    if data.model is not None:
        held.append(Withheld("model", data.model))
        changes["model"] = None
    if data.mode is not None and _MODE_RANK[data.mode] > _MODE_RANK.get(mode_before, _MODE_RANK["ask"]):
        held.append(Withheld("mode", data.mode))
        changes["mode"] = None
    if data.preset == "custom":
        held.append(Withheld("preset", data.preset))
        changes["preset"] = None
    if data.preset_file is not None:
        held.append(Withheld("preset_file", str((path.parent / os.path.expanduser(data.preset_file)).resolve())))
        changes["preset_file"] = None
    if data.permissions is not None and data.permissions.allow:
        held.extend(Withheld("permissions.allow", rule) for rule in data.permissions.allow)
        changes["permissions"] = _Rules(deny=data.permissions.deny)
    return msgspec.structs.replace(data, **changes), held


def settings_or_abort(
    workspace: Path,
    *,
    trust: WorkspaceTrust,
    model: str | None,
    mode: str | None,
    preset: str | None,
    custom_preset: Path | None = None,
    reasoning: ReasoningTable | None = None,
    max_output_tokens: int | None = None,
) -> Settings:
    """The effective settings for a command, or one clear line and exit 1 (a bad file, key or mode).

    `custom_preset` (the `--custom-preset` option) is the custom preset's file and implies the
    `custom` preset unless `preset` names another one (then loading the preset fails, naming both).
    """
    from lamina.tools import PermissionMode

    if custom_preset is not None and preset is None:
        preset = "custom"
    try:
        settings = load_settings(
            workspace,
            trust=trust,
            reasoning=reasoning,
            model=model,
            mode=mode,
            preset=preset,
            preset_file=custom_preset,
            max_output_tokens=max_output_tokens,
        )
        PermissionMode(settings.mode)
    except (ConfigError, ValueError) as exc:
        abort(str(exc))
    return settings


def _read(path: Path) -> _File | None:
    return read_config_file(path, _File)


def save_allowed(workspace: Path, rules: Sequence[PermissionRule], *, file: Path = WORKSPACE_CONFIG) -> Path:
    """Add `rules` to `permissions.allow` in a workspace's config file (made if missing); the file's path.

    The rest of the file (keys, comments, order, dotted keys, inline tables) is kept as written
    (`lamina.cli._toml_edit`).

    Raises:
        ConfigError: The file cannot be read or written, or is not valid: the rule is then not saved.
    """
    path = workspace / file
    current = _read(path)
    allowed = list(current.permissions.allow) if current is not None and current.permissions is not None else []
    wanted = allowed + [rule.text for rule in rules if rule.text not in allowed]
    if wanted == allowed:
        return path
    text = path.read_text(encoding="utf-8") if current is not None else ""
    updated = with_appended(text, "permissions", "allow", wanted[len(allowed) :], file=str(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, updated.encode())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write: {exc.strerror or exc}") from None
    return path


_KEY_VARIABLES: Final = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "openai-responses": "OPENAI_API_KEY",
}


def missing_api_key(spec: str) -> str | None:
    """The environment variable `spec`'s provider needs and that is not set, or None."""
    kind = spec.partition(":")[0]
    variable = _KEY_VARIABLES.get(kind)
    if variable is None or os.environ.get(variable):
        return None
    if kind == "anthropic" and os.environ.get("ANTHROPIC_AUTH_TOKEN"):
        return None
    return variable


app = typer.Typer(help="Show the settings of `lamina chat` and `lamina run`.", no_args_is_help=True)


def _setting_rows(settings: Settings) -> list[tuple[str, object, str]]:
    """Each setting `config show` lists: its key, its effective value and where that came from."""
    sandbox = settings.sandbox
    shown_sandbox = {
        "enabled": sandbox.enabled,
        "network": sandbox.network,
        "writable": [str(p) for p in sandbox.writable],
    }
    rows: list[tuple[str, object, str]] = [(key, getattr(settings, key), settings.origin(key)) for key in KEYS]
    rows += [(f"sandbox.{key}", value, settings.origin(f"sandbox.{key}")) for key, value in shown_sandbox.items()]
    rows += [
        (f"reasoning.{key}", getattr(settings.reasoning, key), settings.origin(f"reasoning.{key}"))
        for key in REASONING_KEYS
    ]
    rows.append(("compaction.backend", settings.compaction_backend, settings.origin("compaction.backend")))
    editing = settings.context_editing or "priced"  # None: the provider's own setting, `priced`
    rows.append(("compaction.context_editing", editing, settings.origin("compaction.context_editing")))
    rows.append(("compaction.prewarm", settings.prewarm, settings.origin("compaction.prewarm")))
    return rows


@app.command("show")
def show(
    as_json: JsonOption = False,
) -> None:
    """Print the effective settings for the current directory and where each came from."""
    from lamina.workspace import workspace_trust

    try:
        settings = load_settings(Path.cwd(), trust=workspace_trust(Path.cwd()))
    except ConfigError as exc:
        abort(str(exc))
    rows = _setting_rows(settings)
    rules = [("allow", rule) for rule in settings.permissions.allow] + [
        ("deny", rule) for rule in settings.permissions.deny
    ]
    if as_json:
        print_json(
            {
                "settings": {key: {"value": value, "from": origin} for key, value, origin in rows},
                "permissions": [{"list": kind, "rule": rule.text, "from": rule.origin} for kind, rule in rules],
                "sandbox_ignored": list(settings.sandbox_ignored),
                "files": {"user": user_config_path(), "workspace": Path.cwd() / WORKSPACE_CONFIG},
                "trusted": settings.trust.trusted,
                "withheld": [{"key": held.key, "value": held.value} for held in settings.withheld],
            }
        )
        return
    from rich.table import Table

    table = Table("setting", "value", "from", box=None)
    for key, value, origin in rows:
        shown = "(provider default)" if value is None else str(value)
        table.add_row(safe(key), safe(shown), safe(origin))
    out.print(table)
    if rules:
        permissions = Table("permissions", "rule", "from", box=None)
        for kind, rule in rules:
            permissions.add_row(kind, safe(rule.text), safe(rule.origin))
        out.print(permissions)
    for ignored in settings.sandbox_ignored:
        out.print(f"[yellow]sandbox:[/yellow] {safe(ignored)}")
    if settings.withheld:
        shown = ", ".join(str(held) for held in settings.withheld)
        out.print(f"[yellow]not applied (the workspace is not trusted: `lamina trust`):[/yellow] {safe(shown)}")
    out.print(f"[dim]user file: {safe(user_config_path())}[/dim]")
    trusted = "trusted" if settings.trust.trusted else "not trusted"
    out.print(f"[dim]workspace file: {safe(Path.cwd() / WORKSPACE_CONFIG)} ({trusted})[/dim]")
