"""`lamina context --session ID` and `lamina sessions budget ID`: reports of a stored session (I/O)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from lamina.cli._budget_tables import (
    budget_json,
    class_totals,
    decisions,
    decisions_json,
    misses_json,
    print_budget,
    print_classes,
    print_decisions,
    print_misses,
    section,
)
from lamina.cli._console import abort, out, print_json, safe
from lamina.cli._context_report import TARGETS
from lamina.context import Part
from lamina.errors import LaminaError, UsageError
from lamina.reports import (
    KINDS,
    BudgetReport,
    CacheMissReport,
    LoggedRequest,
    SessionComposition,
    budget_of_turn,
    logged_requests,
    session_json,
    session_misses,
)
from lamina.session import AssistantMessage, CostDecision, LogEntry, SessionLog
from lamina.tools import default_tool_specs
from lamina.workspace import WorkspaceContext

_KIND_HELP = {
    "system": "system prompt sections",
    "tools": "tool definitions",
    "project": "stable project parts (context files, memory, catalogues)",
    "defang": "untrusted labels, escapes and quote marks",
    "volatile": "volatile tails (date, session state, sources)",
    "one-shot": "one-shot parts (mode changes, stable updates, notices)",
    "framing": "tool-result framing (line numbers, notes, preview headers)",
    "tool results": "tool-result content",
    "tool calls": "the model's tool calls",
    "history": "the user's messages and the model's text",
    "reasoning": "the model's thinking and reasoning summaries, replayed",
    "summary": "compaction summary and pinned user's words",
}


_GROUPS = (
    ("system", "tools", "project", "defang"),
    ("volatile", "one-shot"),
    ("tool calls", "framing", "tool results"),
    ("history", "summary"),
    ("reasoning",),
)


def show_session(store_root: str | Path | None, session_id: str, *, as_json: bool) -> None:
    """The composition of a stored session's requests: tokens per component, per request and summed."""
    from lamina.cli._store_commands import open_named_store

    try:
        store = open_named_store(store_root)
        try:
            with store.open(session_id, writable=False) as session:
                path, cwd, data_dir = session.path(), session.info.cwd, session.shown_path("data")
                decided = decisions(session.entries())
                counted = _Counted.of(session.entries(), session.leaf_id)
        finally:
            store.close()
        workspace = WorkspaceContext(cwd if cwd and Path(cwd).is_dir() else ".", tools=default_tool_specs())
        requests = logged_requests(path, tools=workspace.tools, fallback_stable=workspace(), data_dir=str(data_dir))
    except UsageError as exc:
        abort(str(exc), 2)
    except LaminaError as exc:
        abort(str(exc))
    total = SessionComposition()
    for request in requests:
        total.add(request.composition)
    if as_json:
        print_json(
            {
                "session": session_id,
                "branch": counted.json(len(requests)),
                **session_json(total),
                "per_request": [
                    {"request": r.number, "turn": r.turn, "tokens": r.composition.total, **r.composition.by_kind()}
                    for r in requests
                ],
                "decisions": decisions_json(decided),
            }
        )
        return
    _print_session(session_id, requests, total)
    out.print(counted.words(len(requests)), highlight=False)
    print_decisions(decided)


@dataclass(frozen=True, slots=True)
class _Counted:
    """Which branch `context --session` counts (the session's current one) and what the log holds besides."""

    leaf_id: str | None
    branches: int
    log_requests: int

    @classmethod
    def of(cls, entries: Sequence[LogEntry], leaf_id: str | None) -> _Counted:
        parents = {e.parent_id for e in entries}
        leaves = sum(e.id not in parents for e in entries)
        return cls(leaf_id, leaves, sum(isinstance(e, AssistantMessage) for e in entries))

    def json(self, counted: int) -> dict[str, object]:
        return {
            "leaf_id": self.leaf_id,
            "branches": self.branches,
            "requests": counted,
            "log_requests": self.log_requests,
        }

    def words(self, counted: int) -> str:
        where = f"the current branch (leaf {safe(self.leaf_id or '-')})"
        if self.branches <= 1:
            return f"Counted: {where}, the session's only branch: {counted:,} requests."
        others = "the other branch is" if self.branches == 2 else f"the other {self.branches - 1:,} branches are"
        return f"Counted: {where}, {counted:,} of the log's {self.log_requests:,} requests; {others} not counted."


