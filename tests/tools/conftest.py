"""Fixtures for the tool tests: a project folder, a data folder and a pipeline over them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lamina.tools import (
    AskCallback,
    OffloadPolicy,
    PermissionMode,
    Rule,
    Tool,
    ToolContext,
    ToolExecution,
    ToolPipeline,
    default_tools,
)
from tests.support.sandbox import BASH_SANDBOX


@dataclass
class Session:
    """A project folder (`root`), a data folder and a pipeline in execute mode over them."""

    root: Path
    data: Path
    outside: Path
    """A folder next to the project, outside every allowed root."""
    pipeline: ToolPipeline

    async def call(self, name: str, call_id: str = "call-1", **input: Any) -> ToolExecution:
        return await self.pipeline.execute(call_id, name, input)

    def put(self, relative: str, content: str | bytes = "text\n", *, base: Path | None = None) -> Path:
        path = (base or self.root) / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", newline="")
        return path

    def with_tools(
        self, tools: Iterable[Tool[Any]], *, rules: Iterable[Rule] = (), ask: AskCallback | None = None, **context: Any
    ) -> Session:
        ctx = dataclasses.replace(self.pipeline.context, **context)
        return dataclasses.replace(self, pipeline=ToolPipeline(tools, ctx, rules=rules, ask=ask))

    def with_context(self, **context: Any) -> Session:
        return self.with_tools(default_tools(sandbox=BASH_SANDBOX), **context)


@pytest.fixture
def session(tmp_path: Path) -> Session:
    root = tmp_path / "project"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    data = tmp_path / "data"
    ctx = ToolContext(cwd=root, data_dir=data, mode=PermissionMode.EXECUTE, offload=OffloadPolicy())
    return Session(
        root=root.resolve(),
        data=data.resolve(),
        outside=outside.resolve(),
        pipeline=ToolPipeline(default_tools(sandbox=BASH_SANDBOX), ctx),
    )
