"""`lamina sessions …`: list, show, branch, compact, export, import, check and repair sessions of the store."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final

import typer
from rich.table import Table

from lamina.cli._console import JsonOption, abort, err, out, print_json, safe, warn
from lamina.errors import LaminaError
from lamina.session import (
    AssistantMessage,
    LocalSessionStore,
    LogEntry,
    OutboxRecord,
    SessionHealth,
    SessionStore,
    SessionSummary,
    TurnRecord,
    UserMessage,
    check_session,
    check_store,
    describe_entry,
    is_hidden,
    repair_session,
)

if TYPE_CHECKING:
    from lamina.engine import RecordedSettings

app = typer.Typer(help="List, show and manage stored sessions.", no_args_is_help=True)


def _store(ctx: typer.Context) -> SessionStore:
    from lamina.cli._store_commands import store_or_abort

    return store_or_abort(ctx)


def _no_sessions(store: SessionStore) -> str:
    """What an empty list says: a folder that does not exist is named (a mistyped `--store`)."""
    if isinstance(store, LocalSessionStore) and not store.root.exists():
        return f"no sessions: the store folder {store.root} does not exist (check --store or LAMINA_STORE)"
    return "no sessions"


def _local_store(ctx: typer.Context, command: str) -> LocalSessionStore:
    """The JSONL store (check and repair read its files); a clear error for any other store."""
    store = _store(ctx)
    if not isinstance(store, LocalSessionStore):
        abort(f"`sessions {command}` checks the files of a JSONL store; {safe(store.location)} is not one", code=2)
    return store


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "-"


@app.command("list")
def list_sessions(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """List sessions, newest first (reads metadata only)."""
    store = _store(ctx)
    try:
        rows = [r for r in store.list() if _listed(r)]
    except LaminaError as exc:
        abort(str(exc))
    if as_json:
        print_json({"sessions": rows})
        return
    if not rows:
        out.print(safe(_no_sessions(store)))
        return
    table = Table("id", "updated", "entries", "title", box=None)
    for r in rows:
        title = f"[red]{safe(r.problem)}[/red]" if r.problem else safe(r.title)
        table.add_row(safe(r.id), _when(r.updated_at), str(r.entry_count), title)
    out.print(table)


DETAIL_CHARS: Final = 200
"""Characters of an entry's text that `show` prints (a user's or the assistant's message is printed whole)."""


def _describe(entry: LogEntry) -> str:
    """One line of markup for an entry (`describe_entry`'s words); every field from the log is escaped with `safe`."""
    words = describe_entry(entry)
    whole = isinstance(entry, UserMessage | AssistantMessage)
    detail = words.detail if whole else words.detail[:DETAIL_CHARS]
    match entry:
        case OutboxRecord(hidden=True):
            title = f"{safe(words.title)} [dim](hidden bridge)[/dim]"
        case TurnRecord(volatile=volatile, one_shots=one_shots):
            title = f"{safe(words.title)} tail: {', '.join(safe(p.key) for p in (*volatile, *one_shots)) or '-'}"
        case _:
            title = safe(words.title)
    line = f"{title}: {safe(detail)}" if detail else title
    if isinstance(entry, AssistantMessage) and entry.usage is not None:
        u = entry.usage
        line += f"  [dim](in {u.input}, out {u.output}, cache read {u.cache_read})[/dim]"
    return line


