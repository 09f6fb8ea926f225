"""The wire server speaks what pi and Codex CLI send (streaming Anthropic Messages, streaming Responses).

Each peer runs for real through a short scripted session (`benchmarks._peers`); skipped, with the
reason, where `make peers` has not installed it or Node.js is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from benchmarks import _peers
from benchmarks._peers import PeerRun, PeerUnavailable, run_codex, run_pi
from benchmarks._revisit import RevisitShape, revisit_script
from benchmarks._scenario import session_script


@pytest.mark.parametrize("runner", [run_pi, run_codex], ids=["pi", "codex"])
def test_a_peer_follows_the_script_through_the_wire_server(runner: Callable[..., PeerRun]) -> None:
    script = session_script(turns=2, edit_turn=1)
    try:
        run = runner(script, progress=lambda _: None)
    except PeerUnavailable as exc:
        pytest.skip(str(exc))
    main = [r for r in run.requests if r.main]
    assert len(main) == sum(len(t.steps) for t in script)  # every scripted answer used, in order
    assert [r.turn for r in main] == [t.index for t in script for _ in t.steps]
    assert all(r.body.get("stream") for r in main)  # both stream
    assert any("Never push to main." in str(r.body) for r in main if r.turn == 1)  # the AGENTS.md edit seen


@pytest.mark.slow
@pytest.mark.parametrize("runner", [run_pi, run_codex], ids=["pi", "codex"])
def test_a_peer_that_keeps_every_file_is_never_asked_to_read_one_again(runner: Callable[..., PeerRun]) -> None:
    script = revisit_script(RevisitShape(turns=4, files=2, revisits=1))
    assert any(s.needs for t in script for s in t.steps)
    try:
        run = runner(script, progress=lambda _: None)
    except PeerUnavailable as exc:
        pytest.skip(str(exc))
    assert run.rereads == ()  # the needed file's content is found in the peer's own request body
    assert sum(r.main for r in run.requests) == sum(len(t.steps) for t in script)


def test_a_missing_peer_is_skipped_with_the_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(_peers, "PEERS_DIR", tmp_path / "nowhere")
    with pytest.raises(PeerUnavailable, match=r"make peers|Node\.js"):
        run_pi(session_script(turns=1), progress=lambda _: None)
