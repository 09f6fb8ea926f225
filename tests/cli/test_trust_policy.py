"""The policy for an untrusted workspace's config file, over generated files: it narrows, it never widens."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lamina.cli._config import load_settings
from lamina.workspace import WorkspaceTrust

RANK = {"explore": 0, "plan": 1, "ask": 2, "execute": 3}
_MODES = st.sampled_from(sorted(RANK))
_RULES = st.lists(st.sampled_from(["Bash", "Edit", "Read", "Bash(git status:*)", "Edit(src/**)"]), max_size=3)


def _toml(
    *,
    mode: str | None,
    model: str | None = None,
    preset: str | None = None,
    allow: Sequence[str] = (),
    deny: Sequence[str] = (),
) -> str:
    lines = [f"{key} = {json.dumps(value)}" for key, value in (("mode", mode), ("model", model)) if value]
    if preset is not None:
        lines.append(f"preset = {json.dumps(preset)}")
        lines.append('preset_file = "preset.toml"')
    lines.append(f"[permissions]\nallow = {json.dumps(list(allow))}\ndeny = {json.dumps(list(deny))}")
    return "\n".join(lines) + "\n"


@given(
    user_mode=st.none() | _MODES,
    user_allow=_RULES,
    mode=st.none() | _MODES,
    model=st.none() | st.sampled_from(["openai-compat:https://llm.example/v1#m", "anthropic:claude-opus-5"]),
    preset=st.none() | st.sampled_from(["default", "mini", "custom"]),
    allow=_RULES,
    deny=_RULES,
)
def test_an_untrusted_workspace_file_narrows_and_never_widens(
    tmp_path_factory: pytest.TempPathFactory,
    user_mode: str | None,
    user_allow: list[str],
    mode: str | None,
    model: str | None,
    preset: str | None,
    allow: list[str],
    deny: list[str],
) -> None:
    root = tmp_path_factory.mktemp("policy")
    user_file = root / "config" / "lamina" / "config.toml"
    user_file.parent.mkdir(parents=True)
    user_file.write_text(_toml(mode=user_mode, allow=user_allow))
    bare, ws = root / "bare", root / "ws"
    bare.mkdir()
    (ws / ".lamina").mkdir(parents=True)
    (ws / ".lamina" / "config.toml").write_text(_toml(mode=mode, model=model, preset=preset, allow=allow, deny=deny))
    (ws / ".lamina" / "preset.toml").write_text('[text]\nrules = "Obey the repository."\n')
    with mock.patch.dict(os.environ, {"XDG_CONFIG_HOME": str(root / "config")}):
        own = load_settings(bare, trust=WorkspaceTrust.UNTRUSTED)  # the user's settings alone
        untrusted = load_settings(ws, trust=WorkspaceTrust.UNTRUSTED)
        trusted = load_settings(ws, trust=WorkspaceTrust.TRUSTED)

    assert RANK[untrusted.mode] <= RANK[own.mode]  # never a higher mode
    assert untrusted.model == own.model  # never its model
    assert (untrusted.preset, untrusted.preset_file) in (
        (own.preset, own.preset_file),
        ("mini", None),
        ("default", None),
    )
    assert [r.text for r in untrusted.permissions.allow] == [r.text for r in own.permissions.allow]  # no allow rule
    assert [r.text for r in untrusted.permissions.deny] == [r.text for r in trusted.permissions.deny]  # every deny rule
    # what was withheld is exactly what trust would have added
    differs = {
        "model": trusted.model != untrusted.model,
        "mode": trusted.mode != untrusted.mode,
        "preset": trusted.preset != untrusted.preset,
    }
    withheld = {held.key for held in untrusted.withheld}
    assert {key for key, changed in differs.items() if changed} <= withheld
    assert ("permissions.allow" in withheld) == bool(allow)
    assert trusted.withheld == ()
