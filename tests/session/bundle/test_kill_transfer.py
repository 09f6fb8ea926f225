"""SIGKILL at each step of branch creation, export and import: no partial session, nothing delivered twice."""

from __future__ import annotations

import multiprocessing
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from lamina.engine import ContextEngine
from lamina.placement import SdkManagedTarget, render
from lamina.session import AssistantMessage, LocalSessionStore, OutboxRecord, export_session
from lamina.session._bundle import check_bundle
from tests.conftest import EXHAUSTIVE
from tests.session.bundle import _kill_steps
from tests.session.factories import exchange
from tests.support.engine import sdk_prompt

_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["tests.session.bundle._kill_steps"])


def _run(mode: str, root: Path, arg: str, extra: str, kill_at: int, count_file: Path) -> int | None:
    process = _CONTEXT.Process(target=_kill_steps.run, args=(mode, str(root), arg, extra, kill_at, str(count_file)))
    process.start()
    process.join(60)
    return process.exitcode


def _steps(total: int) -> list[int]:
    """Every operation in exhaustive runs; else up to 16 of them, the last ones (renames, fsyncs) always."""
    if EXHAUSTIVE or total <= 16:
        return list(range(total))
    spaced = {round(i * (total - 5) / 11) for i in range(12)}
    return sorted(spaced | set(range(total - 5, total)))


def _killed_at_each_step(
    tmp_path: Path, pristine: Path, mode: str, arg: str, extra: Callable[[Path], str], check: Callable[[Path], None]
) -> int:
    """Count the operations of a clean run, then kill a fresh copy at each step and `check` it."""
    clean = tmp_path / "clean"
    shutil.copytree(pristine, clean)
    count = tmp_path / "count"
    assert _run(mode, clean / "store", arg, extra(clean), -1, count) == 0
    total = int(count.read_text())
    check(clean)  # the finished work passes the same check
    for step in _steps(total):
        case = tmp_path / f"kill-{step}"
        shutil.copytree(pristine, case)
        assert _run(mode, case / "store", arg, extra(case), step, count) == -signal.SIGKILL, step
        check(case)
    return total


def _session(base: Path) -> tuple[str, list[str]]:
    store = LocalSessionStore(base / "store")
    with store.create(cwd=str(base / "ws")) as session:
        for n in range(3):
            for entry in exchange(n):
                session.append(entry)
        (session.folder / "plans" / "plan.md").write_text("# plan\n")
        ids = [e.id for e in session.entries() if isinstance(e, AssistantMessage)]
    return session.id, ids


@pytest.mark.slow
def test_sigkill_at_each_step_of_branch_creation(tmp_path: Path) -> None:
    pristine = tmp_path / "pristine"
    session_id, answers = _session(pristine)
    point = answers[1]
    with LocalSessionStore(pristine / "store").open(session_id, writable=False) as session:
        old_leaf = session.leaf_id

    def check(base: Path) -> None:
        store = LocalSessionStore(base / "store")
        with store.open(session_id) as session:  # writable: repairs a torn tail like the next writer would
            engine = ContextEngine(session, stable_source=lambda: ())
            seeds = [e for e in session.entries() if isinstance(e, OutboxRecord) and e.kind == "branch_seed"]
            leaf = session.get(session.leaf_id or "")
            if isinstance(leaf, OutboxRecord):  # the branch, whole: its seed is its first entry
                assert leaf.kind == "branch_seed" and leaf.parent_id == point and len(seeds) == 1
            else:  # no branch: the old leaf, and no seed anywhere on its path
                assert session.leaf_id == old_leaf and not seeds
            expected = 1 if isinstance(leaf, OutboxRecord) else 0
            first = engine.prepare_turn("after the crash")
            prompt = sdk_prompt(render(first, SdkManagedTarget()))
            assert prompt.count("<branch_seed>") == expected
            engine.commit(first)
            engine.record(AssistantMessage(text="ok"))
            second = engine.prepare_turn("and again")
            assert "<branch_seed>" not in sdk_prompt(render(second, SdkManagedTarget()))
            engine.end_turn()

    total = _killed_at_each_step(tmp_path, pristine, "branch", session_id, lambda _: point, check)
    assert total >= 8


@pytest.mark.slow
def test_sigkill_at_each_step_of_export(tmp_path: Path) -> None:
    pristine = tmp_path / "pristine"
    session_id, _ = _session(pristine)

    def check(base: Path) -> None:
        out = base / "out.zip"
        if out.exists():  # the whole bundle or none
            assert check_bundle(out).session_id == session_id
        assert [p.name for p in base.iterdir() if p.name.startswith("out.zip")] in ([], ["out.zip"])

    _killed_at_each_step(tmp_path, pristine, "export", session_id, lambda base: str(base / "out.zip"), check)


@pytest.mark.slow
def test_sigkill_at_each_step_of_import(tmp_path: Path) -> None:
    source = tmp_path / "source"
    session_id, _ = _session(source)
    pristine = tmp_path / "pristine"
    pristine.mkdir()
    bundle = export_session(LocalSessionStore(source / "store"), session_id, tmp_path / "bundle.zip").path

    def check(base: Path) -> None:
        store = LocalSessionStore(base / "store")
        rows = store.list()
        assert len(rows) <= 1  # a half-built import is never listed
        if not rows:
            return
        with store.open(rows[0].id) as session:
            assert session.report.clean, session.report.messages()
            assert (session.folder / "plans" / "plan.md").read_text() == "# plan\n"
            engine = ContextEngine(session, stable_source=lambda: ())
            first = engine.prepare_turn("first turn here")
            assert [o.kind for o in first.one_shots] == ["transfer_summary"]
            engine.commit(first)
            engine.record(AssistantMessage(text="ok"))
            assert engine.prepare_turn("second").one_shots == ()
            engine.end_turn()

    total = _killed_at_each_step(tmp_path, pristine, "import", str(bundle), lambda _: "/new/place", check)
    assert total >= 10


@pytest.mark.parametrize("total", [3, 16, 40])
def test_steps_always_include_the_last_operations(total: int) -> None:
    steps = _steps(total)
    assert set(range(max(0, total - 5), total)) <= set(steps) and all(0 <= s < total for s in steps)
