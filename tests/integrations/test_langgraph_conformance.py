"""LangGraph's own checkpointer conformance suite, run unmodified on `LaminaCheckpointSaver`.

`langgraph-checkpoint-conformance` drives a saver through its async methods, with thread ids of
its own (`uuid4()`, `"thread-0"`). It runs on the in-memory, the JSONL and the PostgreSQL store,
once through the saver's async variants (each in a worker thread) and once through its sync
methods, called straight from the suite's coroutines. Any failed check fails the test, with the
suite's own message.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import BASE_CAPABILITIES
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from lamina.integrations.langgraph import LaminaCheckpointSaver
from lamina.session import InMemorySessionStore, LocalSessionStore, SessionStore
from tests.support.postgres import fresh_schema, schema_url


class SyncDriven(LaminaCheckpointSaver):
    """The saver with its sync methods behind the async names, as `InMemorySaver`'s async variants are."""

    async def aget_tuple(self, config: RunnableConfig) -> Any:
        return self.get_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[Any]:
        for item in self.list(config, filter=filter, before=before, limit=limit):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self.delete_thread(thread_id)


@contextlib.contextmanager
def _store(kind: str, folder: Path) -> Iterator[SessionStore]:
    """A fresh, empty store of `kind` (the suite expects a fresh checkpointer for each capability)."""
    if kind == "memory":
        with InMemorySessionStore(files_root=folder) as memory:
            yield memory
    elif kind == "jsonl":
        yield LocalSessionStore(folder)
    else:
        from lamina.session.postgres import PostgresSessionStore

        with fresh_schema("lgconf") as schema, PostgresSessionStore(schema_url(schema), files_root=folder) as pg:
            yield pg


# the suite makes some 60 sessions: seconds on a disk or a database, a fraction of one in memory
@pytest.mark.parametrize(
    "kind", ["memory", pytest.param("jsonl", marks=pytest.mark.slow), pytest.param("postgres", marks=pytest.mark.slow)]
)
@pytest.mark.parametrize("saver_class", [LaminaCheckpointSaver, SyncDriven], ids=["async", "sync"])
async def test_langgraph_conformance_suite_passes_completely(
    kind: str, saver_class: type[LaminaCheckpointSaver], tmp_path: Path
) -> None:
    fresh = itertools.count()

    @checkpointer_test(name=f"LaminaCheckpointSaver ({kind}, {saver_class.__name__})")
    async def lamina_saver() -> AsyncIterator[LaminaCheckpointSaver]:
        with _store(kind, tmp_path / f"store{next(fresh)}") as store:
            saver = saver_class(store)
            try:
                yield saver
            finally:
                saver.close()

    failed: list[str] = []

    def on_result(capability: str, test: str, passed: bool, error: str | None) -> None:
        if not passed:
            failed.append(f"{capability}/{test}: {error}")

    report = await validate(lamina_saver, progress=ProgressCallbacks(on_test_result=on_result))
    assert failed == []
    ran = {cap.value: report.results[cap.value] for cap in BASE_CAPABILITIES}
    assert all(r.detected and r.passed and r.tests_failed == 0 for r in ran.values()), ran
    assert sum(r.tests_passed for r in ran.values()) >= 58  # 0.0.2 has 58 base checks
    assert report.passed_all()