def show_session_budget(store_root: str | Path | None, session_id: str, *, as_json: bool) -> None:
    """The budget by tier of a stored session's next request (`Agent.budget()` for a session at rest)."""
    from lamina.cli._store_commands import read_session
    from lamina.reports import NEXT_MESSAGE

    parts, budget, decided, missed = read_session(store_root, session_id, _next_request)
    if as_json:
        stability = class_totals(parts)
        print_json(
            {
                "session": session_id,
                **budget_json(budget),
                "stability_classes": stability,
                "decisions": decisions_json(decided),
                "cache_misses": misses_json(missed),
            }
        )
        return
    out.print(f"[bold]Budget of the next request of session {safe(session_id)}[/bold]", highlight=False)
    print_budget(budget, note=f", with {safe(NEXT_MESSAGE)} standing for the user's message.")
    print_classes(parts)
    print_decisions(decided)
    print_misses(missed)


def _next_request(
    session: SessionLog,
) -> tuple[
    tuple[Part, ...],
    BudgetReport,
    list[tuple[str, CostDecision]],
    list[tuple[AssistantMessage, CacheMissReport]],
]:
    """A stored session's next request: its parts and budget, with the session's decisions and cache misses."""
    from lamina.cli._session import stored_session_engine
    from lamina.reports import NEXT_MESSAGE

    engine = stored_session_engine(session)
    turn = engine.preview_turn(NEXT_MESSAGE)
    attachments = engine.attachment_blocks(TARGETS["anthropic"][0])  # as `lamina context` renders
    parts = turn.parts(attachments=attachments)
    budget = budget_of_turn(turn, attachments=attachments)
    return parts, budget, decisions(session.entries()), session_misses(session.entries())


def _print_session(session_id: str, requests: list[LoggedRequest], total: SessionComposition) -> None:
    out.print(f"[bold]Request composition of session {safe(session_id)}[/bold]", highlight=False)
    out.print(
        f"{total.requests:,} model requests, {total.mean_request_tokens:,.0f} tokens each on average, "
        f"{total.first_request_tokens:,} in the first; {total.total:,} tokens sent in all. Tokens are estimates of "
        "the text (the JSON sent is a little larger); tool definitions are this Lamina's (the log does not keep "
        "them).",
        highlight=False,
    )
    if not requests:
        return
    section(
        "By kind",
        "Every token of a request counts in one kind. 'first' is the first request, 'all' the sum over every "
        "request (a part sent in 30 requests counts 30 times: that is what the provider reads).",
    )
    first, whole = requests[0].composition.by_kind(), total.by_kind()
    table = Table(box=None)
    table.add_column("kind", no_wrap=True)
    table.add_column("what", overflow="fold")
    table.add_column("first", justify="right", no_wrap=True)
    table.add_column("all", justify="right", no_wrap=True)
    table.add_column("share", justify="right", no_wrap=True)
    for kind in KINDS:
        share = whole[kind] / total.total if total.total else 0.0
        table.add_row(kind, _KIND_HELP[kind], f"{first[kind]:,}", f"{whole[kind]:,}", f"{share:.1%}")
    out.print(table)
    section("Components", "Each component over the session, largest first, and its tokens in the first request.")
    table = Table(box=None)
    table.add_column("kind", no_wrap=True)
    table.add_column("component", overflow="fold")
    table.add_column("first", justify="right", no_wrap=True)
    table.add_column("all", justify="right", no_wrap=True)
    for c in total.top(len(total.totals)):
        table.add_row(c.kind, safe(c.name), f"{total.first.get((c.kind, c.name), 0):,}", f"{c.tokens:,}")
    out.print(table)
    section(
        "Per request",
        "Tokens of each request: the stable prefix (system, tools, project parts and their labels), the tails "
        "(volatile and one-shot parts), tools (calls, results and their framing) and the conversation's text "
        "(messages, summary), and the model's reasoning replayed.",
    )
    table = Table(box=None)
    for column in ("#", "turn", "total", "stable", "tails", "tools", "text", "reasoning"):
        table.add_column(column, justify="right", no_wrap=True)
    for r in requests:
        kinds = r.composition.by_kind()
        groups = [sum(kinds[k] for k in group) for group in _GROUPS]
        table.add_row(str(r.number), str(r.turn), f"{r.composition.total:,}", *(f"{g:,}" for g in groups))
    out.print(table)
