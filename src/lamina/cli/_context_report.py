"""The report of `lamina context`: what an agent starting a session here would be sent, part by part (I/O)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from rich.table import Table

from lamina.agent import SkillCatalogue
from lamina.cli._budget_tables import (
    budget_json,
    class_totals,
    part_tokens,
    print_budget,
    print_classes,
    section,
    tier_label,
)
from lamina.cli._console import abort, err, out, print_json, safe
from lamina.compaction import CachePrices
from lamina.context import Part, Tier, TurnContext
from lamina.engine import ContextEngine
from lamina.errors import LaminaError, UsageError
from lamina.placement import (
    AnthropicTarget,
    OpenAIChatTarget,
    RenderTarget,
    SdkManagedTarget,
    render,
)
from lamina.reports import (
    TIER_LABELS,
    BudgetReport,
    CacheLayout,
    budget_of_turn,
    cache_layout,
    tool_tokens,
)
from lamina.session import LocalSessionStore
from lamina.sources import Source, SourceScan, find_sources, guide_path
from lamina.tokens import DEFAULT_ESTIMATOR
from lamina.tools import default_tool_specs
from lamina.workspace import ProjectMemory, SkillScan, SkippedPath, WorkspaceContext, WorkspaceSnapshot

FIRST_MESSAGE = "(the user's first message)"
"""Stands for the user's text: the report is about everything around it."""


TARGETS: dict[str, tuple[RenderTarget, str]] = {  # keyed by `lamina.cli._context.Provider`'s values
    "anthropic": (AnthropicTarget(model="claude-sonnet-5"), "Anthropic Messages"),
    "openai": (OpenAIChatTarget(model="gpt-5"), "OpenAI Chat Completions"),
    "sdk": (SdkManagedTarget(), "an SDK-managed backend (Claude Agent SDK)"),
}


def show_context(
    path: Path,
    provider: str,
    preset: str | None,
    custom_preset: Path | None,
    *,
    show_text: bool,
    as_json: bool,
) -> None:
    """Show what a new session here would send: parts, tiers, tokens, context files and cache layout."""
    name = preset if preset is not None else "custom" if custom_preset is not None else "default"
    try:
        workspace = WorkspaceContext(path, preset=name, custom_preset=custom_preset, tools=default_tool_specs())
        with _progress(enabled=not as_json) as progress:
            snapshot = workspace.snapshot(progress=progress)
        target, described = TARGETS[provider]
        catalogue = SkillCatalogue(workspace.root)
        sources = find_sources(workspace.root)
        turn, request = _first_turn(workspace, catalogue, target)
        layout = cache_layout(request, target, turn=turn)
    except UsageError as exc:
        abort(str(exc), 2)
    except LaminaError as exc:
        abort(str(exc))
    budget = budget_of_turn(turn)
    if as_json:
        document = _document(snapshot, workspace, turn, layout, budget, provider, show_text=show_text)
        print_json({**document, **_skills_and_sources_json(catalogue.scan, sources)})
        return
    _print_report(snapshot, workspace, turn, layout, budget, described)
    _print_skills_and_sources(catalogue.scan, sources)
    if show_text:
        _print_texts(turn)


@contextmanager
def _progress(*, enabled: bool) -> Iterator[Callable[[int], None] | None]:
    """A spinner on stderr while large trees are scanned, only when stderr is a terminal."""
    if not (enabled and err.is_terminal):
        yield None
        return
    with err.status("Looking for project context files…") as status:

        def update(folders: int) -> None:
            status.update(f"Looking for project context files… {folders:,} folders so far")

        yield update


def _first_turn(
    workspace: WorkspaceContext, catalogue: SkillCatalogue, target: RenderTarget
) -> tuple[TurnContext, Any]:
    """The first turn of a fresh session, prepared by a real engine over a throwaway store."""
    with (
        tempfile.TemporaryDirectory(prefix="lamina-context-") as folder,
        LocalSessionStore(folder).create(cwd=str(workspace.root)) as session,
    ):
        engine = ContextEngine(
            session,
            stable_source=lambda: (*workspace(), *catalogue.parts()),
            tools=workspace.tools,
            time_zone=workspace.time_zone,
            prices=partial(CachePrices.for_target, target),  # the first turn's TTL decided as that provider's would be
        )
        turn = engine.prepare_turn(FIRST_MESSAGE)
        return turn, render(turn, target)


