"""SubmitPlan: hand a plan to the user for approval and end the turn (I/O: disk).

The plan is a file (usually written in the session's plans folder first) or its text, which is
then saved in the plans folder. The tool records the plan with the session (a durable
`submitted` state, see `lamina.engine`) and ends the turn: the user accepts it, accepts it with a
compaction first, or rejects it with feedback. It changes nothing in the workspace, so it runs in
every permission mode.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
from pathlib import Path
from typing import Final

import msgspec

from lamina.errors import LaminaError, UsageError
from lamina.session import VIRTUAL_ROOT
from lamina.tools._base import StructTool, ToolContext, ToolOutput, located
from lamina.tools._write import replace_file

MAX_PLAN_BYTES: Final = 256 * 1024
_SLUG: Final = re.compile(r"[^a-z0-9]+")


class SubmitPlanInput(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    title: str
    path: str | None = None
    """The plan's file; when given, it is the plan."""
    text: str | None = None
    """The plan's text, when there is no file (it is saved in the plans folder)."""


class SubmitPlanTool(StructTool[SubmitPlanInput]):
    """Submits a plan for the user's approval and ends the turn."""

    name = "SubmitPlan"
    description = "Submit your plan (a file in the plans folder, or its text) for the user's approval; ends your turn."
    read_only = True  # it writes only the session's own plans folder
    input_type = SubmitPlanInput

    def paths(self, input: SubmitPlanInput) -> tuple[Path, ...]:
        return (Path(input.path),) if input.path else ()

    async def run(self, input: SubmitPlanInput, ctx: ToolContext) -> ToolOutput:
        if ctx.submit_plan is None or ctx.plans_dir is None:
            return ToolOutput("Plans cannot be submitted in this session.", is_error=True)
        if not input.title.strip():
            return ToolOutput("Give the plan a short title.", is_error=True)
        saved = await asyncio.to_thread(_plan_file, input, ctx, ctx.plans_dir)
        if isinstance(saved, ToolOutput):
            return saved
        path, text = saved
        shown = ctx.display(path)
        if ctx.files is not None and path.is_relative_to(ctx.plans_dir):  # the session keeps it (every host)
            name = "plans/" + path.relative_to(ctx.plans_dir).as_posix()
            try:
                await asyncio.to_thread(ctx.files.put_file, name, text.encode("utf-8", errors="surrogatepass"))
            except (OSError, LaminaError) as exc:
                return ToolOutput(f"Cannot save the plan: {exc}", is_error=True)
            if (where := ctx.files.shown_path(name)).startswith(VIRTUAL_ROOT):  # not a local path: shown as stored
                path, shown = Path(where), where
        try:
            plan_id = ctx.submit_plan(input.title, str(path), text)
        except UsageError as exc:
            return ToolOutput(f"The plan was not submitted: {exc}", is_error=True)
        return ToolOutput(
            f"Plan {plan_id} submitted ({shown}). Stop here: the user will accept or reject it.",
            ends_turn=True,
        )


def _plan_file(input: SubmitPlanInput, ctx: ToolContext, plans_dir: Path) -> tuple[Path, str] | ToolOutput:
    """The plan's file and text: the file read, or the text saved in the plans folder."""
    if input.path:
        path = ctx.path(input.path)
        try:
            with located(ctx, path) as where, os.fdopen(where.open(), "rb") as handle:
                data = handle.read(MAX_PLAN_BYTES + 1)
        except OSError as exc:
            return ToolOutput(f"Cannot read the plan {input.path}: {exc.strerror or type(exc).__name__}", is_error=True)
        if len(data) > MAX_PLAN_BYTES:
            return ToolOutput(f"The plan {input.path} is over {MAX_PLAN_BYTES:,} bytes; shorten it.", is_error=True)
        text = data.decode("utf-8", errors="replace")
    else:
        text = input.text or ""
        slug = _SLUG.sub("-", input.title.lower()).strip("-")[:60] or "plan"
        path = plans_dir / f"{slug}-{secrets.token_hex(3)}.md"
        try:
            replace_file(path, text.encode("utf-8", errors="surrogatepass"), (plans_dir,))
        except OSError as exc:
            return ToolOutput(f"Cannot save the plan: {exc.strerror or type(exc).__name__}", is_error=True)
    if not text.strip():
        return ToolOutput(
            "The plan is empty: write the plan first (a file in the plans folder, or text).", is_error=True
        )
    return path, text
