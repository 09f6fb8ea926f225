"""Branching: the engine moves to another point of the session's tree, and the context window there (I/O: the log)."""

from __future__ import annotations

import secrets

from lamina.engine import _compaction as steps
from lamina.engine._host import EngineHost
from lamina.errors import UsageError
from lamina.session import (
    BRANCH_SEED_HEADING,
    Branch,
    OutboxRecord,
    ToolCall,
    ToolResult,
    UserMessage,
    entry_kind,
    open_tool_calls,
    view_summary,
)


class BranchingMixin(EngineHost):
    """The branch and context-window methods of `ContextEngine`."""

    def window_calls(self) -> tuple[tuple[ToolCall, ToolResult], ...]:
        """The tool calls of the current context window with their results, in order.

        The window starts after the latest compaction and after the latest reset of the provider's
        own context (a fresh or compacted provider session): what the model still has in front of
        it, so reads made there still count (a branch replays them as its prerequisites met).
        """
        return self._view.window_calls()

    def in_view(self, entry_id: str) -> bool:
        """Whether an entry is still in the provider view (a branch from it keeps the exact context)."""
        return any(e.id == entry_id for e in self._view.entries)

    def branch(self, entry_id: str, *, seed: bool = False) -> Branch:
        """Branch the session at `entry_id` and switch the provider view to the branch at once.

        The abandoned path stays in the log; from now on what is sent is what the branch holds, and
        the conversation's state (pending one-shots, the plan, the skills in use) is the branch's
        own; the user's settings (permission mode, active sources) stay as last set. At a user
        message the branch starts just before it, as Claude Code's rewind does: the message is not
        on the branch (it would be left unanswered there) and its text comes back in
        `Branch.offered_text`, to send again or edit. With `seed` the branch seed is queued on the
        branch in the same durable line that creates it: a crash leaves the old leaf, or the branch
        with its seed. Call between turns.

        Args:
            entry_id: The entry to branch at.
            seed: Queue a hidden one-shot branch seed on the branch, for a provider that keeps its
                own transcript and cannot fork there.

        Returns:
            The branch, with the user message's text to offer again when it branched at one.

        Raises:
            UsageError: No such entry, or a user message that is the first entry of the log.
        """
        self._check_open()
        point = self.session.get(entry_id)
        abandoned = self.session.leaf_id
        was_in_view = self.in_view(entry_id) or (self._view.boundary is not None and self._view.boundary.id == entry_id)
        leaf_id = entry_id
        offered: str | None = None
        if isinstance(point, UserMessage):
            if point.parent_id is None:
                raise UsageError(f"entry {entry_id!r} is the session's first entry: there is nothing before it")
            leaf_id, offered = point.parent_id, point.typed or None
        view = self.session.view(leaf_id)  # walks back only to the branch's own latest compaction
        seed_id: str | None = None
        if seed:
            seed_id = "os_" + secrets.token_hex(6)
            text = view_summary(view, heading=BRANCH_SEED_HEADING, estimator=self.estimator)
            queued = OutboxRecord(part_id=seed_id, status="queued", kind="branch_seed", text=text, hidden=True)
            stamped = self.session.branch(leaf_id, first=queued)
            self._track_session_wide(stamped)
            self._rebuild_view()  # the seed's record is the leaf now
        else:
            self.session.branch(leaf_id)
            self._rebuild_view(view)
        return Branch(
            session_id=self.session.id,
            entry_id=entry_id,
            kind=entry_kind(point),
            leaf_id=self.session.leaf_id or leaf_id,
            abandoned_leaf_id=abandoned,
            in_view=was_in_view,
            strategy="seed" if seed else "log",
            view_entries=sum(isinstance(e, steps.CONVERSATION) for e in view.entries),
            summarised=view.boundary is not None,
            open_calls=open_tool_calls(view.entries),
            seed_id=seed_id,
            offered_text=offered,
        )