@app.command("show")
def show(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(help="The session id (see `lamina sessions list`).")],
    full: Annotated[bool, typer.Option("--full", help="Every entry of the log, not only the leaf's path.")] = False,
    tree: Annotated[bool, typer.Option("--tree", help="Draw the whole log as a tree of its branches.")] = False,
    show_all: Annotated[
        bool,
        typer.Option("--all", help="Also the hidden one-shot bridges (recovery, branch seed, transfer summary)."),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Show a session: its metadata and the path to its leaf (or the whole log with --full).

    Hidden one-shot bridges (context Lamina rebuilt for the model after a failed resume, a branch
    or a transfer) are left out unless --all is given.
    """
    try:
        with _store(ctx).open(session_id, writable=False) as session:
            entries = session.entries() if full or tree else session.path()
            meta, report, leaf = session.info, session.report, session.leaf_id
            on_path = {e.id for e in session.path()} if tree else set()
    except LaminaError as exc:
        abort(str(exc))
    if not show_all:
        entries = [e for e in entries if not is_hidden(e)]
    if tree and not as_json:
        for problem in report.messages():
            warn(problem)
        out.print(f"[bold]{safe(meta.id)}[/bold]  {safe(meta.title)}")
        for line in _tree_lines(entries, on_path, leaf):
            out.print(line)
        return
    if as_json:
        print_json({"meta": meta, "leaf_id": leaf, "problems": report.messages(), "entries": entries})
        return
    for problem in report.messages():
        warn(problem)
    out.print(f"[bold]{safe(meta.id)}[/bold]  {safe(meta.title)}")
    out.print(
        f"cwd {safe(meta.cwd or '-')}  created {_when(meta.created_at)}  entries {len(entries)}  leaf {safe(leaf)}"
    )
    if meta.forked_from:
        out.print(f"forked from {safe(meta.forked_from.session_id)} at {safe(meta.forked_from.entry_id)}")
    for entry in entries:
        out.print(f"[dim]{safe(entry.id)}[/dim] {_describe(entry)}")


def _tree_lines(entries: list[LogEntry], on_path: set[str], leaf: str | None) -> list[str]:
    """The log as a tree: a chain stays in one column, each branch point indents its children.

    Turn records are left out (their children hang where they would); `*` marks the leaf's path.
    """
    parent = {e.id: e.parent_id for e in entries}
    skipped = {e.id for e in entries if isinstance(e, TurnRecord)}
    children: dict[str | None, list[LogEntry]] = {}
    for entry in entries:
        if entry.id in skipped:
            continue
        up = entry.parent_id
        while up is not None and up in skipped:
            up = parent[up]
        children.setdefault(up if up in parent else None, []).append(entry)
    lines: list[str] = []
    stack: list[tuple[LogEntry, str, str]] = [(e, "", "") for e in reversed(children.get(None, []))]
    while stack:
        node, lead, rest = stack.pop()
        mark = "[bold]*[/bold]" if node.id in on_path else " "
        here = " [bold](leaf)[/bold]" if node.id == leaf else ""
        text = " ".join(_describe(node).split())  # one line per entry, so the tree's columns hold
        lines.append(f"{lead}{mark} [dim]{safe(node.id)}[/dim] {text}{here}")
        kids = children.get(node.id, [])
        if len(kids) == 1:
            stack.append((kids[0], rest, rest))
            continue
        for index in range(len(kids) - 1, -1, -1):
            last = index == len(kids) - 1
            stack.append((kids[index], rest + ("└─" if last else "├─"), rest + ("  " if last else "│ ")))
    return lines


@app.command("branch")
def branch(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(help="The session id (see `lamina sessions list`).")],
    entry_id: Annotated[str, typer.Argument(help="The entry to branch from (see `lamina sessions show ID --tree`).")],
    seed: Annotated[
        bool,
        typer.Option("--seed", help="Queue a one-shot branch seed (for a backend that keeps its own transcript)."),
    ] = False,
    wait: Annotated[float, typer.Option("--wait", help="Seconds to wait for a writer holding the session.")] = 0.0,
    as_json: JsonOption = False,
) -> None:
    """Branch a session at an entry: its next turn continues from there (the old path stays in the log).

    At a user message the branch starts just before it and the message's text is printed, to send
    again or edit.
    """
    from lamina.engine import ContextEngine

    try:
        with _store(ctx).open(session_id, wait=wait) as session:
            created = ContextEngine(session, stable_source=lambda: ()).branch(entry_id, seed=seed)
    except LaminaError as exc:
        abort(str(exc))
    if as_json:
        print_json({**dataclasses.asdict(created), "note": created.note})
        return
    out.print(f"branched {safe(created.session_id)} at {safe(created.entry_id)}; new leaf {safe(created.leaf_id)}")
    out.print(safe(created.note))
    if created.offered_text is not None:  # the message is not on the branch: here it is, to send again or edit
        out.print("your message, to send again or edit:")
        out.print(safe(created.offered_text))


@app.command("export")
def export(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(help="The session id (see `lamina sessions list`).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The bundle file to write (a zip).")],
    as_json: JsonOption = False,
) -> None:
    """Write a session as one bundle: log, metadata, files, a transfer summary, every sha256 in a manifest."""
    from lamina.session import export_session

    try:
        with err.status("exporting…") if err.is_terminal else contextlib.nullcontext():
            result = export_session(_store(ctx), session_id, output)
    except LaminaError as exc:
        abort(str(exc))
    if as_json:
        print_json(result)
        return
    transcript = "with" if result.provider_transcript else "without"
    out.print(
        f"exported {safe(result.session_id)} to {safe(result.path)}: {result.files} files, "
        f"{result.bytes:,} bytes, {transcript} a provider transcript"
    )


@app.command("import")
def import_(
    ctx: typer.Context,
    bundle: Annotated[Path, typer.Argument(help="The bundle file (from `lamina sessions export`).")],
    cwd: Annotated[
        Path | None, typer.Option("--cwd", help="The session's workspace here (default: the current directory).")
    ] = None,
    keep_id: Annotated[bool, typer.Option("--keep-id", help="Keep the session's id (it must be free here).")] = False,
    as_json: JsonOption = False,
) -> None:
    """Import a bundle as a new session: every checksum is verified before anything is written."""
    from lamina.session import import_session

    workspace = (cwd or Path.cwd()).absolute()
    store = _store(ctx)
    try:
        with err.status("importing…") if err.is_terminal else contextlib.nullcontext():
            result = import_session(store, bundle, cwd=workspace, keep_id=keep_id)
        recorded = _bundle_settings(store, result.session_id)
    except LaminaError as exc:
        abort(str(exc))
    if as_json:
        print_json({**dataclasses.asdict(result), "bundle_settings": recorded})
        return
    out.print(
        f"imported {safe(result.source_session_id)} as {safe(result.session_id)} "
        f"({result.files} files, workspace {safe(result.cwd)})"
    )
    if result.transfer_summary_id is not None:
        out.print("no provider transcript came along: the first turn carries a one-shot transfer summary")
    if recorded is not None:
        from lamina.cli._session import bundle_note

        out.print(safe(bundle_note(recorded)))


def _bundle_settings(store: SessionStore, session_id: str) -> RecordedSettings | None:
    """The settings an imported session's bundle recorded, which the import did not adopt (None: it recorded none)."""
    from lamina.cli._session import session_settings

    recorded = session_settings(store, session_id).imported
    return None if recorded is None else dataclasses.replace(recorded, imported=None)


@app.command("compact")
def compact(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(help="The session id (see `lamina sessions list`).")],
    focus: Annotated[str | None, typer.Option("--focus", help="What the summary should concentrate on.")] = None,
    wait: Annotated[float, typer.Option("--wait", help="Seconds to wait for a writer holding the session.")] = 150.0,
    model: Annotated[
        str | None,
        typer.Option("--model", help="Summarise with this model (provider spec); default: no model, deterministic."),
    ] = None,
    keep_tokens: Annotated[int, typer.Option("--keep-tokens", help="Recent tokens kept verbatim.")] = 20_000,
    force: Annotated[
        bool,
        typer.Option("--force", help="Compact even a conversation that fits --keep-tokens: all of it is summarised."),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Compact a session's provider view now (the log keeps everything); `--force` even a short one."""
    from lamina.cli._session import stored_session_engine
    from lamina.compaction import DeterministicSummariser, ProviderSummariser, Summariser
    from lamina.engine import ContextEngine
    from lamina.errors import UsageError
    from lamina.providers import provider_from_spec

    try:
        summariser: Summariser = (
            ProviderSummariser(provider_from_spec(model), session_id=session_id)
            if model is not None
            else DeterministicSummariser()
        )
        with _store(ctx).open(session_id, wait=wait) as session:
            try:  # the stable parts and tools count in the tokens before and after
                engine = stored_session_engine(session)
            except UsageError as exc:
                warn(f"the tokens before and after leave out the stable parts and tools: {exc}")
                engine = ContextEngine(session, stable_source=lambda: ())
            with err.status("compacting…") if err.is_terminal else contextlib.nullcontext():
                outcome = asyncio.run(
                    engine.compactor.compact(
                        summariser, trigger="manual", focus=focus, keep_tokens=keep_tokens, force=force
                    )
                )
    except LaminaError as exc:
        abort(str(exc))
    if as_json:
        print_json(
            {
                "status": outcome.status,
                "message": outcome.message,
                "tokens_before": outcome.tokens_before,
                "tokens_after": outcome.tokens_after,
                "boundary_id": outcome.boundary.id if outcome.boundary else None,
            }
        )
        return
    out.print(safe(outcome.message))


@app.command("budget")
def budget(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(help="The session id (see `lamina sessions list`).")],
    as_json: JsonOption = False,
) -> None:
    """The budget by tier of a session's next request, as `lamina context` shows it for a new one."""
    from lamina.cli._session_report import show_session_budget

    show_session_budget((ctx.find_root().obj or {}).get("store"), session_id, as_json=as_json)


def _listed(row: SessionSummary) -> bool:
    from lamina.cli._session import is_listed

    return is_listed(row)


@app.command("delete")
def delete(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(help="The session id (see `lamina sessions list`).")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a session: its log, metadata and data folder (refused while it is open elsewhere)."""
    from lamina.cli._session import delete_session

    store = _store(ctx)
    try:
        with store.open(session_id, writable=False) as session:
            meta = session.info
    except LaminaError as exc:
        abort(str(exc))
    if not yes:
        title = meta.title or "(no messages)"
        err.print(f"delete session {safe(meta.id)}: {safe(title)} ({meta.entry_count} entries)?", end=" ")
        if not typer.confirm("", default=False, err=True, prompt_suffix=""):
            abort("not deleted", code=1)
    try:
        delete_session(store, session_id)
    except (LaminaError, OSError) as exc:
        abort(f"cannot delete {session_id}: {exc}")
    out.print(f"deleted {safe(session_id)}")


# -- check and repair (kept apart from the other commands) ------------------------------------


@app.command("check")
def check(
    ctx: typer.Context,
    session_id: Annotated[str | None, typer.Argument(help="The session id; or --all.")] = None,
    check_all: Annotated[bool, typer.Option("--all", help="Check every session of the store.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Check sessions like `git fsck`: torn tails, skipped lines, broken links, stale metadata and locks.

    Changes nothing. Exit status 1 when a log is damaged (`lamina sessions repair ID` mends it).
    """
    if (session_id is None) == (not check_all):
        abort("give one session id, or --all")
    store = _local_store(ctx, "check")
    try:
        rows = check_store(store) if check_all else [check_session(store, session_id or "")]
    except LaminaError as exc:
        abort(str(exc))
    damaged = any(row.damaged for row in rows)
    if as_json:
        print_json({"ok": not damaged, "sessions": [_health_json(row) for row in rows]})
    else:
        if not rows:
            out.print(safe(_no_sessions(store)))
        for row in rows:
            _print_health(row)
    if damaged:
        raise typer.Exit(1)


def _health_json(row: SessionHealth) -> dict[str, object]:
    return {"id": row.id, "ok": row.ok, "damaged": row.damaged, "entries": row.entries, "findings": row.findings}


def _print_health(row: SessionHealth) -> None:
    if not row.findings:
        out.print(f"{row.id}: ok ({row.entries} entries)", markup=False, highlight=False)
        return
    for f in row.findings:
        where = f.file
        if f.line is not None:
            where += f":{f.line}"
        if f.offset is not None:
            where += f" (byte {f.offset})"
        out.print(f"{row.id}: {f.severity} {f.kind} {where}: {f.message}", markup=False, highlight=False)


@app.command("repair")
def repair(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(help="The session id (see `lamina sessions check --all`).")],
    wait: Annotated[float, typer.Option("--wait", help="Seconds to wait for a writer holding the session.")] = 0.0,
    as_json: JsonOption = False,
) -> None:
    """Rewrite a clean log beside the damaged one and swap it in atomically (the original is kept)."""
    try:
        result = repair_session(_local_store(ctx, "repair"), session_id, wait=wait)
    except LaminaError as exc:
        abort(str(exc))
    if as_json:
        kept = result.original_kept_in.name if result.original_kept_in else None
        print_json({"id": result.id, "changes": list(result.changes), "original_kept_in": kept})
        return
    if not result.changes:
        out.print(f"{result.id}: nothing to repair", markup=False, highlight=False)
    for change in result.changes:
        out.print(f"{result.id}: {change}", markup=False, highlight=False)
