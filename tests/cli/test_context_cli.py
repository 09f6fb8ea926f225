"""`lamina context` through the real Typer app, on a fixture monorepo."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.context import Stability, Tier
from lamina.engine import ContextEngine
from lamina.reports import budget_of_turn
from lamina.session import AssistantMessage, LocalSessionStore
from lamina.tokens import DEFAULT_ESTIMATOR
from lamina.tools import default_tool_specs
from lamina.workspace import WorkspaceContext

runner = CliRunner()


def put(root: Path, relative: str, content: str | bytes) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


@pytest.fixture
def monorepo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "shop"
    put(root, "AGENTS.md", "# Shop\nRun `make test` before you commit.\n")
    put(root, "packages/api/AGENTS.md", "API rules.\n")
    put(root, "packages/web/CLAUDE.md", "Web rules.\n")
    put(root, "packages/blob/AGENTS.md", b"\x00binary")
    put(root, "packages/huge/AGENTS.md", "x" * 2_000_000)
    put(root, "node_modules/dep/AGENTS.md", "never listed\n")
    put(root, "MEMORY.md", "- The API is the only way to the database.\n")
    prefs = put(tmp_path, "prefs.toml", 'name = "Ada"\ntime_zone = "Europe/London"\n')
    monkeypatch.setenv("LAMINA_PREFERENCES", str(prefs))
    return root


def run(*args: str) -> Any:
    return runner.invoke(app, ["context", *args])


def report(*args: str) -> dict[str, Any]:
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_human_report_lists_parts_files_skips_layout_and_tiers(monorepo: Path) -> None:
    result = run(str(monorepo))
    assert result.exit_code == 0, result.output
    assert result.stderr == ""  # no spinner when stderr is not a terminal
    text = result.stdout
    assert text.startswith(f"Context for {monorepo}\n")
    for needle in (
        "The first turn of a new session with the default preset, rendered for Anthropic Messages.",
        "preferences",
        "system.context_files",
        "context.root",
        "memory",
        "date_time",
        "Tools: Read, Edit, Write, Glob, Grep, Bash",
        "packages/api/AGENTS.md",
        "packages/web/CLAUDE.md",
        "shown in full",
        "Skipped (not listed in the prompt):",
        "binary (contains a NUL byte)",
        "too large (2,000,000 bytes; the limit is 1,048,576)",
        "Memory: MEMORY.md,",
        "Preferences: name, time zone from",
        "◀ 1 (1h)",
        "◀ 2 (1h)",
        "◀ 3 (1h)",
        "closes the stable prefix",
        "1 rules",
        "8 one-shot",
        "total",
    ):
        assert needle in text, needle
    assert "node_modules" not in text


def test_json_carries_the_same_data(monorepo: Path) -> None:
    data = report(str(monorepo))
    assert set(data) == {
        "root",
        "preset",
        "provider",
        "format",
        "parts",
        "tools",
        "context_files",
        "memory",
        "project",
        "preferences",
        "cache_layout",
        "tiers",
        "total_tokens",
        "stability_classes",
        "skills",
        "sources",
    }
    assert (data["root"], data["provider"], data["format"]) == (str(monorepo), "anthropic", "anthropic")
    assert data["preset"]["name"] == "default"
    keys = [p["key"] for p in data["parts"]]
    # request order: the tool definitions, the stable parts, the user's message, its tail
    tools = [f"tool.{t['name']}" for t in data["tools"]]
    assert keys[: len(tools)] == tools and "tool.Read" in tools
    assert keys[len(tools)] == "preferences" and keys[-3:] == ["date_time", "session_state", "sources"]
    assert keys[-4].startswith("history.user.")
    classes = {p["key"]: p["stability"] for p in data["parts"]}
    assert (classes["tool.Read"], classes["preferences"], classes[keys[-4]], classes["date_time"]) == (
        "stable",
        "stable",
        "compactable",
        "volatile",
    )
    assert set(data["parts"][0]) >= {"key", "tier", "stability", "authority", "provenance", "tokens"}
    files = data["context_files"]
    assert [f["path"] for f in files["found"]] == ["AGENTS.md", "packages/api/AGENTS.md", "packages/web/CLAUDE.md"]
    assert files["found"][0]["inlined"] is True
    assert {s["path"]: s["reason"] for s in files["skipped"]} == {
        "packages/blob/AGENTS.md": "binary (contains a NUL byte)",
        "packages/huge/AGENTS.md": "too large (2,000,000 bytes; the limit is 1,048,576)",
    }
    assert data["memory"]["status"] == "loaded" and data["preferences"]["set"] == ["name", "time_zone"]
    layout = data["cache_layout"]
    # system (rules and preferences), then the first user message (project files, memory), then the turn's
    # tail: 1 hour, since the user's next turn may come after minutes
    assert [b["ttl"] for b in layout["breakpoints"]] == ["1h", "1h", "1h"]
    assert layout["blocks"][layout["breakpoints"][0]["position"] - 1]["label"] == "system.context_files"
    stable_end = layout["breakpoints"][1]["position"]
    assert layout["blocks"][stable_end - 1]["label"] == "memory"
    assert layout["breakpoints"][1]["tokens"] == layout["stable_prefix_tokens"]
    assert layout["breakpoints"][-1]["tokens"] == layout["total_tokens"]
    assert [t["tier"] for t in data["tiers"]] == [int(t) for t in Tier]
    assert data["total_tokens"] == sum(t["tokens"] for t in data["tiers"])


def test_numbers_are_those_of_a_real_first_turn(monorepo: Path, tmp_path: Path) -> None:
    data = report(str(monorepo))
    context = WorkspaceContext(monorepo, tools=default_tool_specs())
    with LocalSessionStore(tmp_path / "store").create(cwd=str(monorepo)) as session:
        engine = ContextEngine(session, stable_source=context, tools=context.tools, time_zone=context.time_zone)
        turn = engine.prepare_turn("(the user's first message)")
    parts = turn.parts()
    stable = [(p.key, DEFAULT_ESTIMATOR.count(p.text), p.digest) for p in parts if p.stability is Stability.STABLE]
    shown = [(p["key"], p["tokens"], p["digest"]) for p in data["parts"] if p["stability"] == "stable"]
    assert shown == stable
    assert [p["key"] for p in data["parts"] if not p["key"].startswith("history.user.")] == [
        p.key for p in parts if not p.key.startswith("history.user.")
    ]
    # the budget is the sum over the listed parts
    assert data["total_tokens"] == sum(p["tokens"] for p in data["parts"])
    assert [t["name"] for t in data["tools"]] == [t.name for t in turn.tools]


@pytest.mark.slow
@pytest.mark.parametrize(("provider", "layout_format"), [("openai", "openai_chat"), ("sdk", "sdk_managed")])
def test_other_providers(monorepo: Path, provider: str, layout_format: str) -> None:
    data = report(str(monorepo), "--provider", provider)
    assert data["format"] == layout_format and data["cache_layout"]["breakpoints"] == []
    human = run(str(monorepo), "--provider", provider)
    assert human.exit_code == 0 and "Cache layout" in human.stdout


def test_mini_and_custom_presets(monorepo: Path, tmp_path: Path) -> None:
    mini = report(str(monorepo), "--preset", "mini")
    assert "system.tools_mini" in [p["key"] for p in mini["parts"]]
    assert mini["memory"]["status"] == "left out by the preset"
    preset = put(tmp_path, "preset.toml", 'base = "mini"\n[text]\nhouse_rules = "Answer in French."\n')
    custom = report(str(monorepo), "--custom-preset", str(preset))
    assert custom["preset"] == {
        "name": "custom",
        "source": str(preset),
        "sections": [*mini["preset"]["sections"], "house_rules"],
    }
    text = run(str(monorepo), "--custom-preset", str(preset), "--text")
    assert text.exit_code == 0 and "Answer in French." in text.stdout


def test_unknown_preset_is_an_error(monorepo: Path) -> None:
    result = run(str(monorepo), "--preset", "tiny")
    assert result.exit_code == 2
    assert result.stderr == "error: unknown system prompt preset 'tiny'; known presets: default, mini, custom\n"
    assert result.stdout == ""


def test_bad_custom_preset_and_bad_preferences_name_the_file_and_field(
    monorepo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    preset = put(tmp_path, "preset.toml", 'sections = ["tools", "nope"]\n')
    result = run(str(monorepo), "--custom-preset", str(preset))
    assert result.exit_code == 2
    assert f"error: custom preset {preset}: sections[1]: unknown section 'nope'" in result.stderr
    prefs = put(tmp_path, "bad-prefs.toml", 'time_zone = "Mars/Olympus"\n')
    monkeypatch.setenv("LAMINA_PREFERENCES", str(prefs))
    result = run(str(monorepo))
    assert result.exit_code == 2
    assert f"error: preferences {prefs}: time_zone: unknown time zone 'Mars/Olympus'" in result.stderr


def test_missing_folder_is_an_error(tmp_path: Path) -> None:
    result = run(str(tmp_path / "nowhere"))
    assert result.exit_code == 2 and "is not a folder" in result.stderr


def test_skills_and_sources_are_listed_with_their_cost(tmp_path: Path) -> None:
    skill = tmp_path / ".lamina" / "skills" / "deploy"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: deploy\ndescription: Deploy the service safely.\n---\nSteps.\n")
    source = tmp_path / "sources" / "status"
    source.mkdir(parents=True)
    (source / "source.toml").write_text(
        'kind = "api"\ndescription = "Status page API."\nbase_url = "http://127.0.0.1:9"\n'
        '[[endpoints]]\nname = "summary"\nmethod = "GET"\npath = "/summary"\ndescription = "Overall status."\n'
    )
    (source / "guide.md").write_text("# Status API\nCall summary first. " * 20)
    result = runner.invoke(app, ["context", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [s["name"] for s in data["skills"]["catalogue"]] == ["deploy"]
    assert data["sources"]["found"][0]["slug"] == "status" and data["sources"]["found"][0]["guide_tokens"] > 50
    catalogue = next(p for p in data["parts"] if p["key"] == "skills.catalogue")
    assert catalogue["stability"] == "stable" and catalogue["tokens"] > 0
    human = runner.invoke(app, ["context", str(tmp_path)])
    assert "skill deploy (workspace)" in human.stdout and "source status (api)" in human.stdout


def test_a_broken_gitignore_line_is_a_warning_and_the_report_goes_on(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    put(root, ".gitignore", "build\\\n[z-a\ngen/\n")
    put(root, "AGENTS.md", "Rules.\n")
    put(root, "gen/AGENTS.md", "generated\n")
    result = run(str(root))
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert 'line 1 left out ("build\\"): it ends in a lone backslash' in text
    assert 'line 2 left out ("[z-a"): git cannot use this pattern' in text
    assert "AGENTS.md" in text and "gen/AGENTS.md" not in text  # the other lines still apply
    data = report(str(root))
    assert [f["path"] for f in data["context_files"]["found"]] == ["AGENTS.md"]
    assert [s["path"] for s in data["context_files"]["skipped"]] == [".gitignore", ".gitignore"]


def test_the_preview_behind_chat_context_budgets_what_the_next_turn_sends_and_logs_nothing(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text("Run the tests.\n")
    context = WorkspaceContext(workspace, tools=default_tool_specs())
    with LocalSessionStore(tmp_path / "store").create(cwd=str(workspace)) as session:
        engine = ContextEngine(session, stable_source=lambda: tuple(context()), tools=context.tools, mode="ask")
        logged = len(session.entries())
        first = engine.preview_turn("hi")
        assert len(session.entries()) == logged
        turn = engine.prepare_turn("hi")
        assert budget_of_turn(first) == budget_of_turn(turn)
        engine.record(AssistantMessage(text="Hello."))
        engine.commit(turn)
        engine.settings.set_mode("execute")  # a one-shot waits in the outbox
        logged = len(session.entries())
        preview = engine.preview_turn("again")
        assert len(session.entries()) == logged and engine.pending_one_shots
        assert budget_of_turn(preview) == budget_of_turn(engine.prepare_turn("again"))
        assert budget_of_turn(preview).tokens(Tier.ONE_SHOT) > 0