def _tokens(text: str) -> int:
    return DEFAULT_ESTIMATOR.count(text)


def _turn_parts(turn: TurnContext) -> tuple[Part, ...]:
    """Every part of the request, in request order: what the renderers build its blocks from."""
    return turn.parts()


# --- JSON ----------------------------------------------------------------------------------------------


def _document(
    snapshot: WorkspaceSnapshot,
    workspace: WorkspaceContext,
    turn: TurnContext,
    layout: CacheLayout,
    budget: BudgetReport,
    provider: str,
    *,
    show_text: bool,
) -> dict[str, Any]:
    scan, preset = snapshot.scan, snapshot.preset
    inlined = frozenset(snapshot.inlined)
    return {
        "root": snapshot.root,
        "preset": {"name": preset.name, "source": preset.source, "sections": preset.sections},
        "provider": str(provider),
        "format": layout.format,
        "parts": [
            {
                "key": p.key,
                "tier": int(p.tier),
                "tier_name": TIER_LABELS[p.tier],
                "stability": p.stability.value,
                "authority": p.authority.value,
                "provenance": p.provenance,
                "tokens": part_tokens(p),
                "digest": p.digest,
                **({"text": p.text} if show_text else {}),
            }
            for p in _turn_parts(turn)
        ],
        "tools": [{"name": t.name, "tokens": tool_tokens(t)} for t in turn.tools],
        "context_files": {
            "found": [
                {"path": f.relative, "size": f.size, "truncated": f.truncated, "inlined": f.relative in inlined}
                for f in scan.files
            ],
            "skipped": [{"path": s.relative, "reason": s.reason} for s in scan.skipped],
            "omitted_over_cap": scan.omitted_over_cap,
            "scanned_dirs": scan.scanned_dirs,
        },
        "memory": _memory_json(snapshot.memory, included=preset.memory),
        "project": _project_json(snapshot),
        "preferences": {
            "file": workspace.preferences_file,
            "set": [f for f in ("name", "time_zone", "city", "notes") if getattr(snapshot.preferences, f)],
        },
        "cache_layout": layout,
        **budget_json(budget),
        "stability_classes": class_totals(turn.parts()),
    }


def _project_json(snapshot: WorkspaceSnapshot) -> dict[str, Any] | None:
    project, problem = snapshot.project, snapshot.project_problem
    if problem is not None:
        return {"status": "skipped", "file": problem.path, "field": problem.field, "reason": problem.problem}
    if project is None:
        return None
    return {
        "status": "loaded",
        "file": project.path,
        "description": project.description,
        "paths": [{"path": path, "note": note} for path, note in project.paths],
    }


def _memory_json(memory: ProjectMemory | SkippedPath | None, *, included: bool) -> dict[str, Any]:
    if memory is None:
        return {"status": "none"}
    if isinstance(memory, SkippedPath):
        return {"status": "skipped", "path": memory.path, "reason": memory.reason}
    return {
        "status": "loaded" if included else "left out by the preset",
        "path": memory.path,
        "tokens": _tokens(memory.text),
        "truncated": memory.truncated,
        "kept_lines": memory.kept_lines,
        "total_lines": memory.total_lines,
    }


# --- the report ------------------------------------------------------------------------------------------


def _print_report(
    snapshot: WorkspaceSnapshot,
    workspace: WorkspaceContext,
    turn: TurnContext,
    layout: CacheLayout,
    budget: BudgetReport,
    described: str,
) -> None:
    preset = snapshot.preset
    preset_name = preset.name if preset.source == "lamina" else f"{preset.name} ({preset.source})"
    out.print(f"[bold]Context for {safe(str(snapshot.root))}[/bold]", highlight=False)
    out.print(
        f"The first turn of a new session with the {safe(preset_name)} preset, rendered for {described}. "
        "Tokens are estimates.",
        highlight=False,
    )
    _print_parts(turn)
    _print_context_files(snapshot)
    _print_memory_and_preferences(snapshot, workspace)
    _print_layout(layout)
    print_budget(budget)


def _print_parts(turn: TurnContext) -> None:
    section(
        "Parts",
        "Every part of the request in the order it is sent, with its stability class: stable parts (tool "
        "definitions, rules, project files) form the cached prefix and keep their bytes from turn to turn; "
        "compactable parts (the conversation) are summarised by a compaction; on_demand parts are documents the "
        "model read; volatile parts ride in the tail of the user's message, as sent; one-shot parts are sent "
        "exactly once.",
    )
    table = Table(box=None)
    table.add_column("#", justify="right")
    table.add_column("part", overflow="ellipsis")  # a narrow terminal cuts a long id, never the table
    table.add_column("tier", no_wrap=True)
    table.add_column("stability", no_wrap=True)
    table.add_column("provenance", overflow="fold")
    table.add_column("tokens", justify="right", no_wrap=True)
    for i, part in enumerate(_turn_parts(turn), 1):
        table.add_row(
            str(i),
            safe(part.key),
            tier_label(part.tier),
            part.stability.value,
            safe(part.provenance),
            f"{part_tokens(part):,}",
        )
    out.print(table)
    names = ", ".join(t.name for t in turn.tools) or "none"
    total = sum(tool_tokens(t) for t in turn.tools)
    out.print(f"Tools: {safe(names)} ({total:,} tokens, tier {tier_label(Tier.CATALOGUE)})", highlight=False)
    print_classes(turn.parts())


def _print_context_files(snapshot: WorkspaceSnapshot) -> None:
    scan = snapshot.scan
    section(
        "Project context files",
        f"AGENTS.md and CLAUDE.md files, shallowest first ({scan.scanned_dirs:,} folders scanned). The prompt lists "
        "them and tells the agent to read the nearest ones; root files that fit the budget are shown in full.",
    )
    if scan.files:
        inlined = frozenset(snapshot.inlined)
        table = Table(box=None)
        table.add_column("file", overflow="fold")
        table.add_column("bytes", justify="right", no_wrap=True)
        table.add_column("in the prompt")
        for f in scan.files:
            shown = "shown in full" if f.relative in inlined else "listed"
            if f.truncated:
                shown += f" (over {len(f.text.encode()):,} bytes: truncated when read)"
            table.add_row(safe(f.relative), f"{f.size:,}", shown)
        out.print(table)
    else:
        out.print("none found")
    if scan.omitted_over_cap:
        out.print(f"{scan.omitted_over_cap:,} more found but not listed: the cap was reached.", highlight=False)
    if scan.skipped:
        out.print("Skipped (not listed in the prompt):")
        table = Table(box=None)
        table.add_column("path", overflow="fold")
        table.add_column("reason", overflow="fold")
        for s in scan.skipped:
            table.add_row(safe(s.relative), safe(s.reason))
        out.print(table)


def _print_memory_and_preferences(snapshot: WorkspaceSnapshot, workspace: WorkspaceContext) -> None:
    section("Memory and preferences", "MEMORY.md at the root (its top is kept) and the user's preferences.")
    memory = snapshot.memory
    if memory is None:
        out.print("Memory: none (no MEMORY.md at the root)")
    elif isinstance(memory, SkippedPath):
        out.print(f"Memory: MEMORY.md skipped: {safe(memory.reason)}", highlight=False)
    elif not snapshot.preset.memory:
        out.print(f"Memory: MEMORY.md found, but the {safe(snapshot.preset.name)} preset leaves it out")
    else:
        cut = f", cut to the first {memory.kept_lines:,} lines" if memory.truncated else ""
        out.print(f"Memory: MEMORY.md, {_tokens(memory.text):,} tokens kept{cut}", highlight=False)
    project, problem = snapshot.project, snapshot.project_problem
    if problem is not None:
        skipped = "[yellow]Project manifest: .lamina/project.toml skipped:[/yellow]"
        out.print(f"{skipped} {safe(str(problem))}", highlight=False)
    elif project is None:
        out.print("Project manifest: none (no .lamina/project.toml)")
    else:
        described = "a description and " if project.description else ""
        out.print(
            f"Project manifest: .lamina/project.toml, {described}{len(project.paths):,} important paths "
            "(part project.manifest)",
            highlight=False,
        )
    fields = [f.replace("_", " ") for f in ("name", "time_zone", "city", "notes") if getattr(snapshot.preferences, f)]
    where = workspace.preferences_file
    if fields:
        out.print(f"Preferences: {', '.join(fields)} from {safe(str(where))}", highlight=False)
    elif where is not None:
        out.print(f"Preferences: none set ({safe(str(where))} does not exist or is empty)", highlight=False)
    else:
        out.print("Preferences: none set")


def _print_layout(layout: CacheLayout) -> None:
    section(
        "Cache layout",
        "The request block by block, in the order the provider reads it; 'prefix' counts the tokens up to and "
        "including the block. Cache 'stable': the cached prefix every later turn reads; 'rolling': cached for the "
        "next request; 'uncached': sent at full price.",
    )
    numbers = {b.position: i for i, b in enumerate(layout.breakpoints, 1)}
    table = Table(box=None)
    table.add_column("#", justify="right")
    table.add_column("block", no_wrap=True)
    table.add_column("holds")
    table.add_column("tokens", justify="right", no_wrap=True)
    table.add_column("prefix", justify="right", no_wrap=True)
    table.add_column("cache", no_wrap=True)
    table.add_column("breakpoint", no_wrap=True)
    for block in layout.blocks:
        mark = f"◀ {numbers[block.position]} ({block.breakpoint})" if block.breakpoint is not None else ""
        table.add_row(
            str(block.position),
            safe(block.where.replace("].content[", "][").replace(".content", "")),
            safe(block.label),
            f"{block.tokens:,}",
            f"{block.cumulative:,}",
            block.region,
            mark,
        )
    out.print(table)
    for note in layout.notes:
        out.print(f"- {safe(note)}", highlight=False)


def _print_texts(turn: TurnContext) -> None:
    for part in _turn_parts(turn):
        out.print()
        out.rule(f"{safe(part.key)} ({part.stability.value}, {safe(part.provenance)})")
        out.print(safe(part.text))


# --- skills and sources ------------------------------------------------------------------------------


def _guide_tokens(source: Source) -> int | None:
    try:
        return _tokens(guide_path(source).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


def _skills_and_sources_json(skills: SkillScan, sources: SourceScan) -> dict[str, Any]:
    return {
        "skills": {
            "catalogue": [{"name": s.name, "scope": s.scope, "path": s.path} for s in skills.skills],
            "shadowed": [{"name": s.name, "path": s.path} for s in skills.shadowed],
            "problems": [str(p) for p in skills.problems],
        },
        "sources": {
            "found": [
                {"slug": s.slug, "kind": s.kind, "description": s.description, "guide_tokens": _guide_tokens(s)}
                for s in sources.sources
            ],
            "problems": [str(p) for p in sources.problems],
        },
    }


def _print_skills_and_sources(skills: SkillScan, sources: SourceScan) -> None:
    section(
        "Skills and sources",
        "Only the skill catalogue is in the prompt; a \\[skill:name] mention makes the agent read that SKILL.md first. "
        "A source's guide is read on demand before its tools' first use; its tokens are paid only then.",
    )
    for skill in skills.skills:
        out.print(f"  skill {safe(skill.name)} ({skill.scope}): {safe(str(skill.path))}", highlight=False)
    for skill in skills.shadowed:
        out.print(f"  [dim]shadowed: {safe(skill.name)} at {safe(str(skill.path))}[/dim]", highlight=False)
    for problem in skills.problems:
        out.print(f"  [yellow]skipped skill:[/yellow] {safe(str(problem))}", highlight=False)
    for source in sources.sources:
        guide = _guide_tokens(source)
        cost = f"guide {guide:,} tokens on demand" if guide is not None else "guide unreadable"
        out.print(f"  source {safe(source.slug)} ({source.kind}): {safe(source.description)}; {cost}", highlight=False)
    for source_problem in sources.problems:
        out.print(f"  [yellow]skipped source:[/yellow] {safe(str(source_problem))}", highlight=False)
    if not (skills.skills or skills.problems or sources.sources or sources.problems):
        out.print("  none (skills live in .lamina/skills/<name>/SKILL.md, sources in sources/<slug>/)")
